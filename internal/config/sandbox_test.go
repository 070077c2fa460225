package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/config"
)

// processServer is an mcp_servers list (line 6 after head+gh) whose one
// server is process-scoped: a config that gives tasks no workspace unless
// workspace.builtin_tools says so.
const processServer = "mcp_servers: [{mcp_server_name: gh, command: [gh-mcp]}]\n"

// taskServer is the same with a task-scoped server.
const taskServer = "mcp_servers: [{mcp_server_name: fs, scope: task, command: [fs-mcp, \"${WORKSPACE}\"]}]\n"

// Every new key's default, from a file that writes none of them.
func TestSandboxDefaults(t *testing.T) {
	c, warnings := mustParse(t, head+gh, nil)
	if len(warnings) != 0 {
		t.Errorf("warnings %v, want none", warnings)
	}
	wantSandbox := config.Sandbox{
		Require: config.SandboxNamespaces, Network: config.NetworkOff,
		SetupWatch: []string{"requirements*.txt", "pyproject.toml", "setup.py", "setup.cfg", "Pipfile", "Pipfile.lock",
			"poetry.lock", "uv.lock", "package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock",
			"pnpm-lock.yaml", "go.mod", "go.sum", "Cargo.toml", "Cargo.lock", "Gemfile", "Gemfile.lock",
			"composer.json", "composer.lock"},
		CommandTimeoutSeconds: 300, MemoryMB: 2048, MaxProcesses: 256, MaxOutputBytes: 65536,
	}
	if diff := cmp.Diff(wantSandbox, c.Sandbox); diff != "" {
		t.Errorf("sandbox (-want +got):\n%s", diff)
	}
	if w := c.Workspace; w.BuiltinTools != nil || w.Checks != nil || w.CheckRounds != 2 {
		t.Errorf("workspace %+v, want builtin_tools unset, no checks, check_rounds 2", w)
	}
	if c.Delivery.MaxFileBytes != 5_000_000 {
		t.Errorf("delivery.max_file_bytes = %d, want 5000000", c.Delivery.MaxFileBytes)
	}
	if !c.BuiltinTools() || !c.TaskWorkspaces() {
		t.Errorf("BuiltinTools %v, TaskWorkspaces %v: want both on without mcp_servers", c.BuiltinTools(), c.TaskWorkspaces())
	}
	if got := c.Sandbox.CommandTimeout(); got != 5*time.Minute {
		t.Errorf("CommandTimeout = %v", got)
	}
	// The default list is a copy: changing it changes no later default.
	d := config.DefaultSetupWatch()
	d[0] = "changed"
	if config.Default().Sandbox.SetupWatch[0] != "requirements*.txt" {
		t.Error("DefaultSetupWatch shares its array")
	}
	if c.MCPServers != nil || config.Default().Sandbox.Env != nil || c.Sandbox.ReadOnlyPaths != nil {
		t.Error("unexpected non-nil defaults")
	}
}

