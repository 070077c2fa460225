package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/buildtest"
	"github.com/coding-agent/coding-agent/internal/config"
)

// Each command's --help exits 0 on stdout and lists its own flags only.
func TestEachCommandHasItsOwnHelp(t *testing.T) {
	flagLine := regexp.MustCompile(`(?m)^  -([\w-]+)`)
	want := map[string][]string{
		"run": {"config", "dry-run", "quiet"}, "serve": {"config", "quiet"}, "produce": {"config", "once", "quiet"},
		"consume": {"config", "once", "quiet"}, "doctor": {"config", "fix"},
		"status": {"config", "json"}, "pause": {"config"}, "resume": {"config"}, "stop": {"config"},
		"release": {"config"}, "config check": {"config"}, "init": {"force", "forge", "language", "output", "provider"},
		"version": nil, "health": {"config"},
	}
	for _, c := range commands {
		for _, help := range []string{"--help", "-h"} {
			args := append(strings.Fields(c.name), help)
			code, stdout, stderr := cli(t, args...)
			if code != exitOK || stderr != "" {
				t.Errorf("%q: exit code %d, stderr %q; want %d and nothing", args, code, stderr, exitOK)
			}
			if !strings.HasPrefix(stdout, "usage: coding-agent "+c.name) {
				t.Errorf("%q: stdout does not begin with the command's usage:\n%s", args, stdout)
			}
			var got []string
			for _, m := range flagLine.FindAllStringSubmatch(stdout, -1) {
				got = append(got, m[1])
			}
			if !slices.Equal(got, want[c.name]) {
				t.Errorf("%q lists flags %q, want %q:\n%s", args, got, want[c.name], stdout)
			}
		}
	}
	if len(want) != len(commands) {
		t.Errorf("%d commands, %d expected: a new command needs its line here", len(commands), len(want))
	}
	// A flag of another command is refused.
	code, _, stderr := cli(t, "run", "--once")
	if code != exitUsage || !strings.Contains(stderr, "flag provided but not defined: -once") {
		t.Errorf("run --once: exit code %d, stderr %q", code, stderr)
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := cli(t, "version")
	if code != exitOK || !regexp.MustCompile(`^coding-agent \S+ \(commit \S+, go1\.\d+`).MatchString(stdout) {
		t.Errorf("exit code %d, stdout %q", code, stdout)
	}
}

// The version and commit come from -ldflags -X, and without them the commit
// is the one the go command stamped into the binary from the checkout. (The
// go command stamps none in a git worktree, whose .git is a file: there the
// commit is "unknown", and this test checks that much.)
func TestVersionOfABuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	dir := t.TempDir()
	build := func(name string, ldflags ...string) (bin, out string) {
		bin = filepath.Join(dir, name)
		args := append([]string{"build", "-buildvcs=auto", "-o", bin}, ldflags...)
		err := buildtest.Locked(func() error { // in turn with the other tests' builds
			if b, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
				return fmt.Errorf("go build: %v\n%s", err, b)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		b, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("%s version: %v", name, err)
		}
		return bin, string(b)
	}
	if _, got := build("stamped", "-ldflags", "-X main.version=v1.2.3 -X main.commit=abc123"); !strings.HasPrefix(got, "coding-agent v1.2.3 (commit abc123, go") {
		t.Errorf("with -ldflags: %q", got)
	}
	bin, got := build("plain")
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "unknown"
	if m := regexp.MustCompile(`vcs\.revision=(\w+)`).FindSubmatch(info); m != nil {
		want = string(m[1])
		if strings.Contains(string(info), "vcs.modified=true") {
			want += "-dirty"
		}
	} else if root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output(); err == nil {
		if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(root)), ".git")); err == nil && fi.IsDir() {
			t.Errorf("built in a git checkout, but the go command stamped no revision:\n%s", info)
		}
	}
	version := "dev" // a build the go command stamped no version into
	if m := regexp.MustCompile(`(?m)^\tmod\t\S+\t(\S+)`).FindSubmatch(info); m != nil && string(m[1]) != "(devel)" {
		version = string(m[1]) // the version it derived from the checkout
	}
	if !strings.HasPrefix(got, "coding-agent "+version+" (commit "+want+", go") {
		t.Errorf("without -ldflags: %q, want %s and the commit %s", got, version, want)
	}
}

func TestVCSRevision(t *testing.T) {
	for _, tc := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{nil, "unknown"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "false"}}, "0123abc"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: "0123abc"}}, "0123abc-dirty"},
	} {
		if got := vcsRevision(tc.settings); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.settings, got, tc.want)
		}
	}
}

