package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// lintScript runs dockerfile-utils (the npm package behind the Docker
// language server) on standard input with every optional check at the
// error level, and prints its diagnostics as JSON.
const lintScript = `
const {validate} = require('dockerfile-utils');
const text = require('fs').readFileSync(0, 'utf8');
const error = 2; // ValidationSeverity.ERROR
const settings = {deprecatedMaintainer: error, directiveCasing: error, emptyContinuationLine: error,
  instructionCasing: error, instructionCmdMultiple: error, instructionEntrypointMultiple: error,
  instructionHealthcheckMultiple: error, instructionJSONInSingleQuotes: error, instructionWorkdirRelative: error};
process.stdout.write(JSON.stringify(validate(text, settings).map(d => ({line: d.range.start.line + 1, message: d.message}))));
`

// lint returns the linter's findings on a Dockerfile, one "line N: message"
// each. Without Node or the package (npm ci installs it) the test is
// skipped, or failed under CI.
func lint(t *testing.T, dockerfile string) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join("..", "node_modules", "dockerfile-utils")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the Dockerfile linter is not installed (npm ci installs it): %v", err)
		}
		t.Skipf("the Dockerfile linter is not installed: run npm ci (%v)", err)
	}
	cmd := exec.Command("node", "-e", lintScript)
	cmd.Dir = ".." // require() looks in the repository's node_modules
	cmd.Stdin = strings.NewReader(dockerfile)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("running dockerfile-utils: %v", err)
	}
	var diags []struct {
		Line    int    `json:"line"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(out, &diags); err != nil {
		t.Fatalf("dockerfile-utils said %q: %v", out, err)
	}
	var found []string
	for _, d := range diags {
		found = append(found, fmt.Sprintf("line %d: %s", d.Line, d.Message))
	}
	return found
}

func TestDockerfileLints(t *testing.T) {
	if found := lint(t, readRepoFile(t, "Dockerfile")); len(found) != 0 {
		t.Errorf("dockerfile-utils:\n%s", strings.Join(found, "\n"))
	}
	// The linter finds what it should: the check can fail.
	bad := "FROM alpine AS a\nfrom alpine\nWORKDIR rel\nCOPY --frm=a x y\nCMD [\"a\"]\nCMD [\"b\"]\n"
	if found := lint(t, bad); len(found) < 4 {
		t.Errorf("a Dockerfile with four faults: %q", found)
	}
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case
	args string
}

// parseDockerfile splits a Dockerfile into instructions (comments and
// blank lines dropped, "\" continuations joined).
func parseDockerfile(text string) []instruction {
	var (
		out  []instruction
		cur  strings.Builder
		from int
	)
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if cur.Len() == 0 {
			from = i + 1
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{line: from, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// stage is a build stage: its name and instructions.
type stage struct {
	name, base string
	ins        []instruction
}

func stages(ins []instruction) []stage {
	var out []stage
	for _, in := range ins {
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			s := stage{base: f[len(f)-1]}
			if len(f) >= 3 && strings.EqualFold(f[len(f)-2], "AS") {
				s.name, s.base = f[len(f)-1], f[len(f)-3]
			}
			out = append(out, s)
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].ins = append(out[len(out)-1].ins, in)
		}
	}
	return out
}

var (
	copyFrom   = regexp.MustCompile(`--from=(\S+)`)
	aptGit     = regexp.MustCompile(`apt-get install [^&;]*\bgit\b`)
	secretName = regexp.MustCompile(`(?i)(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_KEY|CREDENTIAL)`)
	// Values a token or key of a known kind begins with.
	secretValue = regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{20,}|glpat-[A-Za-z0-9_-]{20,}|sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16})`)
)

