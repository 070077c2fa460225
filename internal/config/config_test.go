package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/task"
)

// env returns a lookup over a fixed map.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func mustParse(t *testing.T, src string, vars map[string]string) (*config.Config, []config.Warning) {
	t.Helper()
	c, w, err := config.Parse([]byte(src), env(vars))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c, w
}

// problems parses src and returns the problems it reports; it fails the test
// when there are none.
func problems(t *testing.T, src string, vars map[string]string) config.Problems {
	t.Helper()
	c, _, err := config.Parse([]byte(src), env(vars))
	if err == nil {
		t.Fatalf("Parse succeeded, want problems")
	}
	if c != nil {
		t.Errorf("Parse returned a config along with problems")
	}
	var ps *config.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %T is not *config.Problems: %v", err, err)
	}
	return *ps
}

// problemCase is the end of a config file and every problem parsing it
// must report, in order.
type problemCase struct {
	yaml string
	want config.Problems
}

// checkProblems parses prefix+yaml of each case, with vars in the
// environment, and compares the problems reported with want.
func checkProblems(t *testing.T, prefix string, vars map[string]string, cases []problemCase) {
	t.Helper()
	for _, tc := range cases {
		got := problems(t, prefix+tc.yaml, vars)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.yaml, diff)
		}
	}
}

