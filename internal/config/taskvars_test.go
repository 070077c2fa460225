package config_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/config"
)

// A task-scoped server's command and env keep the task variables for the
// server's start, as templates: every other ${VAR} is expanded at load, and
// each literal "${" (an escape, or one in a value of the environment) is
// written $${, so that it stays literal when the task's values go in.
func TestTaskVariablesStayInTaskScopedServers(t *testing.T) {
	vars := map[string]string{"DIR": "/srv", "ODD": "a${BRANCH}b", "BRANCH": "from-the-environment", "TOK": "tok-${x}-secret"}
	c, _ := mustParse(t, head+gh+`mcp_servers:
  - mcp_server_name: fs
    scope: task
    command: [npx, "${WORKSPACE}", "$${WORKSPACE}", "${DIR}/${TASK_REF}", "${ODD}", "--branch=${BRANCH}", "$$${DIR}"]
    env:
      ROOT: ${WORKSPACE}/src
      WHERE: "${TASK_REF} on ${BRANCH}"
      API_TOKEN: ${TOK}
  - mcp_server_name: shared
    command: [srv, "$${WORKSPACE}", "${ODD}"]
    env: {LIT: "$${BRANCH}"}
`, vars)
	want := []config.MCPServer{{
		Name:    "fs",
		Scope:   config.ScopeTask,
		Command: []string{"npx", "${WORKSPACE}", "$${WORKSPACE}", "/srv/${TASK_REF}", "a$${BRANCH}b", "--branch=${BRANCH}", "$$${DIR}"},
		Env:     map[string]string{"ROOT": "${WORKSPACE}/src", "WHERE": "${TASK_REF} on ${BRANCH}", "API_TOKEN": "tok-$${x}-secret"},
	}, {
		// A process-scoped server gets the literal text.
		Name:    "shared",
		Command: []string{"srv", "${WORKSPACE}", "a${BRANCH}b"},
		Env:     map[string]string{"LIT": "${BRANCH}"},
	}}
	if diff := cmp.Diff(want, c.MCPServers); diff != "" {
		t.Errorf("mcp_servers (-want +got):\n%s", diff)
	}
	if !c.MCPServers[0].PerTask() || c.MCPServers[1].PerTask() {
		t.Errorf("PerTask = %v, %v; want true, false", c.MCPServers[0].PerTask(), c.MCPServers[1].PerTask())
	}
	// The secret is known by its value, not by its template.
	if s := c.Secrets(); !slices.Contains(s, "tok-${x}-secret") {
		t.Errorf("Secrets() = %q, want the token's value", s)
	}
}

func TestTaskVariablesProblems(t *testing.T) {
	const only = "} is set only when an MCP server starts for a task: it may appear in mcp_servers[].command and env of a server with scope: task"
	const shared = "} is set only for a server with scope: task (this one's scope is process, shared by every task)"
	mcp := head + gh + "mcp_servers:\n  - mcp_server_name: s\n" // a server at line 7
	checkProblems(t, "", map[string]string{"WORKSPACE": "/set/in/the/environment", "DOLLAR": "x$"}, []problemCase{
		// Outside an MCP server's command and env, whatever the environment holds.
		{head + gh + "  query: in ${WORKSPACE}\n", config.Problems{{Path: "github.query", Msg: "${WORKSPACE" + only, Line: 6}}},
		{mcp + "    command: [s]\n    system_prompt: files in ${WORKSPACE} of ${TASK_REF}\n    scope: task\n", config.Problems{
			{Path: "mcp_servers[0].system_prompt", Msg: "${TASK_REF" + only, Line: 9},
			{Path: "mcp_servers[0].system_prompt", Msg: "${WORKSPACE" + only, Line: 9}}},
		// In a server shared by every task (the default scope, or said so).
		{mcp + "    command: [s, \"${WORKSPACE}\"]\n    env: {B: \"${BRANCH}\", L: \"$${BRANCH}\"}\n", config.Problems{
			{Path: "mcp_servers[0].command[1]", Msg: "${WORKSPACE" + shared, Line: 8},
			{Path: "mcp_servers[0].env.B", Msg: "${BRANCH" + shared, Line: 9}}},
		{mcp + "    scope: process\n    command: [s, \"--ref=${TASK_REF}\"]\n", config.Problems{
			{Path: "mcp_servers[0].command[1]", Msg: "${TASK_REF" + shared, Line: 9}}},
		// A default, or a $ glued to the variable, cannot be kept.
		{mcp + "    scope: task\n    command: [s, \"${WORKSPACE:-/tmp}\"]\n", config.Problems{
			{Path: "mcp_servers[0].command[1]", Msg: "${WORKSPACE} takes no default: a task always sets it", Line: 9}}},
		{mcp + "    scope: task\n    command: [s, \"${DOLLAR}${WORKSPACE}\"]\n", config.Problems{
			{Path: "mcp_servers[0].command[1]", Line: 9,
				Msg: "a $ right before ${WORKSPACE} cannot be told from the $${ escape: a value of the environment ends in $ there"}}},
		// The scope is one of two words.
		{mcp + "    command: [s]\n    scope: tsak\n", config.Problems{
			{Path: "mcp_servers[0].scope", Msg: `must be one of: process, task (did you mean "task"?)`, Line: 9}}},
		{mcp + "    command: [s]\n    scope: global\n", config.Problems{
			{Path: "mcp_servers[0].scope", Msg: "must be one of: process, task", Line: 9}}},
	})
}
