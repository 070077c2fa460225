package app

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/toolhost"
	"github.com/coding-agent/coding-agent/internal/workspace/builtin"
)

// builtinPrompt tells the model where its built-in tools work.
const builtinPrompt = "The task's repository is checked out in the directory the workspace tools work in: give them paths " +
	"relative to it. Read before you edit, and prefer edit_file for small changes."

// builtinServer is the daemon's own tool server, one per task in the
// task's checkout: the built-in workspace tools, read_file reading less
// than the host passes on so that its note on reading further stays.
func (a *App) builtinServer() toolhost.ServerConfig {
	readBytes := min(builtin.DefaultMaxReadBytes, a.cfg.Tools.MaxResultBytes*3/4)
	return toolhost.ServerConfig{Name: config.BuiltinServer, Scope: toolhost.ScopeTask, SystemPrompt: builtinPrompt,
		InProcess: func(vars toolhost.TaskVars) (*mcp.Server, error) {
			return builtin.NewServer(builtin.Options{Dir: vars.Workspace, MaxReadBytes: readBytes})
		}}
}
