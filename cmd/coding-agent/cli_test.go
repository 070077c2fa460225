package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

const (
	token  = "ghp_cliTestTokenDoNotPrint0123456789"
	apiKey = "sk-cliTestKeyDoNotPrint0123456789"
)

// cli runs the command line in-process and returns its exit code and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// configOptions shape the config file a test writes.
type configOptions struct {
	apiURL string // GitHub REST root; "" → https://api.github.com
	mcp    string // the MCP server command, a YAML flow list; "" → ["true"]
	extra  string // YAML appended at the end
}

// writeConfig writes a valid GitHub + OpenAI config in a temporary
// directory (state and log inside it) and returns its path.
func writeConfig(t *testing.T, o configOptions) string {
	t.Helper()
	dir := t.TempDir()
	if o.apiURL == "" {
		o.apiURL = "https://api.github.com"
	}
	if o.mcp == "" {
		o.mcp = `["true"]`
	}
	body := fmt.Sprintf(`task_source: github
state_dir: %s
github:
  api_url: %s
  token: %s
  repositories: [acme/app]
llm:
  provider: openai
  openai:
    base_url: %s
    api_key: %s
    model: gpt-4o
mcp_servers:
  - mcp_server_name: tools
    command: %s
logging:
  file: %s
  level: debug
planning:
  history:
    directory: %s
%s`, filepath.Join(dir, "data"), o.apiURL, token, modelServer(t), apiKey, o.mcp, filepath.Join(dir, "logs", "agent.log"),
		filepath.Join(dir, "planning_history"), o.extra)
	return writeFile(t, dir, body)
}

// modelServer is the OpenAI root of a model server that lists the config's
// model (a command that works on tasks checks that it answers) and answers
// anything in prose.
func modelServer(t *testing.T) string {
	t.Helper()
	return llmtest.NewServer(t, llmtest.Options{APIKey: apiKey, Models: []string{"gpt-4o"},
		Responder: func(llmtest.Received) llmtest.Step { return llmtest.Reply{Content: "Hello."} }}).OpenAIURL()
}