// dockerfileProblems checks the house rules of the Dockerfile: the stages
// a COPY --from names exist and come before it; the binary is built static
// (CGO_ENABLED=0); each stage an image is made from (static, full) runs as a
// user other than root and starts the binary in exec form; full has git,
// Node.js and npm; no ARG or ENV names a secret and no known token shape
// appears anywhere.
func dockerfileProblems(text string) []string {
	var ps []string
	ss := stages(parseDockerfile(text))
	var names []string
	for _, s := range ss {
		for _, in := range s.ins {
			if m := copyFrom.FindStringSubmatch(in.args); in.cmd == "COPY" && m != nil && !slices.Contains(names, m[1]) {
				ps = append(ps, fmt.Sprintf("line %d: COPY --from=%s names no earlier stage", in.line, m[1]))
			}
			if (in.cmd == "ARG" || in.cmd == "ENV") && secretName.MatchString(in.args) {
				ps = append(ps, fmt.Sprintf("line %d: %s %s: a secret is never built into an image", in.line, in.cmd, in.args))
			}
		}
		names = append(names, s.name)
	}
	if m := secretValue.FindString(text); m != "" {
		ps = append(ps, "a token is written in the Dockerfile: "+m[:6]+"…")
	}
	byName := map[string]stage{}
	for _, s := range ss {
		byName[s.name] = s
	}
	build := byName["build"]
	if !slices.ContainsFunc(build.ins, func(in instruction) bool {
		return in.cmd == "RUN" && strings.Contains(in.args, "CGO_ENABLED=0 go build")
	}) {
		ps = append(ps, "stage build: the binary is not built with CGO_ENABLED=0")
	}
	for _, name := range []string{"static", "full"} {
		s, ok := byName[name]
		if !ok {
			ps = append(ps, "no stage "+name)
			continue
		}
		user := ""
		for _, in := range s.ins {
			switch in.cmd {
			case "USER":
				user = in.args
			case "ENTRYPOINT", "CMD":
				if !strings.HasPrefix(in.args, "[") || !json.Valid([]byte(in.args)) {
					ps = append(ps, fmt.Sprintf("line %d: %s is not in exec form (a JSON list): signals would go to a shell", in.line, in.cmd))
				}
			}
		}
		if u, _, _ := strings.Cut(user, ":"); u == "" || u == "root" || u == "0" {
			ps = append(ps, "stage "+name+": runs as root (no USER, or USER root)")
		}
	}
	if full, ok := byName["full"]; ok {
		var runs strings.Builder
		for _, in := range full.ins {
			if in.cmd == "RUN" {
				runs.WriteString(in.args + " ")
			}
		}
		if !aptGit.MatchString(runs.String()) || !strings.HasPrefix(full.base, "node:") {
			ps = append(ps, "stage full: without git (apt-get install) or Node.js (a node: base image)")
		}
	}
	if last := ss[len(ss)-1]; last.name != "full" {
		ps = append(ps, "the default target (the last stage) is "+last.name+", not full")
	}
	return ps
}

func TestDockerfileStructure(t *testing.T) {
	if ps := dockerfileProblems(readRepoFile(t, "Dockerfile")); len(ps) != 0 {
		t.Errorf("Dockerfile:\n%s", strings.Join(ps, "\n"))
	}
	// The secrets and the state beside the Dockerfile stay out of the
	// build context.
	ignored := strings.Fields(readRepoFile(t, ".dockerignore"))
	for _, p := range []string{".env", "config.yaml", "node_modules", "data", "workspaces", ".git"} {
		if !slices.Contains(ignored, p) {
			t.Errorf(".dockerignore lacks %s", p)
		}
	}
}

// Each rule finds its fault: the structural check can fail.
func TestDockerfileStructureCanFail(t *testing.T) {
	good := readRepoFile(t, "Dockerfile")
	for _, tc := range []struct{ old, new, want string }{
		{"COPY --from=build /out/coding-agent /usr/local/bin/coding-agent\nCOPY --from=build --chown=10001:10001 /out/root/var/lib/coding-agent /var/lib/coding-agent\nUSER coding-agent",
			"COPY --from=builder /out/coding-agent /usr/local/bin/coding-agent\nUSER coding-agent", "COPY --from=builder names no earlier stage"},
		{"USER coding-agent", "USER root", "stage full: runs as root"},
		{"USER 10001:10001", "USER 0:0", "stage static: runs as root"},
		{"CGO_ENABLED=0 go build", "go build", "CGO_ENABLED=0"},
		{"ARG COMMIT=unknown", "ARG GITHUB_TOKEN", "a secret is never built into an image"},
		{"NPM_CONFIG_FUND=false", "NPM_CONFIG_FUND=false OPENAI=sk-abcdefghijklmnopqrstuvwxyz", "a token is written"},
		{"ca-certificates git tini", "ca-certificates tini", "without git"},
		{`CMD ["serve", "--config", "/etc/coding-agent/config.yaml"]` + "\n\nFROM node", "CMD serve --config /etc/coding-agent/config.yaml\n\nFROM node", "not in exec form"},
	} {
		bad := strings.Replace(good, tc.old, tc.new, 1)
		if bad == good {
			t.Fatalf("the mutation %q did not apply", tc.old)
		}
		ps := dockerfileProblems(bad)
		if !slices.ContainsFunc(ps, func(p string) bool { return strings.Contains(p, tc.want) }) {
			t.Errorf("%q → %q: problems %q, want one saying %q", tc.old, tc.new, ps, tc.want)
		}
	}
}

