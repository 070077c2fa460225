package config_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/config"
)

func TestEnvExpansion(t *testing.T) {
	vars := map[string]string{"A": "alpha", "B": "beta", "EMPTY": ""}
	for _, tc := range []struct{ value, want string }{
		{"${A}", "alpha"},
		{"x-${A}-${B}-y", "x-alpha-beta-y"},
		{"${A:-fallback}", "alpha"},
		{"${UNSET:-fallback}", "fallback"},
		{"${EMPTY:-fallback}", "fallback"},
		{"${EMPTY}", ""},
		{"${UNSET:-}", ""},
		{"${UNSET:-http://h:8080/p}", "http://h:8080/p"},
		{"$${A}", "${A}"},
		{"$$${A}", "$${A}"},                  // leftmost first: "$" then the escape "$${"
		{"cost $5 and $a", "cost $5 and $a"}, // lower case inside text: not an environment variable's shape
		{"cost $$A", "cost $A"},              // the escape of a literal $NAME
		{"$$a_b-$$", "$a_b-$$"},
		{"end$", "end$"},
		{"trailing $", "trailing $"},
		{"'${A}'", "alpha"}, // quoting does not stop expansion
	} {
		c, _ := mustParse(t, head+gh+"  query: "+tc.value+"\n", vars)
		if c.GitHub.Query != tc.want {
			t.Errorf("%s: got %q, want %q", tc.value, c.GitHub.Query, tc.want)
		}
	}
}

func TestEnvExpansionEverywhere(t *testing.T) {
	vars := map[string]string{"N": "7", "MIN": "0.25", "STDOUT": "true", "DIR": "/srv", "TOK": "secret-tok"}
	c, _ := mustParse(t, head+gh+`max_llm_process_num: ${N}
continuous: {producer: {interval_minutes: "${MIN}"}, consumer: {workers: "${N:-3}"}}
logging: {stdout: "${STDOUT}", file: "${DIR}/log"}
mcp_servers:
  - mcp_server_name: fs
    command: [npx, "${DIR}/data", "$${HOME}"]
    env:
      TOKEN: ${TOK}
      PLAIN: |
        ${DIR} literal block
    system_prompt: >
      files live in ${DIR}
`, vars)
	if c.MaxLLMProcessNum != 7 || c.Continuous.Producer.IntervalMinutes != 0.25 ||
		c.Continuous.Consumer.Workers != 7 || !c.Logging.Stdout || c.Logging.File != "/srv/log" {
		t.Errorf("scalars not expanded: %+v %+v %+v", c.MaxLLMProcessNum, c.Continuous, c.Logging)
	}
	want := config.MCPServer{
		Name:         "fs",
		Command:      []string{"npx", "/srv/data", "${HOME}"},
		Env:          map[string]string{"TOKEN": "secret-tok", "PLAIN": "/srv literal block\n"},
		SystemPrompt: "files live in /srv\n",
	}
	if diff := cmp.Diff([]config.MCPServer{want}, c.MCPServers); diff != "" {
		t.Errorf("mcp_servers (-want +got):\n%s", diff)
	}
}

func TestEnvExpansionProblems(t *testing.T) {
	checkProblems(t, head+"github:\n  owner: acme\n", nil, []problemCase{
		{"  token: ${GITHUB_TOKEN}\n", config.Problems{
			{Path: "github.token", Msg: "environment variable GITHUB_TOKEN is not set", Line: 5},
		}},
		{"  token: t\n  query: ${X} ${Y}\n", config.Problems{
			{Path: "github.query", Msg: "environment variable X is not set", Line: 6},
			{Path: "github.query", Msg: "environment variable Y is not set", Line: 6},
		}},
		{"  token: t\n  query: ${X\n", config.Problems{
			{Path: "github.query", Msg: `malformed ${...} reference (want ${NAME} or ${NAME:-default}; write $${ for a literal "${")`, Line: 6},
		}},
		{"  token: t\n  query: ${1X}\n", config.Problems{
			{Path: "github.query", Msg: `malformed ${...} reference (want ${NAME} or ${NAME:-default}; write $${ for a literal "${")`, Line: 6},
		}},
		{"  token: t\n  query: ${}\n", config.Problems{
			{Path: "github.query", Msg: `malformed ${...} reference (want ${NAME} or ${NAME:-default}; write $${ for a literal "${")`, Line: 6},
		}},
		{"  token: t\nmcp_servers:\n  - mcp_server_name: a\n    command: [a, \"${ARG}\"]\n    env: {K: \"${V}\"}\n", config.Problems{
			{Path: "mcp_servers[0].command[1]", Msg: "environment variable ARG is not set", Line: 8},
			{Path: "mcp_servers[0].env.K", Msg: "environment variable V is not set", Line: 9},
		}},
		{"  token: t\nmax_llm_process_num: ${N}\n", config.Problems{
			{Path: "max_llm_process_num", Msg: "environment variable N is not set", Line: 6},
		}},
	})
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	c, _ := mustParse(t, head+gh+`mcp_servers:
  - mcp_server_name: a
    command: &cmd [npx, -y, server]
    env: &common {TOKEN: "${T}", MODE: one}
  - mcp_server_name: b
    command: *cmd
    env:
      <<: *common
      MODE: two
      EXTRA: x
`, map[string]string{"T": "tok"})
	want := []config.MCPServer{
		{Name: "a", Command: []string{"npx", "-y", "server"}, Env: map[string]string{"TOKEN": "tok", "MODE": "one"}},
		{Name: "b", Command: []string{"npx", "-y", "server"}, Env: map[string]string{"TOKEN": "tok", "MODE": "two", "EXTRA": "x"}},
	}
	if diff := cmp.Diff(want, c.MCPServers); diff != "" {
		t.Errorf("mcp_servers (-want +got):\n%s", diff)
	}
}