// Every new key is read.
func TestSandboxKeysRead(t *testing.T) {
	c, _ := mustParse(t, head+gh+taskServer+`workspace:
  builtin_tools: false
  checks: ["python3 -m unittest", "go vet ./... && test -z \"$(gofmt -l .)\""]
  check_rounds: 0
sandbox:
  require: landlock
  network: on
  setup: ["pip install -r requirements.txt"]
  setup_watch: [requirements.txt, "web/*.json"]
  command_timeout_seconds: 3600
  memory_mb: 64
  max_processes: 8
  max_output_bytes: 1048576
  env: {GOFLAGS: -mod=mod, CARGO_HOME: "${HOME_DIR}/cargo"}
  read_only_paths: [/opt/go, "${HOME_DIR}/.cache/go-build"]
delivery:
  max_file_bytes: 1
`, map[string]string{"HOME_DIR": "/home/agent"})
	want := config.Sandbox{Require: config.SandboxLandlock, Network: config.NetworkOn,
		Setup: []string{"pip install -r requirements.txt"}, SetupWatch: []string{"requirements.txt", "web/*.json"},
		CommandTimeoutSeconds: 3600, MemoryMB: 64, MaxProcesses: 8, MaxOutputBytes: 1 << 20,
		Env:           map[string]string{"GOFLAGS": "-mod=mod", "CARGO_HOME": "/home/agent/cargo"},
		ReadOnlyPaths: []string{"/opt/go", "/home/agent/.cache/go-build"}}
	if diff := cmp.Diff(want, c.Sandbox); diff != "" {
		t.Errorf("sandbox (-want +got):\n%s", diff)
	}
	w := c.Workspace
	if w.BuiltinTools == nil || *w.BuiltinTools || w.CheckRounds != 0 ||
		!slices.Equal(w.Checks, []string{"python3 -m unittest", `go vet ./... && test -z "$(gofmt -l .)"`}) {
		t.Errorf("workspace %+v", w)
	}
	if c.Delivery.MaxFileBytes != 1 {
		t.Errorf("delivery.max_file_bytes = %d", c.Delivery.MaxFileBytes)
	}
	if c.BuiltinTools() || !c.TaskWorkspaces() {
		t.Errorf("BuiltinTools %v, TaskWorkspaces %v: want off, and a workspace for the task-scoped server",
			c.BuiltinTools(), c.TaskWorkspaces())
	}
	c, _ = mustParse(t, head+gh+"mcp_servers: [{mcp_server_name: t, scope: task, sandbox: true, command: [t]}]\n", nil)
	if !c.MCPServers[0].Sandbox {
		t.Error("mcp_servers[0].sandbox not read")
	}
}

// workspace.builtin_tools: written, it decides; unset, it is on unless
// mcp_servers are configured and none is task-scoped. TaskWorkspaces is
// the built-in tools or a task-scoped server.
func TestBuiltinToolsDefault(t *testing.T) {
	for _, tc := range []struct {
		name, yaml       string
		builtin, workDir bool
	}{
		{"no servers", "", true, true},
		{"a task-scoped server", taskServer, true, true},
		{"process-scoped servers only", processServer, false, false},
		{"both kinds", "mcp_servers: [{mcp_server_name: gh, command: [gh]}, {mcp_server_name: fs, scope: task, command: [fs]}]\n", true, true},
		{"off, no servers", "workspace: {builtin_tools: false}\n", false, false},
		{"off, a task-scoped server", taskServer + "workspace: {builtin_tools: false}\n", false, true},
		{"on, process-scoped servers only", processServer + "workspace: {builtin_tools: true}\n", true, true},
		{"null is unset", processServer + "workspace: {builtin_tools: ~}\n", false, false},
	} {
		c, _ := mustParse(t, head+gh+tc.yaml, nil)
		if c.BuiltinTools() != tc.builtin || c.TaskWorkspaces() != tc.workDir {
			t.Errorf("%s: BuiltinTools %v, TaskWorkspaces %v; want %v, %v", tc.name,
				c.BuiltinTools(), c.TaskWorkspaces(), tc.builtin, tc.workDir)
		}
	}
}