// imageProblems checks what the image needs to start and be watched: each
// image stage (static, full) has a HEALTHCHECK in exec form that runs
// coding-agent health with the config CMD serves, sets SERVER_LISTEN (the
// starter config's listener) on a port it EXPOSEs; full installs the npm
// MCP servers of deploy/mcp at build time with npm ci (the lock pinned) and
// nothing in it fetches a package with npx at run time.
func imageProblems(text string) []string {
	var ps []string
	byName := map[string]stage{}
	for _, s := range stages(parseDockerfile(text)) {
		byName[s.name] = s
	}
	for _, name := range []string{"static", "full"} {
		s := byName[name]
		var health, cmd, listen, expose string
		for _, in := range s.ins {
			switch in.cmd {
			case "HEALTHCHECK":
				health = in.args
			case "CMD":
				cmd = in.args
			case "EXPOSE":
				expose = in.args
			case "ENV":
				if m := regexp.MustCompile(`\bSERVER_LISTEN=(\S+)`).FindStringSubmatch(in.args); m != nil {
					listen = m[1]
				}
			}
		}
		var serve []string
		_ = json.Unmarshal([]byte(cmd), &serve)
		config := ""
		if i := slices.Index(serve, "--config"); i >= 0 && i+1 < len(serve) {
			config = serve[i+1]
		}
		_, probe, _ := strings.Cut(health, "CMD ")
		var argv []string
		if err := json.Unmarshal([]byte(probe), &argv); err != nil || len(argv) < 4 ||
			!strings.HasSuffix(argv[0], "coding-agent") || argv[1] != "health" || !slices.Equal(argv[2:], []string{"--config", config}) {
			ps = append(ps, fmt.Sprintf("stage %s: HEALTHCHECK %q, want CMD [coding-agent, health, --config, %s] in exec form", name, health, config))
		}
		if _, port, ok := strings.Cut(listen, ":"); !ok || !strings.HasPrefix(listen, "0.0.0.0:") || port != expose {
			ps = append(ps, fmt.Sprintf("stage %s: SERVER_LISTEN=%q, EXPOSE %q: want 0.0.0.0:PORT and that port exposed", name, listen, expose))
		}
	}
	var runs []string
	for _, in := range byName["full"].ins {
		if in.cmd == "RUN" || in.cmd == "COPY" || in.cmd == "CMD" || in.cmd == "ENTRYPOINT" {
			runs = append(runs, in.args)
		}
	}
	all := strings.Join(runs, "\n")
	if !strings.Contains(all, "deploy/mcp/package.json deploy/mcp/package-lock.json") || !regexp.MustCompile(`\bnpm ci\b`).MatchString(all) {
		ps = append(ps, "stage full: the npm MCP servers of deploy/mcp are not installed with npm ci from their lock file")
	}
	if regexp.MustCompile(`\bnpx\b|npm (install|i) `).MatchString(all) {
		ps = append(ps, "stage full: npx or npm install fetches what the lock does not pin")
	}
	return ps
}

func TestDockerfileHealthAndPinnedServers(t *testing.T) {
	good := readRepoFile(t, "Dockerfile")
	if ps := imageProblems(good); len(ps) != 0 {
		t.Errorf("Dockerfile:\n%s", strings.Join(ps, "\n"))
	}
	for _, tc := range [][2]string{
		{"HEALTHCHECK", "# HEALTHCHECK"},
		{"EXPOSE 8080", "EXPOSE 9090"},
		{"npm ci", "npm install"},
	} {
		if bad := strings.Replace(good, tc[0], tc[1], 1); bad == good || len(imageProblems(bad)) == 0 {
			t.Errorf("%q → %q: not found", tc[0], tc[1])
		}
	}
}

// The servers the image installs are the ones the tests run: each package
// deploy/mcp's lock pins has the version and integrity the repository's
// lock (npm ci for the tests) has, and deploy/mcp asks for the version the
// repository's package.json names.
func TestImageServersAreTheTestedOnes(t *testing.T) {
	type lock struct {
		Packages map[string]struct {
			Version      string            `json:"version"`
			Integrity    string            `json:"integrity"`
			Dependencies map[string]string `json:"dependencies"`
		} `json:"packages"`
	}
	type pkg struct {
		Dependencies, DevDependencies map[string]string
	}
	read := func(name string, v any) {
		if err := json.Unmarshal([]byte(readRepoFile(t, name)), v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var mine, tested lock
	var minePkg, testedPkg pkg
	read("deploy/mcp/package-lock.json", &mine)
	read("package-lock.json", &tested)
	read("deploy/mcp/package.json", &minePkg)
	read("package.json", &testedPkg)
	if len(minePkg.Dependencies) == 0 {
		t.Fatal("deploy/mcp/package.json names no server")
	}
	for name, v := range minePkg.Dependencies {
		if testedPkg.DevDependencies[name] != v {
			t.Errorf("%s %s in the image, %q in the tests", name, v, testedPkg.DevDependencies[name])
		}
		if got := mine.Packages[""].Dependencies[name]; got != v {
			t.Errorf("deploy/mcp's lock asks for %s %q, its package.json %s: run npm install --package-lock-only there", name, got, v)
		}
	}
	for path, p := range mine.Packages {
		if path == "" {
			continue
		}
		q, ok := tested.Packages[path]
		if !ok || q.Version != p.Version || q.Integrity != p.Integrity || p.Integrity == "" {
			t.Errorf("%s: %s %s in the image's lock, %s %s in the tests'", path, p.Version, p.Integrity, q.Version, q.Integrity)
		}
	}
}
