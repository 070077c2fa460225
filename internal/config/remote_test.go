package config_test

import (
	"slices"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
)

// A remote MCP server is a url with headers; its header values are
// secrets, the bearer token alone too.
func TestRemoteMCPServer(t *testing.T) {
	c, _ := mustParse(t, `task_source: github
github: {token: t, owner: acme}
llm: {provider: lmstudio, lmstudio: {model: m}}
mcp_servers:
  - mcp_server_name: remote
    url: https://mcp.example.com/mcp
    headers:
      Authorization: Bearer ${MCP_TOKEN}
      X-Team: tools
  - mcp_server_name: signed
    url: https://mcp.example.com/other
    oauth: {token_url: "https://auth.example.com/token", client_id: agent, client_secret: "${MCP_CLIENT_SECRET}"}
`, map[string]string{"MCP_TOKEN": "mcp-secret-token-0123", "MCP_CLIENT_SECRET": "client-secret-4567"})
	s := c.MCPServers[0]
	if s.URL != "https://mcp.example.com/mcp" || s.Headers["Authorization"].Reveal() != "Bearer mcp-secret-token-0123" {
		t.Fatalf("server %+v", s)
	}
	secrets := c.Secrets()
	for _, want := range []string{"Bearer mcp-secret-token-0123", "mcp-secret-token-0123", "tools", "client-secret-4567"} {
		if !slices.Contains(secrets, want) {
			t.Errorf("Secrets lacks %q", want)
		}
	}
}

func TestRemoteMCPServerProblems(t *testing.T) {
	checkProblems(t, "task_source: github\ngithub: {token: t, owner: acme}\nllm: {provider: lmstudio, lmstudio: {model: m}}\n", nil, []problemCase{
		{"mcp_servers:\n  - {mcp_server_name: a, url: \"ftp://x\", command: [x], env: {A: b}, scope: task, sandbox: true, headers: {\"Bad Name\": v}}\n" +
			"  - {mcp_server_name: b, command: [x], headers: {A: b}}\n", config.Problems{
			{Path: "mcp_servers[0].command", Msg: "not with url: a server is a command or a url", Line: 5},
			{Path: "mcp_servers[0].env", Msg: "not with url: a remote server has no process to pass it to (send secrets in headers)", Line: 5},
			{Path: "mcp_servers[0].headers", Msg: `"Bad Name" is not a header name`, Line: 5},
			{Path: "mcp_servers[0].sandbox", Msg: "not with url: a remote server runs elsewhere", Line: 5},
			{Path: "mcp_servers[0].scope", Msg: "must be process with url: one connection serves every task", Line: 5},
			{Path: "mcp_servers[0].url", Msg: "must be an absolute http or https URL", Line: 5},
			{Path: "mcp_servers[1].headers", Msg: "only with url: a command's server takes its secrets in env", Line: 6},
		}},
		{"mcp_servers:\n  - {mcp_server_name: a, url: \"https://x/mcp\", headers: {Authorization: b}, oauth: {token_url: \"tokens\"}}\n" +
			"  - {mcp_server_name: b, command: [x], oauth: {token_url: \"https://t\", client_id: c, client_secret: s}}\n", config.Problems{
			{Path: "mcp_servers[0].oauth", Msg: "not with an Authorization header: oauth sets it", Line: 5},
			{Path: "mcp_servers[0].oauth.client_id", Msg: "required with oauth"},
			{Path: "mcp_servers[0].oauth.client_secret", Msg: "required with oauth"},
			{Path: "mcp_servers[0].oauth.token_url", Msg: "must be an absolute http or https URL", Line: 5},
			{Path: "mcp_servers[1].oauth", Msg: "only with url", Line: 6},
		}},
	})
}