func TestSandboxProblems(t *testing.T) {
	const noWorkspace = "needs a workspace, and no task gets one: set workspace.builtin_tools: true " +
		"(off by default when every mcp_servers entry is process-scoped), or give an mcp_servers entry scope: task"
	const noWorkspaceOff = "needs a workspace, and no task gets one: set workspace.builtin_tools: true, " +
		"or give an mcp_servers entry scope: task"
	checkProblems(t, head+gh, nil, []problemCase{
		{"workspace:\n  checks: [\"\", \" \"]\n", config.Problems{
			{Path: "workspace.checks[0]", Msg: "must be a command line", Line: 7},
			{Path: "workspace.checks[1]", Msg: "must be a command line", Line: 7}}},
		{"workspace:\n  check_rounds: -1\n", config.Problems{{Path: "workspace.check_rounds", Msg: "must be from 0 to 100", Line: 7}}},
		{"workspace:\n  builtin_tools: yes please\n", config.Problems{{Path: "workspace.builtin_tools", Msg: "expected true or false, got a string", Line: 7}}},
		{"workspace:\n  check: [make test]\n", config.Problems{{Path: "workspace.check", Msg: `unknown key (did you mean "checks"?)`, Line: 7}}},
		{"workspace:\n  checks: make test\n", config.Problems{{Path: "workspace.checks", Msg: "expected a list, got a string", Line: 7}}},
		{processServer + "workspace:\n  checks: [make test]\nsandbox:\n  setup: [make deps]\n  setup_watch: [deps.txt]\n",
			config.Problems{
				{Path: "sandbox.setup", Msg: noWorkspace, Line: 10},
				{Path: "sandbox.setup_watch", Msg: noWorkspace, Line: 11},
				{Path: "workspace.checks", Msg: noWorkspace, Line: 8}}},
		{"workspace:\n  builtin_tools: false\n  checks: [make test]\n",
			config.Problems{{Path: "workspace.checks", Msg: noWorkspaceOff, Line: 8}}},
		{"sandbox:\n  require: namespace\n", config.Problems{{Path: "sandbox.require",
			Msg: `must be one of: namespaces, landlock, none (did you mean "namespaces"?)`, Line: 7}}},
		{"sandbox:\n  require: \"\"\n", config.Problems{{Path: "sandbox.require", Msg: "must be one of: namespaces, landlock, none", Line: 7}}},
		{"sandbox:\n  network: false\n", config.Problems{{Path: "sandbox.network", Msg: "must be one of: off, on", Line: 7}}},
		{"sandbox:\n  netwrok: on\n", config.Problems{{Path: "sandbox.netwrok", Msg: `unknown key (did you mean "network"?)`, Line: 7}}},
		{"sandbox:\n  setup: [\"\"]\n", config.Problems{{Path: "sandbox.setup[0]", Msg: "must be a command line", Line: 7}}},
		{"sandbox:\n  setup_watch: [\"\", \"[a-\", /etc/passwd, ../x.lock, a/../../b]\n", config.Problems{
			{Path: "sandbox.setup_watch[0]", Msg: "must be a file name or a glob such as requirements*.txt", Line: 7},
			{Path: "sandbox.setup_watch[1]", Msg: `must be a valid glob (path.Match syntax: * ? [a-z], \ escapes)`, Line: 7},
			{Path: "sandbox.setup_watch[2]", Msg: "must be a path relative to the checkout, without a leading / or ..", Line: 7},
			{Path: "sandbox.setup_watch[3]", Msg: "must be a path relative to the checkout, without a leading / or ..", Line: 7},
			{Path: "sandbox.setup_watch[4]", Msg: "must be a path relative to the checkout, without a leading / or ..", Line: 7}}},
		{"sandbox:\n  command_timeout_seconds: 0\n", config.Problems{{Path: "sandbox.command_timeout_seconds", Msg: "must be from 1 to 3600", Line: 7}}},
		{"sandbox:\n  command_timeout_seconds: 3601\n", config.Problems{{Path: "sandbox.command_timeout_seconds", Msg: "must be from 1 to 3600", Line: 7}}},
		{"sandbox:\n  memory_mb: 63\n", config.Problems{{Path: "sandbox.memory_mb", Msg: "must be from 64 to 1048576 (1 TiB)", Line: 7}}},
		{"sandbox:\n  max_processes: 7\n", config.Problems{{Path: "sandbox.max_processes", Msg: "must be from 8 to 32768", Line: 7}}},
		{"sandbox:\n  max_output_bytes: 1023\n", config.Problems{{Path: "sandbox.max_output_bytes", Msg: "must be from 1024 to 1048576 (1 MiB)", Line: 7}}},
		{"sandbox:\n  max_output_bytes: 1048577\n", config.Problems{{Path: "sandbox.max_output_bytes", Msg: "must be from 1024 to 1048576 (1 MiB)", Line: 7}}},
		{"sandbox:\n  env:\n    1ST: x\n    A-B: y\n    OK_1: z\n", config.Problems{
			{Path: "sandbox.env.1ST", Msg: "must be a variable name: letters, digits and _, not starting with a digit", Line: 8},
			{Path: "sandbox.env.A-B", Msg: "must be a variable name: letters, digits and _, not starting with a digit", Line: 9}}},
		{"sandbox:\n  env: [A=b]\n", config.Problems{{Path: "sandbox.env", Msg: "expected a mapping, got a list", Line: 7}}},
		{"sandbox:\n  read_only_paths: [\"\", ~/.cache/go-build, opt/go, /, //., /opt/../]\n", config.Problems{
			{Path: "sandbox.read_only_paths[0]", Msg: "must be a directory", Line: 7},
			{Path: "sandbox.read_only_paths[1]", Msg: "must be an absolute path (~ is not expanded: write ${HOME}/...)", Line: 7},
			{Path: "sandbox.read_only_paths[2]", Msg: "must be an absolute path", Line: 7},
			{Path: "sandbox.read_only_paths[3]", Msg: "must not be /: the commands would read every file, the agent's secrets and store among them", Line: 7},
			{Path: "sandbox.read_only_paths[4]", Msg: "must not be /: the commands would read every file, the agent's secrets and store among them", Line: 7},
			{Path: "sandbox.read_only_paths[5]", Msg: "must not be /: the commands would read every file, the agent's secrets and store among them", Line: 7}}},
		{"sandbox: {timeout_seconds: 5}\n", config.Problems{{Path: "sandbox.timeout_seconds", Msg: "unknown key", Line: 6}}},
		{"delivery:\n  max_file_bytes: 0\n", config.Problems{{Path: "delivery.max_file_bytes", Msg: "must be from 1 to 1073741824 (1 GiB)", Line: 7}}},
		{"delivery:\n  max_file_bytes: -5\n", config.Problems{{Path: "delivery.max_file_bytes", Msg: "must be from 1 to 1073741824 (1 GiB)", Line: 7}}},
		{"mcp_servers: [{mcp_server_name: t, sandbox: true, command: [t]}]\n", config.Problems{{Path: "mcp_servers[0].sandbox",
			Msg: "needs scope: task: a sandbox is the task's checkout, and a process-scoped server serves every task", Line: 6}}},
		{"mcp_servers: [{mcp_server_name: t, scope: process, sandbox: true, command: [t]}]\n", config.Problems{{Path: "mcp_servers[0].sandbox",
			Msg: "needs scope: task: a sandbox is the task's checkout, and a process-scoped server serves every task", Line: 6}}},
		{"mcp_servers: [{mcp_server_name: workspace, scope: task, command: [t]}]\n", config.Problems{{Path: "mcp_servers[0].mcp_server_name",
			Msg: "is the built-in tools' server name: rename this server, or set workspace.builtin_tools: false", Line: 6}}},
	})
	// Allowed: the default setup_watch (or none) without a workspace; the
	// checks without delivery; a server named workspace without the
	// built-in tools; $NAME inside the checks and the setup (shell lines).
	for _, ok := range []string{
		processServer,
		processServer + "sandbox: {setup_watch: []}\n",
		"workspace: {checks: [make test]}\ndelivery: {enabled: false}\n",
		"workspace: {builtin_tools: false}\nmcp_servers: [{mcp_server_name: workspace, scope: task, command: [t]}]\n",
		"workspace: {checks: [\"test -n \\\"$HOME\\\" && make test\"]}\nsandbox: {setup: [\"pip install --user -r $REQS\"]}\n",
	} {
		if _, _, err := config.Parse([]byte(head+gh+ok), nil); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	// Outside them an upper-case $NAME is still taken for a forgotten ${NAME}.
	checkProblems(t, head+gh, nil, []problemCase{
		{"sandbox: {setup_watch: [\"$LOCKFILE\"]}\n", config.Problems{{Path: "sandbox.setup_watch[0]",
			Msg: "$LOCKFILE is not expanded: write ${LOCKFILE} to take it from the environment (or $$LOCKFILE for a literal $LOCKFILE)", Line: 6}}},
	})
}

func TestSandboxWarnings(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []config.Warning
	}{
		{"", nil},
		{"workspace: {builtin_tools: false}\n", []config.Warning{{Path: "mcp_servers",
			Msg: "none configured: the agent would have no tools, and could only write comments (workspace.builtin_tools is false)"}}},
		{processServer + "workspace: {builtin_tools: false}\n", nil},
		{"sandbox:\n  require: none\n", []config.Warning{{Path: "sandbox.network", Msg: "off is kept only where the host gives " +
			"namespaces or Landlock: with sandbox.require: none, on a host without either the commands run with the network " +
			"(coding-agent doctor says what this host gives)"}}},
		{"sandbox:\n  require: none\n  network: off\n", []config.Warning{{Path: "sandbox.network", Line: 8, Msg: "off is kept only where the host gives " +
			"namespaces or Landlock: with sandbox.require: none, on a host without either the commands run with the network " +
			"(coding-agent doctor says what this host gives)"}}},
		{"sandbox:\n  require: none\n  network: on\n", nil},
		{"sandbox:\n  require: landlock\n", nil},
		{"sandbox:\n  env:\n    NPM_TOKEN: ${NPM_TOKEN}\n    PIP_INDEX_URL: https://pypi.example/simple\n    CI_AUTH: \"true\"\n",
			[]config.Warning{{Path: "sandbox.env.NPM_TOKEN", Line: 8, Msg: "is taken for a secret: it is redacted from logs and comments, " +
				"but the model's commands can read it, and could write it into the work that is delivered"}}},
	} {
		_, got := mustParse(t, head+gh+tc.yaml, map[string]string{"NPM_TOKEN": "npm_secret_value"})
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.yaml, diff)
		}
	}
}