func TestConfigCheckTakesTheFileEitherWay(t *testing.T) {
	cfg := writeConfig(t, configOptions{})
	for _, args := range [][]string{
		{"config", "check", cfg},
		{"config", "check", "--config", cfg},
		{"config", "check", cfg, "--config", cfg},
	} {
		code, stdout, stderr := cli(t, args...)
		if code != exitOK || stdout != "ok\n" {
			t.Errorf("%q: exit code %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	code, _, stderr := cli(t, "config", "check", "other.yaml", "--config", cfg)
	if code != exitUsage || !strings.Contains(stderr, `unexpected argument "other.yaml" (the file is given by --config already)`) {
		t.Errorf("two files: exit code %d, stderr %q", code, stderr)
	}
}

func TestConfigCheckWarnsWithoutTools(t *testing.T) {
	path := writeConfig(t, configOptions{})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)mcp_servers:.*?\nlogging:`).ReplaceAllString(string(data), "workspace: {builtin_tools: false}\nlogging:")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cli(t, "config", "check", path)
	if code != exitOK || stdout != "ok\n" || !strings.Contains(stderr, "warning: mcp_servers: none configured: the agent would have no tools") {
		t.Errorf("exit code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestMissingConfigSaysToRunInit(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"run"}, {"status"}, {"config", "check"}} {
		code, _, stderr := cli(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "config.yaml") || !strings.Contains(stderr, "coding-agent init --forge") {
			t.Errorf("%q: exit code %d, stderr %q", args, code, stderr)
		}
	}
}

// init writes a starter config for every forge and provider that config
// check accepts once the placeholders' variables are set; it never
// overwrites a file unless --force.
func TestInitOutputPassesConfigCheck(t *testing.T) {
	dir := t.TempDir()
	for _, forge := range config.Forges {
		for _, provider := range config.Providers {
			path := filepath.Join(dir, forge+"-"+provider+".yaml")
			code, stdout, stderr := cli(t, "init", "--forge", forge, "--provider", provider, "--output", path)
			if code != exitOK || !strings.HasPrefix(stdout, "wrote "+path) || stderr != "" {
				t.Fatalf("init %s %s: exit code %d, stdout %q, stderr %q", forge, provider, code, stdout, stderr)
			}
			for _, v := range config.StarterVariables(forge, provider) {
				if !strings.Contains(stdout, v) {
					t.Errorf("init %s %s: stdout does not name %s: %q", forge, provider, v, stdout)
				}
			}
			for _, v := range config.StarterVariables(forge, provider) {
				t.Setenv(v, "") // restored at the end
				os.Unsetenv(v)
			}
			code, _, stderr = cli(t, "config", "check", path)
			if code != exitUsage || !strings.Contains(stderr, "is not set") {
				t.Errorf("%s: config check without the variables: exit code %d, stderr %q", path, code, stderr)
			}
			for _, v := range config.StarterVariables(forge, provider) {
				t.Setenv(v, "placeholder-"+v)
			}
			code, stdout, stderr = cli(t, "config", "check", path)
			if code != exitOK || stdout != "ok\n" || stderr != "" {
				t.Errorf("%s: config check: exit code %d, stdout %q, stderr %q", path, code, stdout, stderr)
			}
		}
	}
	path := filepath.Join(dir, "github-openai.yaml")
	if err := os.WriteFile(path, []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cli(t, "init", "--forge", "github", "--provider", "openai", "--output", path)
	if b, _ := os.ReadFile(path); code != exitFailure || string(b) != "mine\n" || !strings.Contains(stderr, "--force") {
		t.Errorf("init over a file: exit code %d, stderr %q, file %q", code, stderr, b)
	}
	code, _, _ = cli(t, "init", "--forge", "github", "--provider", "openai", "--output", path, "--force")
	if b, _ := os.ReadFile(path); code != exitOK || !bytes.HasPrefix(b, []byte("# coding-agent")) {
		t.Errorf("init --force: exit code %d, file %q", code, b)
	}
	for _, args := range [][]string{{"init"}, {"init", "--forge", "github"}, {"init", "--forge", "jira", "--provider", "openai"}} {
		if code, _, stderr := cli(t, args...); code != exitUsage || stderr == "" {
			t.Errorf("%q: exit code %d, stderr %q", args, code, stderr)
		}
	}
}

// init writes English comments by default and Japanese ones with
// --language ja, a config that config check accepts and loads as such; an
// unknown language is a usage error.
func TestInitLanguage(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GITHUB_TOKEN", "placeholder")
	t.Setenv("OPENAI_API_KEY", "placeholder")
	for lang, args := range map[string][]string{"en": nil, "ja": {"--language", "ja"}} {
		path := filepath.Join(dir, lang+".yaml")
		if code, _, stderr := cli(t, append([]string{"init", "--forge", "github", "--provider", "openai", "--output", path}, args...)...); code != exitOK {
			t.Fatalf("init %v: exit code %d, %s", args, code, stderr)
		}
		c, _, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if c.Language != lang || c.Comments.Mode != config.CommentsLiving {
			t.Errorf("init %v: language %q, comments.mode %q; want %s and living", args, c.Language, c.Comments.Mode, lang)
		}
	}
	if code, _, stderr := cli(t, "init", "--forge", "github", "--provider", "openai", "--output", filepath.Join(dir, "x.yaml"),
		"--language", "fr"); code != exitUsage || !strings.Contains(stderr, "unknown language") {
		t.Errorf("init --language fr: exit code %d, stderr %q", code, stderr)
	}
}

// status needs no token in the environment and leaves an empty folder
// empty; with --json it prints JSON.
func TestStatusNeedsNoTokens(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if code, _, stderr := cli(t, "init", "--forge", "gitlab", "--provider", "openai"); code != exitOK {
		t.Fatalf("init: %s", stderr)
	}
	t.Setenv("GITLAB_TOKEN", "")
	os.Unsetenv("OPENAI_API_KEY")
	code, stdout, stderr := cli(t, "status")
	if code != exitOK || stdout != "no tasks yet — the store at data/coding-agent.db does not exist\n" || stderr != "" {
		t.Errorf("status: exit code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = cli(t, "status", "--json")
	var tasks []any
	if err := json.Unmarshal([]byte(stdout), &tasks); code != exitOK || err != nil || len(tasks) != 0 {
		t.Errorf("status --json: exit code %d, %v, stdout %q", code, err, stdout)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the folder holds %v, want config.yaml alone", entries)
	}
}