// A $NAME without braces is taken for a forgotten ${NAME} where nothing else
// is likely: as a whole value, and as an upper-case name inside a value that
// is not free text. The message shows the fix.
func TestBareVariableIsAProblem(t *testing.T) {
	fix := func(name string) string {
		return "$" + name + " is not expanded: write ${" + name + "} to take it from the environment (or $$" + name +
			" for a literal $" + name + ")"
	}
	checkProblems(t, head+"github:\n  owner: acme\n", map[string]string{"GITHUB_TOKEN": "tok"}, []problemCase{
		{"  token: $GITHUB_TOKEN\n", config.Problems{{Path: "github.token", Msg: fix("GITHUB_TOKEN"), Line: 5}}},
		{"  token: \" $github_token \"\n", config.Problems{{Path: "github.token", Msg: fix("github_token"), Line: 5}}},
		{"  token: t\n  api_url: https://$GHE_HOST/api/v3\n", config.Problems{{Path: "github.api_url", Msg: fix("GHE_HOST"), Line: 6}}},
		{"  token: t\nmcp_servers:\n  - mcp_server_name: a\n    command: [sh, -c, 'cd $HOME && exec server', $ARG]\n" +
			"    env: {K: \"x-$SECRET\", L: \"$$HOME/x\"}\n    system_prompt: Use $PATH and $HOME\n", config.Problems{
			{Path: "mcp_servers[0].command[3]", Msg: fix("ARG"), Line: 8},
			{Path: "mcp_servers[0].env.K", Msg: fix("SECRET"), Line: 9},
		}},
		{"  token: t\nconversation:\n  completion_keywords: [\"$DONE now\", $OK]\n", config.Problems{
			{Path: "conversation.completion_keywords[1]", Msg: fix("OK"), Line: 7},
		}},
	})
	// Where a literal $ is legitimate it stays: inside prose and shell
	// commands, before a digit, in lower case inside text, and escaped.
	c, _ := mustParse(t, head+gh+`  query: "label:bug $5 $a"
mcp_servers:
  - mcp_server_name: a
    command: [sh, -c, 'cd $HOME && exec "$SERVER"']
    env: {L: "$$HOME/x"}
    system_prompt: Use $PATH.
`, nil)
	if got := c.MCPServers[0].Command[2]; got != `cd $HOME && exec "$SERVER"` {
		t.Errorf("command[2] = %q", got)
	}
	if got := c.MCPServers[0].Env["L"]; got != "$HOME/x" {
		t.Errorf("env.L = %q, want the escape's literal $HOME/x", got)
	}
	if c.GitHub.Query != "label:bug $5 $a" || c.MCPServers[0].SystemPrompt != "Use $PATH." {
		t.Errorf("query %q, system_prompt %q: want them as written", c.GitHub.Query, c.MCPServers[0].SystemPrompt)
	}
}

// A variable exported empty is said to be empty where its value makes a
// problem, not reported as a missing key; with a default it is not one.
func TestEmptyVariableIsSaidToBeEmpty(t *testing.T) {
	checkProblems(t, head+"github:\n  owner: acme\n", map[string]string{"GITHUB_TOKEN": "", "Q": ""}, []problemCase{
		{"  token: ${GITHUB_TOKEN}\n", config.Problems{{Path: "github.token",
			Msg: "environment variable GITHUB_TOKEN is set but empty (required when task_source is github (or github.token_file, or github.app))", Line: 5}}},
		{"  token: ${GITHUB_TOKEN}${Q}\n", config.Problems{{Path: "github.token",
			Msg: "environment variables GITHUB_TOKEN, Q are set but empty (required when task_source is github (or github.token_file, or github.app))", Line: 5}}},
	})
	c, _ := mustParse(t, head+gh+"  query: ${Q}\n  api_url: ${Q:-https://ghe.example/api/v3}\n", map[string]string{"Q": ""})
	if c.GitHub.Query != "" || c.GitHub.APIURL != "https://ghe.example/api/v3" {
		t.Errorf("query %q, api_url %q", c.GitHub.Query, c.GitHub.APIURL)
	}
}
