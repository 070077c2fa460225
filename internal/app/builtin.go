package app

import (
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/sandbox"
	"github.com/coding-agent/coding-agent/internal/toolhost"
	"github.com/coding-agent/coding-agent/internal/workspace"
	"github.com/coding-agent/coding-agent/internal/workspace/builtin"
)

// builtinPrompt tells the model where its built-in tools work.
const builtinPrompt = "The task's repository is checked out in the directory the workspace tools work in: give them paths " +
	"relative to it. Read before you edit, and prefer edit_file for small changes. run_command runs a shell command " +
	"in the checkout, in a sandbox%s: use it to build and run the tests, and say in your comments what you ran."

// builtinServer is the daemon's own tool server, one per task in the
// task's checkout: the built-in workspace tools, read_file reading less
// than the host passes on so that its note on reading further stays, and
// run_command running in the task's sandbox.
func (a *App) builtinServer(box *workspace.Box) toolhost.ServerConfig {
	c := a.cfg
	readBytes := min(builtin.DefaultMaxReadBytes, c.Tools.MaxResultBytes*3/4)
	network := " without the network"
	if c.Sandbox.Network == config.NetworkOn {
		network = ""
	}
	// A call may run the setup again before the command: each has the
	// command timeout.
	callTimeout := time.Duration(len(c.Sandbox.Setup)+1)*c.Sandbox.CommandTimeout() + time.Minute
	return toolhost.ServerConfig{Name: config.BuiltinServer, Scope: toolhost.ScopeTask,
		SystemPrompt: fmt.Sprintf(builtinPrompt, network), CallTimeout: callTimeout,
		InProcess: func(vars toolhost.TaskVars) (*mcp.Server, error) {
			return builtin.NewServer(builtin.Options{Dir: vars.Workspace, Runner: box.Runner(vars.Workspace),
				MaxTimeout: c.Sandbox.CommandTimeout(), MaxReadBytes: readBytes})
		}}
}

// newBox makes the sandbox every command of a task runs in (the model's,
// the setup, the checks, the sandboxed servers), at the best level this
// host gives: less than sandbox.require is an error naming what is missing.
func (a *App) newBox() (*workspace.Box, error) {
	c := a.cfg
	want, err := sandbox.ParseLevel(c.Sandbox.Require)
	if err != nil {
		return nil, err
	}
	timeout := c.Sandbox.CommandTimeout()
	sb, err := sandbox.New(sandbox.Policy{Require: want, Env: c.Sandbox.Env, ReadOnly: c.Sandbox.ReadOnlyPaths,
		Limits: sandbox.Limits{Timeout: timeout, MemoryMB: c.Sandbox.MemoryMB, MaxProcesses: c.Sandbox.MaxProcesses,
			MaxOutputBytes: c.Sandbox.MaxOutputBytes}})
	if err != nil {
		return nil, fmt.Errorf("the sandbox for the model's commands (sandbox.require: %s): %w", c.Sandbox.Require, err)
	}
	hide := c.PrivatePaths()
	if home, err := os.UserHomeDir(); err == nil {
		hide = append(hide, home)
	}
	a.Log.Info("sandbox", "level", sb.Level().String(), "require", c.Sandbox.Require, "network", c.Sandbox.Network)
	return workspace.NewBox(workspace.BoxOptions{Sandbox: sb, Network: c.Sandbox.Network == config.NetworkOn,
		Setup: c.Sandbox.Setup, Watch: c.Sandbox.SetupWatch, Checks: c.Workspace.Checks, Timeout: timeout,
		Hide: hide, Redact: a.redact, Logger: a.Log}), nil
}