// validateProblems returns the problems c.Validate reports; it fails the
// test unless they come as *config.Problems.
func validateProblems(t *testing.T, c *config.Config) config.Problems {
	t.Helper()
	var ps *config.Problems
	if err := c.Validate(); !errors.As(err, &ps) {
		t.Fatalf("Validate = %v, want *Problems", err)
	}
	return *ps
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestGitHubOpenAIExample(t *testing.T) {
	c, warnings, err := config.Parse(readFile(t, "github-openai.yaml"),
		env(map[string]string{"GITHUB_TOKEN": "ghp_example", "OPENAI_API_KEY": "sk-example"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %v, want none", warnings)
	}
	want := &config.Config{
		TaskSource: "github",
		StateDir:   "./data",
		GitHub: config.GitHub{
			APIURL: "https://api.github.com", Token: "ghp_example", Owner: "acme",
			Repositories: []string{"acme/app", "acme/lib"},
			BotLabel:     "coding agent", ProcessingLabel: "coding agent processing",
			DoneLabel: "coding agent done", FailedLabel: "coding agent failed",
			PausedLabel: "coding agent paused", StoppedLabel: "coding agent stopped",
			AwaitingResponseLabel: "coding agent awaiting response",
		},
		GitLab: config.Default().GitLab,
		Gitea:  config.Default().Gitea,
		LLM: config.LLM{
			Provider: "openai", FunctionCalling: true, TimeoutSeconds: 600, CompactAt: 0.7,
			OpenAI: config.OpenAI{BaseURL: "https://api.openai.com/v1", APIKey: "sk-example",
				Model: "gpt-4o", MaxToken: 4096, ContextLength: 128000},
			LMStudio: config.LMStudio{BaseURL: "http://localhost:1234/v1"},
			Ollama:   config.Ollama{Endpoint: "http://localhost:11434"}, Constrained: config.ConstrainedOff,
		},
		MCPServers: []config.MCPServer{
			{
				Name:         "fs",
				Command:      []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/work"},
				SystemPrompt: "Use fs/* tools to read and write files under /work.",
			},
			{
				Name: "github",
				Command: []string{"docker", "run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN",
					"ghcr.io/github/github-mcp-server"},
				Env:          map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example"},
				SystemPrompt: "Use github/* tools to create branches, commits and pull requests.",
				Tools:        config.ToolFilter{Allow: []string{}, Deny: []string{"merge_pull_request", "delete_*"}},
			},
		},
		Tools:            config.Tools{CallTimeoutSeconds: 120, MaxResultBytes: 32768},
		MaxLLMProcessNum: 1000,
		Continuous: config.Continuous{Producer: config.Producer{IntervalMinutes: 1},
			Consumer: config.Consumer{Workers: 1}},
		Logging:          config.Logging{File: "logs/coding-agent.log", Level: "info", MaxAgeDays: 30},
		Language:         "ja",
		Planning:         config.Default().Planning, // every planning key is written out with its default
		CommentDetection: config.CommentDetection{Enabled: true, CheckInterval: 1, AllowedUsers: []string{}},
		Conversation: config.Conversation{
			Enabled: true, AllowCollaborators: true,
			CompletionKeywords: []string{"ありがとう", "ありがとうございます", "ありがとうございました",
				"完了", "OK", "了解", "承知", "thank you", "thanks", "done", "complete"},
			TimeoutHours: 24, MaxRounds: 10, PollSeconds: 30,
		},
		Trust:                config.Trust{LabelerNeedsWriteAccess: true, HearAuthorWithoutAccess: true},
		Comments:             config.Comments{Mode: config.CommentsLiving},
		ShutdownGraceSeconds: 5,
		LeaseSeconds:         60,
		ForgeLeaseSeconds:    new(300),
		Workspace: config.Workspace{Root: "./workspaces", Keep: config.KeepFailed, BuiltinTools: new(false),
			Checks: []string{}, CheckRounds: 2},
		Sandbox: config.Sandbox{Require: config.SandboxNamespaces, Network: config.NetworkOff, Setup: []string{},
			SetupWatch: config.DefaultSetupWatch(), CommandTimeoutSeconds: 300, MemoryMB: 2048, MaxProcesses: 256,
			MaxOutputBytes: 65536, Env: map[string]string{}, ReadOnlyPaths: []string{}},
		Delivery: config.Delivery{Enabled: true, Draft: true, BranchPrefix: "coding-agent/", MaxFileBytes: 5_000_000,
			Author: config.Identity{Name: "coding-agent", Email: "coding-agent@users.noreply.example"}},
		Queue: config.Queue{Type: config.QueueMemory, RabbitMQ: config.RabbitMQ{URL: "amqp://guest:guest@127.0.0.1:5672/",
			Name: "coding-agent", MaxDeliveries: 5}},
		Server: config.Server{KeepEventsDays: 30},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	wantLabels := task.Labels{Bot: "coding agent", Processing: "coding agent processing",
		Done: "coding agent done", Failed: "coding agent failed", Paused: "coding agent paused",
		Stopped: "coding agent stopped", Awaiting: "coding agent awaiting response"}
	if got := c.Labels(); got != wantLabels {
		t.Errorf("Labels() = %+v, want %+v", got, wantLabels)
	}
	if diff := cmp.Diff([]string{"ghp_example", "sk-example"}, c.Secrets()); diff != "" {
		t.Errorf("Secrets (-want +got):\n%s", diff)
	}
	if c.LLM.Timeout() != 10*time.Minute || c.Tools.CallTimeout() != 2*time.Minute ||
		c.Continuous.Producer.Interval() != time.Minute {
		t.Errorf("durations = %v %v %v", c.LLM.Timeout(), c.Tools.CallTimeout(), c.Continuous.Producer.Interval())
	}
}

func TestGitLabOllamaExample(t *testing.T) {
	c, warnings, err := config.Parse(readFile(t, "gitlab-ollama.yaml"),
		env(map[string]string{"GITLAB_TOKEN": "glpat-example"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %v, want none", warnings)
	}
	want := config.Default()
	want.TaskSource = "gitlab"
	want.GitLab.Token = "glpat-example"
	want.GitLab.Projects = []string{"123", "group/other"}
	want.LLM.Provider = "ollama"
	want.LLM.FunctionCalling = false
	want.LLM.Ollama = config.Ollama{Endpoint: "http://localhost:11434", Model: "qwen3:14b", ContextLength: 32768}
	want.MCPServers = []config.MCPServer{
		{
			Name:         "fs",
			Command:      []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/work"},
			SystemPrompt: "Use fs/* tools to read and write files under /work.",
		},
		{
			Name:    "gitlab",
			Command: []string{"npx", "-y", "@zereight/mcp-gitlab"},
			Env: map[string]string{"GITLAB_PERSONAL_ACCESS_TOKEN": "glpat-example",
				"GITLAB_API_URL": "https://gitlab.com/api/v4"},
			SystemPrompt: "Use gitlab/* tools to create branches, commits and merge requests.",
		},
	}
	want.Continuous.Producer.IntervalMinutes = 0.5
	want.Continuous.Consumer.Workers = 2
	want.Logging.Level = "debug"
	want.Logging.Stdout = true
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if got := c.Continuous.Producer.Interval(); got != 30*time.Second {
		t.Errorf("Interval() = %v, want 30s", got)
	}
	if got := c.Labels().Processing; got != "coding agent processing" {
		t.Errorf("Labels().Processing = %q", got)
	}
	if got := c.Logging.SlogLevel().String(); got != "DEBUG" {
		t.Errorf("SlogLevel() = %s", got)
	}
}

const minimalGitHub = `
task_source: github
github:
  token: t
  owner: acme
llm:
  provider: lmstudio
  lmstudio:
    model: m
`

func TestMinimalConfigTakesEveryDefault(t *testing.T) {
	c, _ := mustParse(t, minimalGitHub, nil)
	want := config.Default()
	want.TaskSource = "github"
	want.GitHub.Token = "t"
	want.GitHub.Owner = "acme"
	want.LLM.Provider = "lmstudio"
	want.LLM.LMStudio.Model = "m"
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

func TestShutdownGrace(t *testing.T) {
	if c, _ := mustParse(t, minimalGitHub, nil); c.ShutdownGrace() != 5*time.Second {
		t.Errorf("default grace %v, want 5s", c.ShutdownGrace())
	}
	if c, _ := mustParse(t, minimalGitHub+"shutdown_grace_seconds: 0\n", nil); c.ShutdownGrace() != 0 {
		t.Errorf("grace %v, want 0: the step in hand is cut at once", c.ShutdownGrace())
	}
	got := problems(t, minimalGitHub+"shutdown_grace_seconds: -1\n", nil)
	want := config.Problems{{Path: "shutdown_grace_seconds", Msg: "must be from 0 to 3600 (an hour)", Line: 10}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestForgeLease(t *testing.T) {
	// A host with a store of its own holds its tasks on the forge unless
	// told it is alone: other hosts may watch the same repositories.
	if c, _ := mustParse(t, minimalGitHub, nil); c.ForgeLease() != 5*time.Minute {
		t.Errorf("default forge lease %v, want 5m", c.ForgeLease())
	}
	if c, _ := mustParse(t, minimalGitHub+"forge_lease_seconds: 0\n", nil); c.ForgeLease() != 0 {
		t.Errorf("forge lease %v, want 0 (off)", c.ForgeLease())
	}
	// A shared store's lease holds the tasks: no holder comment.
	if c, _ := mustParse(t, minimalGitHub+"database: {url: \"postgres://db.example/agent\"}\n", nil); c.ForgeLease() != 0 {
		t.Errorf("default forge lease with a shared database %v, want 0 (off)", c.ForgeLease())
	}
	if c, _ := mustParse(t, minimalGitHub+"forge_lease_seconds: 300\n", nil); c.ForgeLease() != 5*time.Minute {
		t.Errorf("forge lease %v, want 5m", c.ForgeLease())
	}
	got := problems(t, minimalGitHub+"database: {url: \"postgres://db.example/agent\"}\nforge_lease_seconds: 300\n", nil)
	if len(got) != 1 || got[0].Path != "forge_lease_seconds" || !strings.Contains(got[0].Msg, "database.url") {
		t.Errorf("forge lease with a shared database: problems %v", got)
	}
	for _, v := range []string{"-1", "29"} {
		got := problems(t, minimalGitHub+"forge_lease_seconds: "+v+"\n", nil)
		want := config.Problems{{Path: "forge_lease_seconds", Msg: "must be 0 (off) or from 30 to 86400 (a day)", Line: 10}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: problems (-want +got):\n%s", v, diff)
		}
	}
}

func TestFunctionCalling(t *testing.T) {
	for _, tc := range []struct {
		line string
		vars map[string]string
		want bool
	}{
		{"", nil, true},
		{"  function_calling: false\n", nil, false},
		{"  function_calling: true\n", nil, true},
		{"  function_calling: ~\n", nil, true},
		{"  function_calling:\n", nil, true},
		{"  function_calling: ${FC}\n", map[string]string{"FC": "false"}, false},
		{"  function_calling: ${FC:-false}\n", nil, false},
	} {
		c, _ := mustParse(t, minimalGitHub+tc.line, tc.vars)
		if c.LLM.FunctionCalling != tc.want {
			t.Errorf("%q: FunctionCalling = %v, want %v", tc.line, c.LLM.FunctionCalling, tc.want)
		}
	}
}

// llm.constrained is off unless set to auto (YAML's bare off stays the
// word, not false); anything else is refused with the values it takes.
func TestConstrained(t *testing.T) {
	for line, want := range map[string]string{
		"": config.ConstrainedOff, "  constrained: off\n": config.ConstrainedOff, "  constrained: auto\n": config.ConstrainedAuto,
		"  constrained: ${MODE}\n": config.ConstrainedAuto,
	} {
		c, _ := mustParse(t, minimalGitHub+line, map[string]string{"MODE": "auto"})
		if c.LLM.Constrained != want {
			t.Errorf("%q: Constrained = %q, want %q", line, c.LLM.Constrained, want)
		}
	}
	for _, v := range []string{"on", "true", "json_schema", `""`} {
		got := problems(t, minimalGitHub+"  constrained: "+v+"\n", nil)
		want := config.Problems{{Path: "llm.constrained", Msg: "must be one of: off, auto", Line: 10}}
		if v == `""` {
			want[0].Msg = "required (one of: off, auto)"
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: problems (-want +got):\n%s", v, diff)
		}
	}
}

func TestProjectID(t *testing.T) {
	const head = "task_source: gitlab\nllm: {provider: ollama, ollama: {model: m}}\ngitlab:\n  token: t\n"
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"  project_id: 123\n", []string{"123"}},
		{"  project_id: group/project\n", []string{"group/project"}},
		{"  project_id: \"group/sub/project\"\n", []string{"group/sub/project"}},
		{"  project_id: [123, \"group/other\", 7]\n", []string{"123", "group/other", "7"}},
		{"  project_id:\n    - 42\n    - a/b\n", []string{"42", "a/b"}},
		{"  project_id: ${PID}\n", []string{"99"}},
		{"  group: my-group\n", nil},
	} {
		c, _ := mustParse(t, head+tc.yaml, map[string]string{"PID": "99"})
		if diff := cmp.Diff(tc.want, c.GitLab.Projects); diff != "" {
			t.Errorf("%q: Projects (-want +got):\n%s", tc.yaml, diff)
		}
	}

	got := problems(t, head+"  project_id: [noslash, {a: 1}, 1.5]\n", nil)
	want := config.Problems{
		{Path: "gitlab.project_id[0]", Msg: `must be a numeric ID or a "group/project" path`, Line: 5},
		{Path: "gitlab.project_id[1]", Msg: "expected a single value, got a mapping", Line: 5},
		{Path: "gitlab.project_id[2]", Msg: `must be a numeric ID or a "group/project" path`, Line: 5},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, readFile(t, "github-openai.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GITHUB_TOKEN", "ghp_fromenv")
	t.Setenv("OPENAI_API_KEY", "sk-fromenv")
	c, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.GitHub.Token != "ghp_fromenv" || c.LLM.OpenAI.APIKey != "sk-fromenv" {
		t.Errorf("secrets not read from the environment")
	}

	if _, _, err := config.Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want ErrNotExist", err)
	}

	if err := os.WriteFile(path, []byte("task_source: gitlab\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = config.Load(path)
	var ps *config.Problems
	if !errors.As(err, &ps) || len(*ps) == 0 {
		t.Fatalf("invalid file: err = %v, want *Problems", err)
	}
}

func TestSecrets(t *testing.T) {
	c, _ := mustParse(t, `
task_source: github
github: {token: gh-token, owner: acme}
gitlab: {token: gl-token}
llm:
  provider: ollama
  ollama: {model: m, endpoint: "http://user:url-password@localhost:11434"}
  openai: {api_key: gh-token}
database: {url: "postgres://agent:db-pass%40word@db.example:5432/agent?sslmode=require"}
mcp_servers:
  - mcp_server_name: a
    command: [a]
    env: {API_KEY: k1, DB_PASSWORD: pw-long-value, Auth_Header: hdr, HOME: /home/x, EMPTY_TOKEN: "", PASS: p,
      GITHUB_PERSONAL_ACCESS_TOKEN: ghp_env, slackAuthToken: xoxb-env,
      KEYRING_BACKEND: file, AUTHOR: someone, PASSTHROUGH: all, MONKEY: banana, AUTH_ENABLED: "true", KEY_PORT: "8080"}
`, nil)
	// Longest first (ties in byte order), each once, empty ones left out.
	// Names that only contain a secret's word, and switches and small
	// numbers, are not secrets.
	// A URL's password comes as written too (percent-escaped).
	want := []string{"db-pass%40word", "pw-long-value", "db-pass@word", "url-password", "gh-token", "gl-token", "xoxb-env", "ghp_env", "hdr", "k1", "p"}
	if diff := cmp.Diff(want, c.Secrets()); diff != "" {
		t.Errorf("Secrets (-want +got):\n%s", diff)
	}
}

func TestDatabaseURL(t *testing.T) {
	const msg = "must be a postgres:// or postgresql:// URL (or empty for the embedded SQLite store)"
	checkProblems(t, head+gh, map[string]string{"DATABASE_URL": "mysql://u:p@db/x"}, []problemCase{
		{"database:\n  url: ${DATABASE_URL}\n", config.Problems{{Path: "database.url", Msg: msg, Line: 7}}},
		{"database: {url: \"http://db.example/agent\"}\n", config.Problems{{Path: "database.url", Msg: msg, Line: 6}}},
		{"database: {url: \"postgres://u:p@[::1/db\"}\n", config.Problems{{Path: "database.url", Msg: msg, Line: 6}}},
		{"database: {type: sqlite}\n", config.Problems{{Path: "database.type", Msg: "unknown key", Line: 6}}},
	})
	for _, ok := range []string{"postgres://agent:pw@db.example:5432/agent?sslmode=require",
		"postgresql:///agent?host=/var/run/postgresql", ""} {
		if c, _ := mustParse(t, head+gh+"database: {url: \""+ok+"\"}\n", nil); c.Database.URL != ok {
			t.Errorf("database.url = %q, want %q", c.Database.URL, ok)
		}
	}
	c, _ := mustParse(t, head+gh+"database:\n  url: ${DATABASE_URL}\n",
		map[string]string{"DATABASE_URL": "postgres://agent@db.example/agent"})
	if c.Database.URL != "postgres://agent@db.example/agent" || !c.Database.Postgres() {
		t.Errorf("database = %+v, Postgres() = %v; want the URL from the environment", c.Database, c.Database.Postgres())
	}
	if d := config.Default().Database; d.Postgres() {
		t.Errorf("default database %+v is not the embedded store", d)
	}
}