// A sandbox.env value whose name says it is a secret is redacted like the
// tokens; switches, small numbers and other names are not.
func TestSandboxEnvSecrets(t *testing.T) {
	c, _ := mustParse(t, head+"github: {token: gh-token, owner: acme}\n"+`sandbox:
  env:
    NPM_TOKEN: npm-secret-value
    CARGO_REGISTRY_TOKEN: ${CARGO}
    PIP_PASSWORD: pip-pw
    USE_AUTH_TOKEN: "true"
    KEY_PORT: "8080"
    GOFLAGS: -mod=mod
    EMPTY_SECRET: ""
`, map[string]string{"CARGO": "cargo-from-env"})
	want := []string{"npm-secret-value", "cargo-from-env", "gh-token", "pip-pw"}
	if diff := cmp.Diff(want, c.Secrets()); diff != "" {
		t.Errorf("Secrets (-want +got):\n%s", diff)
	}
}

// uv.lock is among the files watched by default.
func TestSetupWatchDefault(t *testing.T) {
	if !slices.Contains(config.DefaultSetupWatch(), "uv.lock") {
		t.Error("uv.lock is not watched by default")
	}
}

func TestPrivatePathsHoldWhatCommandsMustNotRead(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("token", []byte("ghp_fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	body := "task_source: github\ngithub: {token_file: token, repositories: [acme/app]}\n" +
		"llm: {provider: openai, openai: {api_key: sk-example, model: gpt-4o}, record: rec/model.jsonl}\nstate_dir: state\n" +
		"logging: {file: logs/agent.log}\nworkspace: {root: ws}\n"
	if err := os.WriteFile("config.yaml", []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, err := config.Load("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.File != filepath.Join(dir, "config.yaml") {
		t.Errorf("File = %q", c.File)
	}
	got := c.PrivatePaths()
	for _, want := range []string{"config.yaml", "token", "state", "logs", "ws", "planning_history", "rec/model.jsonl"} {
		if !slices.Contains(got, filepath.Join(dir, want)) {
			t.Errorf("PrivatePaths() = %v, want %s in it", got, filepath.Join(dir, want))
		}
	}
}

// Without a log file (logging.file: "", the log on stderr only) nothing stands for its folder: the working directory
// (filepath.Dir of "") is not hidden for it.
func TestPrivatePathsWithoutALogFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	body := "task_source: github\ngithub: {token: ghp_x, repositories: [acme/app]}\n" +
		"llm: {provider: openai, openai: {api_key: sk-example, model: gpt-4o}}\nstate_dir: state\nlogging: {file: \"\", stdout: true}\n"
	if err := os.WriteFile("config.yaml", []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, err := config.Load("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.PrivatePaths(); slices.Contains(got, dir) {
		t.Errorf("PrivatePaths() = %v hides the working directory %s", got, dir)
	}
}
