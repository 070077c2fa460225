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
		{"$$${A}", "$${A}"}, // leftmost first: "$" then the escape "$${"
		{"cost $5 and $A", "cost $5 and $A"},
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
