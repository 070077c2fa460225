package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/config"
)

func TestSeveralProblemsReportedTogether(t *testing.T) {
	const src = `task_source: github
github:
  api_url: not a url
  tokn: x
  repositories: [acme/app, justname, acme/app]
  bot_label: same
  processing_label: same
llm:
  provider: openai
  timeout_seconds: 0
  openai:
    api_key: ${OPENAI_API_KEY}
mcp_servers:
  - mcp_server_name: fs
    command: [npx]
  - mcp_server_name: fs
  - mcp_server_name: "bad name"
    command: [x]
tools:
  call_timeout_seconds: -1
max_llm_process_num: "many"
continuous:
  consumer:
    workers: 0
  producer:
    interval_minutes: 0
logging:
  level: verbose
  file: ""
metrics:
  enabled: true
`
	got := problems(t, src, nil)
	want := config.Problems{
		{Path: "continuous.consumer.workers", Msg: "must be from 1 to 256", Line: 24},
		{Path: "continuous.producer.interval_minutes", Msg: "must be a number of minutes from 1/60 (one second) to 1440 (a day)", Line: 26},
		{Path: "github.api_url", Msg: "must be an absolute http or https URL", Line: 3},
		{Path: "github.processing_label", Msg: "must differ from github.bot_label", Line: 7},
		{Path: "github.repositories[1]", Msg: `must be "owner/name"`, Line: 5},
		{Path: "github.repositories[2]", Msg: "repeats github.repositories[0]", Line: 5},
		{Path: "github.token", Msg: "required when task_source is github (or github.token_file, or github.app)"},
		{Path: "github.tokn", Msg: `unknown key (did you mean "token"?)`, Line: 4},
		{Path: "llm.openai.api_key", Msg: "environment variable OPENAI_API_KEY is not set", Line: 12},
		{Path: "llm.openai.model", Msg: "required when llm.provider is openai"},
		{Path: "llm.timeout_seconds", Msg: "must be from 1 to 86400 (a day)", Line: 10},
		{Path: "logging.file", Msg: "required unless logging.stdout is true", Line: 29},
		{Path: "logging.level", Msg: "must be one of: debug, info, warn, error", Line: 28},
		{Path: "max_llm_process_num", Msg: "expected an integer, got a string", Line: 21},
		{Path: "mcp_servers[1].command", Msg: "required: a list of the program and its arguments (or url, for a remote server)"},
		{Path: "mcp_servers[1].mcp_server_name", Msg: "repeats mcp_servers[0].mcp_server_name", Line: 16},
		{Path: "mcp_servers[2].mcp_server_name", Msg: "must use only letters, digits, _ and - (it prefixes tool names as name/tool)", Line: 17},
		{Path: "tools.call_timeout_seconds", Msg: "must be from 1 to 86400 (a day)", Line: 20},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	// The warning for the unsupported key comes back with the problems.
	_, warnings, _ := config.Parse([]byte(src), nil)
	wantWarnings := []config.Warning{{Path: "metrics", Msg: "done differently by this version: set server.listen, and serve answers GET /metrics there; ignored", Line: 30}}
	if diff := cmp.Diff(wantWarnings, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

func TestProblemsErrorText(t *testing.T) {
	ps := config.Problems{
		{Path: "llm.openai.model", Msg: "required when llm.provider is openai"},
		{Path: "github.tokn", Msg: `unknown key (did you mean "token"?)`, Line: 4},
		{Msg: "invalid YAML: boom", Line: 2, Column: 7},
	}
	want := "line 2, column 7: invalid YAML: boom\n" +
		"github.tokn (line 4): unknown key (did you mean \"token\"?)\n" +
		"llm.openai.model: required when llm.provider is openai"
	if got := ps.Error(); got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	var err error = &ps
	if got := err.Error(); got != want {
		t.Errorf("(*Problems).Error() differs: %s", got)
	}
	w := config.Warning{Path: "queue", Msg: "not supported by this version; ignored", Line: 3}
	if got := w.String(); got != "queue (line 3): not supported by this version; ignored" {
		t.Errorf("Warning.String() = %q", got)
	}
}

// head is a valid config in two lines, without a github section.
const head = "task_source: github\nllm: {provider: lmstudio, lmstudio: {model: m}}\n"

// gh completes head with a valid github section (lines 3-5).
const gh = "github:\n  token: t\n  owner: acme\n"

func TestUnknownKeys(t *testing.T) {
	checkProblems(t, "", map[string]string{"KEY": "query"}, []problemCase{
		{head + gh + "task_sorce: github\n", config.Problems{{Path: "task_sorce", Msg: `unknown key (did you mean "task_source"?)`, Line: 6}}},
		{head + gh + "  bot_lable: x\n", config.Problems{{Path: "github.bot_lable", Msg: `unknown key (did you mean "bot_label"?)`, Line: 6}}},
		{gh + "task_source: github\nllm:\n  provider: lmstudio\n  lmstudio:\n    model: m\n    modle: x\n",
			config.Problems{{Path: "llm.lmstudio.modle", Msg: `unknown key (did you mean "model"?)`, Line: 9}}},
		{head + gh + "mcp_servers:\n  - mcp_server_name: a\n    command: [a]\n    comand: [a]\n",
			config.Problems{{Path: "mcp_servers[0].comand", Msg: `unknown key (did you mean "command"?)`, Line: 9}}},
		{head + gh + "mcp_servers:\n  - mcp_server_name: a\n    command: [a]\n    tool: {allow: [x]}\n",
			config.Problems{{Path: "mcp_servers[0].tool", Msg: `unknown key (did you mean "tools"?)`, Line: 9}}},
		{head + gh + "mcp_servers:\n  - mcp_server_name: a\n    command: [a]\n    tools: {alow: [x], deny: [y]}\n",
			config.Problems{{Path: "mcp_servers[0].tools.alow", Msg: `unknown key (did you mean "allow"?)`, Line: 9}}},
		{head + gh + "wibble: 1\n", config.Problems{{Path: "wibble", Msg: "unknown key", Line: 6}}},
		// A future key is only accepted where it belongs.
		{gh + "task_source: github\nllm:\n  provider: lmstudio\n  lmstudio: {model: m}\n  comment_detection: {}\n",
			config.Problems{{Path: "llm.comment_detection", Msg: "unknown key", Line: 8}}},
		{head + "gitlab: {paused_label: x, stoped_label: y}\n" + gh,
			config.Problems{{Path: "gitlab.stoped_label", Msg: `unknown key (did you mean "stopped_label"?)`, Line: 3}}},
		// Keys are never expanded.
		{head + gh + "  ${KEY}: x\n", config.Problems{{Path: "github.${KEY}", Msg: "unknown key", Line: 6}}},
	})
}

func TestFutureKeysWarn(t *testing.T) {
	src := head + gh + `pause_resume:
  enabled: true
  url: ${UNSET_IN_IGNORED_SECTION}
metrics: {enabled: true}
health: {port: 8080}
comment_detection:
  bot_username: null
  log_level: info
`
	_, warnings := mustParse(t, src, nil)
	var got []string
	for _, w := range warnings {
		want := "not supported by this version; ignored"
		if w.Path == "metrics" || w.Path == "health" {
			want = "done differently by this version: set server.listen, and serve answers GET /"
		}
		if !strings.HasPrefix(w.Msg, want) {
			t.Errorf("warning %v: unexpected message", w)
		}
		got = append(got, w.Path)
	}
	want := []string{
		"pause_resume", "metrics", "health",
		"comment_detection.bot_username", "comment_detection.log_level",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warning paths (-want +got):\n%s", diff)
	}
	if warnings[1].Line != 9 {
		t.Errorf("pause_resume warning line = %d, want 9", warnings[1].Line)
	}
}

func TestTypeErrors(t *testing.T) {
	checkProblems(t, head+gh, map[string]string{"N": "lots"}, []problemCase{
		{"max_llm_process_num: 1.5\n", config.Problems{{Path: "max_llm_process_num", Msg: "expected an integer, got a number", Line: 6}}},
		{"max_llm_process_num: \"5\"\n", config.Problems{{Path: "max_llm_process_num", Msg: "expected an integer, got a string", Line: 6}}},
		{"max_llm_process_num: 99999999999\n", config.Problems{{Path: "max_llm_process_num", Msg: "integer out of range", Line: 6}}},
		{"max_llm_process_num: ${N}\n", config.Problems{{Path: "max_llm_process_num", Msg: "expected an integer, got a string", Line: 6}}},
		{"tools: [1]\n", config.Problems{{Path: "tools", Msg: "expected a mapping, got a list", Line: 6}}},
		{"logging:\n  stdout: yes\n", config.Problems{{Path: "logging.stdout", Msg: "expected true or false, got a string", Line: 7}}},
		{"mcp_servers: {a: b}\n", config.Problems{{Path: "mcp_servers", Msg: "expected a list, got a mapping", Line: 6}}},
		{"mcp_servers:\n  - mcp_server_name: a\n    command: npx\n", config.Problems{{Path: "mcp_servers[0].command", Msg: "expected a list, got a string", Line: 8}}},
		{"mcp_servers:\n  - mcp_server_name: a\n    command: [a]\n    env: [A=1]\n", config.Problems{{Path: "mcp_servers[0].env", Msg: "expected a mapping, got a list", Line: 9}}},
		{"state_dir: {a: 1}\n", config.Problems{{Path: "state_dir", Msg: "expected a single value, got a mapping", Line: 6}}},
		{"continuous:\n  producer:\n    interval_minutes: .inf\n", config.Problems{{Path: "continuous.producer.interval_minutes", Msg: "must be a number of minutes from 1/60 (one second) to 1440 (a day)", Line: 8}}},
		{"continuous:\n  producer:\n    interval_minutes: .nan\n", config.Problems{{Path: "continuous.producer.interval_minutes", Msg: "must be a number of minutes from 1/60 (one second) to 1440 (a day)", Line: 8}}},
		{"continuous:\n  producer:\n    interval_minutes: 0.01\n", config.Problems{{Path: "continuous.producer.interval_minutes", Msg: "must be a number of minutes from 1/60 (one second) to 1440 (a day)", Line: 8}}},
		{"continuous:\n  producer:\n    interval_minutes: soon\n", config.Problems{{Path: "continuous.producer.interval_minutes", Msg: "expected a number, got a string", Line: 8}}},
		{"  query: [a]\n", config.Problems{{Path: "github.query", Msg: "expected a single value, got a list", Line: 6}}},
	})
}

func TestSyntaxError(t *testing.T) {
	checkProblems(t, "", nil, []problemCase{
		{"task_source: github\ngithub:\n  token: \"unterminated\n  owner: acme\n",
			config.Problems{{Msg: "invalid YAML: could not find end character of double-quoted text", Line: 3, Column: 10}}},
		{"a:\n  b: 1\n c: 2\n",
			config.Problems{{Msg: "invalid YAML: value is not allowed in this context", Line: 3, Column: 2}}},
		{"mcp_servers:\n  - command: [run, ${X}]\n",
			config.Problems{{Msg: "invalid YAML: ',' or ']' must be specified (inside [ ] or { }, quote a value holding ${...})", Line: 2, Column: 21}}},
		{"- a\n- b\n", config.Problems{{Msg: "the top level must be a mapping of keys", Line: 1}}},
		{"a: 1\n---\nb: 2\n", config.Problems{{Msg: "a config file holds a single YAML document", Line: 3}}},
	})
}

func TestEmptyFileListsRequiredKeys(t *testing.T) {
	got := problems(t, "# nothing yet\n", nil)
	want := config.Problems{
		{Path: "llm.provider", Msg: "required (one of: openai, lmstudio, ollama)"},
		{Path: "task_source", Msg: "required (one of: gitea, github, gitlab)"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// A secret in the wrong place never shows up in an error or warning.
func TestSecretNeverInErrors(t *testing.T) {
	const secret = "ghp_S3cr3tT0kenValue1234567890abcdef"
	vars := map[string]string{"TOKEN": secret}
	for _, src := range []string{
		"max_llm_process_num: " + secret + "\n",
		"max_llm_process_num: ${TOKEN}\n",
		"max_llm_process_num: \"" + secret + "\"\n",
		"llm:\n  function_calling: " + secret + "\n",
		"llm:\n  timeout_seconds: ${TOKEN}\n",
		"task_source: " + secret + "\n",
		"logging:\n  level: ${TOKEN}\n",
		"github:\n  api_url: https://x:" + secret + "@exa mple.com\n",
		"github:\n  repositories: [" + secret + "]\n",
		"mcp_servers: " + secret + "\n",
		"mcp_servers:\n  - mcp_server_name: ${TOKEN}/x\n    command: [a]\n",
		"continuous:\n  producer:\n    interval_minutes: ${TOKEN}\n",
		"tools: " + secret + "\n",
		"github:\n  token: \"" + secret + "\n",
		"github:\n  token: " + secret + "\n token: x\n",
		"github:\n  token: [${TOKEN}, ${TOKEN:-" + secret + "}, $${" + secret + "]\n",
		"github:\n  token: ${" + secret + "\n",
		"github:\n  token: { ${TOKEN} }\n",
	} {
		_, warnings, err := config.Parse([]byte(head+src), env(vars))
		if err == nil {
			t.Errorf("%q: no error", src)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "S3cr3t") {
			t.Errorf("%q: error shows the secret: %v", src, err)
		}
		for _, w := range warnings {
			if strings.Contains(w.String(), secret) {
				t.Errorf("%q: warning shows the secret: %v", src, w)
			}
		}
	}
}

func TestValidateRequiredPerSourceAndProvider(t *testing.T) {
	checkProblems(t, "", nil, []problemCase{
		{"task_source: gitlab\nllm: {provider: ollama}\n", config.Problems{
			{Path: "gitlab", Msg: "project_id or group is required (or both)"},
			{Path: "gitlab.token", Msg: "required when task_source is gitlab (or gitlab.token_file)"},
			{Path: "llm.ollama.model", Msg: "required when llm.provider is ollama"},
		}},
		{"task_source: github\ngithub: {token: t}\nllm: {provider: lmstudio}\n", config.Problems{
			{Path: "github", Msg: "owner or repositories is required (or both)", Line: 2},
			{Path: "llm.lmstudio.model", Msg: "required when llm.provider is lmstudio"},
		}},
		{"task_source: gitea\nllm: {provider: lmstudio, lmstudio: {model: m}}\n", config.Problems{
			{Path: "gitea", Msg: "owner or repositories is required (or both)"},
			{Path: "gitea.api_url", Msg: "required when task_source is gitea: the instance's root URL, such as https://gitea.example.com"},
			{Path: "gitea.token", Msg: "required when task_source is gitea (or gitea.token_file)"},
		}},
		{"task_source: gitea\ngitea: {api_url: \"gitea.example.com\", token: t, owner: \"a b\", repositories: [a/b, A/B, c]}\n" +
			"llm: {provider: lmstudio, lmstudio: {model: m}}\n", config.Problems{
			{Path: "gitea.api_url", Msg: "must be an absolute http or https URL", Line: 2},
			{Path: "gitea.owner", Msg: "must be a user or organisation name (list repositories under gitea.repositories)", Line: 2},
			{Path: "gitea.repositories[1]", Msg: "repeats gitea.repositories[0]", Line: 2},
			{Path: "gitea.repositories[2]", Msg: `must be "owner/name"`, Line: 2},
		}},
		{"task_source: svn\nllm: {provider: gpt}\n", config.Problems{
			{Path: "llm.provider", Msg: "must be one of: openai, lmstudio, ollama", Line: 2},
			{Path: "task_source", Msg: "must be one of: gitea, github, gitlab", Line: 1},
		}},
		{"task_source: github\ngithub: {token: t, owner: a/b, api_url: \"ftp://x\", failed_label: \"\"}\n" +
			"llm: {provider: openai, openai: {model: m, api_key: k, base_url: /v1, max_token: -1}}\n", config.Problems{
			{Path: "github.api_url", Msg: "must be an absolute http or https URL", Line: 2},
			{Path: "github.failed_label", Msg: "required", Line: 2},
			{Path: "github.owner", Msg: "must be a user or organization name (list repositories under github.repositories)", Line: 2},
			{Path: "llm.openai.base_url", Msg: "must be an absolute http or https URL", Line: 3},
			{Path: "llm.openai.max_token", Msg: "must be from 0 to 1048576", Line: 3},
		}},
		{"task_source: gitlab\ngitlab: {token: t, group: g, done_label: coding agent}\n" +
			"llm: {provider: ollama, ollama: {model: m, endpoint: \"\"}}\n" +
			"mcp_servers: [{mcp_server_name: a, command: [\"\"]}]\nlogging: {max_age_days: -1}\n", config.Problems{
			{Path: "gitlab.done_label", Msg: "must differ from gitlab.bot_label", Line: 2},
			{Path: "llm.ollama.endpoint", Msg: "required", Line: 3},
			{Path: "logging.max_age_days", Msg: "must be from 0 to 3650 (ten years)", Line: 5},
			{Path: "mcp_servers[0].command[0]", Msg: "must name a program", Line: 4},
		}},
	})
}

func TestValidateOnDefault(t *testing.T) {
	c := config.Default()
	c.TaskSource = "github"
	c.GitHub.Token = "t"
	c.GitHub.Repositories = []string{"a/b"}
	c.LLM.Provider = "ollama"
	c.LLM.Ollama.Model = "m"
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	c.MaxLLMProcessNum = 0
	var ps *config.Problems
	if err := c.Validate(); !errors.As(err, &ps) || len(*ps) != 1 || (*ps)[0].Path != "max_llm_process_num" {
		t.Errorf("Validate = %v, want one problem at max_llm_process_num", err)
	}
}

func TestToolFilters(t *testing.T) {
	const servers = "mcp_servers:\n  - mcp_server_name: gh\n    command: [gh-mcp]\n"
	c, _ := mustParse(t, head+gh+servers+"    tools:\n      allow: [get_*, list_*, search_code]\n      deny: ['*_secret*', \"[!a-z]*\"]\n", nil)
	want := config.ToolFilter{Allow: []string{"get_*", "list_*", "search_code"}, Deny: []string{"*_secret*", "[!a-z]*"}}
	if diff := cmp.Diff(want, c.MCPServers[0].Tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	// No tools key: every tool is offered.
	c, _ = mustParse(t, head+gh+servers, nil)
	if f := c.MCPServers[0].Tools; len(f.Allow)+len(f.Deny) != 0 {
		t.Errorf("default filter = %+v, want empty", f)
	}
	checkProblems(t, head+gh+servers, nil, []problemCase{
		{"    tools:\n      allow: [\"get_[a-\", ok_*]\n      deny: [\"\", \"x\\\\\"]\n", config.Problems{
			{Path: "mcp_servers[0].tools.allow[0]", Msg: `must be a valid glob (path.Match syntax: * ? [a-z], \ escapes)`, Line: 10},
			{Path: "mcp_servers[0].tools.deny[0]", Msg: "must be a tool name or a glob such as get_*", Line: 11},
			{Path: "mcp_servers[0].tools.deny[1]", Msg: `must be a valid glob (path.Match syntax: * ? [a-z], \ escapes)`, Line: 11},
		}},
		{"    tools: {allow: get_*}\n", config.Problems{{Path: "mcp_servers[0].tools.allow", Msg: "expected a list, got a string", Line: 9}}},
		{"    tools: [get_*]\n", config.Problems{{Path: "mcp_servers[0].tools", Msg: "expected a mapping, got a list", Line: 9}}},
	})
}