func writeFile(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noSecrets fails when a token or key shows in any of outs.
func noSecrets(t *testing.T, outs ...string) {
	t.Helper()
	for _, out := range outs {
		for _, s := range []string{token, apiKey, "DoNotPrint"} {
			if strings.Contains(out, s) {
				t.Errorf("output carries a secret (%q):\n%s", s, out)
			}
		}
	}
}

func TestNoArgsPrintsUsage(t *testing.T) {
	code, stdout, stderr := cli(t)
	if code != exitUsage {
		t.Errorf("exit code %d, want %d", code, exitUsage)
	}
	if !strings.HasPrefix(stderr, "usage: coding-agent") || !strings.Contains(stderr, "config check") {
		t.Errorf("stderr does not hold the usage:\n%s", stderr)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing", stdout)
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"help", "-h", "--help"} {
		code, stdout, _ := cli(t, arg)
		if code != exitOK {
			t.Errorf("%s: exit code %d, want %d", arg, code, exitOK)
		}
		if !strings.HasPrefix(stdout, "usage: coding-agent") {
			t.Errorf("%s: stdout does not hold the usage:\n%s", arg, stdout)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	// No config file exists here: an unknown command is reported as such,
	// not as a missing config.
	t.Chdir(t.TempDir())
	code, _, stderr := cli(t, "frobnicate")
	if code != exitUsage {
		t.Errorf("exit code %d, want %d", code, exitUsage)
	}
	if !strings.Contains(stderr, `unknown command "frobnicate"`) || strings.Contains(stderr, "reading config file") {
		t.Errorf("stderr does not name the unknown command (or talks of the config):\n%s", stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	cfg := writeConfig(t, configOptions{})
	tests := []struct {
		name, wantErr string
		args          []string
	}{
		{"config without check", "usage: coding-agent config check", []string{"config"}},
		{"config with another verb", "usage: coding-agent config check", []string{"config", "lint"}},
		{"extra argument", `unexpected argument "extra"`, []string{"config", "check", "--config", cfg, "extra"}},
		{"extra argument before flags", `unexpected argument "now"`, []string{"status", "now", "--config", cfg}},
		{"unknown flag", "flag provided but not defined: -verbose", []string{"status", "--verbose"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := cli(t, tt.args...)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantErr, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
		})
	}
}

func TestConfigCheckOK(t *testing.T) {
	code, stdout, stderr := cli(t, "config", "check", "--config", writeConfig(t, configOptions{}))
	if code != exitOK || stdout != "ok\n" {
		t.Errorf("exit code %d, stdout %q; want %d and \"ok\\n\"\nstderr:\n%s", code, stdout, exitOK, stderr)
	}
	if stderr != "" {
		t.Errorf("stderr = %q, want nothing for a clean config", stderr)
	}
}

func TestConfigCheckListsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, fmt.Sprintf(`task_source: github
state_dir: %s
github:
  token: %s
  repositories: [acme/app, not-a-repo]
  tokne: %s
  done_label: coding agent
llm:
  provider: openai
  openai:
    api_key: %s
max_llm_process_num: 0
logging:
  file: %s
  level: loud
`, filepath.Join(dir, "data"), token, token, apiKey, filepath.Join(dir, "agent.log")))
	code, stdout, stderr := cli(t, "config", "check", "--config", path)
	if code != exitUsage {
		t.Errorf("exit code %d, want %d", code, exitUsage)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing", stdout)
	}
	for _, key := range []string{"github.repositories[1]", "github.tokne", "github.done_label", "llm.openai.model",
		"max_llm_process_num", "logging.level"} {
		if !strings.Contains(stderr, "  "+key) {
			t.Errorf("stderr lacks a problem line for %s:\n%s", key, stderr)
		}
	}
	noSecrets(t, stdout, stderr)
}

func TestConfigCheckYAMLErrorHidesSecret(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "task_source: github\ngithub:\n  token: \""+token+"\n  owner: [acme\n")
	code, _, stderr := cli(t, "config", "check", "--config", path)
	if code != exitUsage || !strings.Contains(stderr, "invalid YAML") {
		t.Errorf("exit code %d, stderr:\n%s\nwant %d and an invalid YAML problem", code, stderr, exitUsage)
	}
	noSecrets(t, stderr)
}

func TestConfigCheckFutureKeyWarns(t *testing.T) {
	cfg := writeConfig(t, configOptions{extra: "metrics:\n  enabled: true\n"})
	code, stdout, stderr := cli(t, "config", "check", "--config", cfg)
	if code != exitOK || stdout != "ok\n" {
		t.Errorf("exit code %d, stdout %q; want %d and \"ok\\n\"\nstderr:\n%s", code, stdout, exitOK, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "warning: metrics") || !strings.Contains(lines[0], "set server.listen") {
		t.Errorf("stderr = %q, want one warning line saying server.listen serves metrics", stderr)
	}
}

func TestConfigCheckMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	code, stdout, stderr := cli(t, "config", "check", "--config", path)
	if code != exitUsage {
		t.Errorf("exit code %d, want %d", code, exitUsage)
	}
	if stdout != "" || !strings.Contains(stderr, path) || !strings.Contains(stderr, "reading config file") ||
		!strings.Contains(stderr, "no such file") {
		t.Errorf("stdout %q, stderr:\n%s\nwant the path and why it could not be read", stdout, stderr)
	}
}

// closedURL returns the URL of a server that is gone: connections to it are
// refused.
func closedURL(t *testing.T) string {
	t.Helper()
	// On 127.0.0.2, which the tests' own servers (on 127.0.0.1) never
	// take: a closed port there stays closed while parallel tests start
	// servers of their own.
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func TestStatusFreshStateDir(t *testing.T) {
	// status reads the store only: the forge being unreachable does not matter.
	cfg := writeConfig(t, configOptions{apiURL: closedURL(t)})
	code, stdout, stderr := cli(t, "status", "--config", cfg)
	if code != exitOK {
		t.Fatalf("exit code %d, want %d\nstderr:\n%s", code, exitOK, stderr)
	}
	want := "no tasks yet — the store at " + filepath.Join(filepath.Dir(cfg), "data", "coding-agent.db") + " does not exist\n"
	if stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
	if stderr != "" {
		t.Errorf("stderr = %q, want nothing", stderr)
	}
}

// TestRunForgeUnreachable waits through the real retry backoff (1s, 2s, 4s
// with jitter, about 8s): the CLI does not expose the app's Sleep hook.
func TestRunForgeUnreachable(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, configOptions{apiURL: closedURL(t), mcp: fmt.Sprintf("[%q]", mcptest.Build(t))})
	code, stdout, stderr := cli(t, "run", "--config", cfg)
	if code != exitFailure {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", code, exitFailure, stderr)
	}
	for _, want := range []string{"coding-agent run:", "discovering tasks", "connection refused"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	noSecrets(t, stdout, stderr, readLog(t, cfg))
}

// TestRunForgeRejectsToken: a forge whose error message repeats the token
// (as a careless proxy might) must not get it printed.
func TestRunForgeRejectsToken(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"message":"Bad credentials: %s","documentation_url":"https://docs.github.com/rest"}`,
			r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	cfg := writeConfig(t, configOptions{apiURL: srv.URL, mcp: fmt.Sprintf("[%q]", mcptest.Build(t))})
	code, stdout, stderr := cli(t, "run", "--config", cfg)
	if code != exitFailure {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", code, exitFailure, stderr)
	}
	for _, want := range []string{"coding-agent run:", "discovering tasks", "Bad credentials"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	noSecrets(t, stdout, stderr, readLog(t, cfg))
}

// readLog returns the log file the config in cfg writes (the config puts
// it beside the file).
func readLog(t *testing.T, cfg string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(cfg), "logs", "agent.log"))
	if err != nil {
		t.Fatalf("reading the log: %v", err)
	}
	return string(b)
}

// pause, resume and stop take one task ref, before or after the flags.
func TestSignalCommandsNeedARef(t *testing.T) {
	cfg := writeConfig(t, configOptions{})
	for _, args := range [][]string{
		{"pause", "--config", cfg},
		{"stop", "github:acme/app", "--config", cfg},
		{"resume", "jira:acme/app#1", "--config", cfg},
	} {
		code, _, stderr := cli(t, args...)
		if code != exitUsage || !strings.Contains(stderr, args[0]) {
			t.Errorf("%q: exit code %d, stderr %q; want %d naming the command", args, code, stderr, exitUsage)
		}
	}
	// A ref for the other forge is refused once the config is read.
	code, _, stderr := cli(t, "pause", "--config", cfg, "gitlab:acme/app#3")
	if code != exitFailure || !strings.Contains(stderr, "task_source is github") {
		t.Errorf("exit code %d, stderr %q; want %d and the task source mismatch", code, stderr, exitFailure)
	}
}

// doctor prints its lines on stdout and exits 1 when a check failed: here
// the forge does not answer, while the model server does.
func TestDoctorExitsOneOnAFailedCheck(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, configOptions{apiURL: closedURL(t), mcp: fmt.Sprintf("[%q]", mcptest.Build(t))})
	code, stdout, stderr := cli(t, "doctor", "--config", cfg)
	if code != exitFailure {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", code, exitFailure, stderr)
	}
	for _, want := range []string{"FAIL  forge  github: ", "connection refused", `ok    model  openai at `, "ok    mcp    tools started with"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	noSecrets(t, stdout, stderr, readLog(t, cfg))
}
