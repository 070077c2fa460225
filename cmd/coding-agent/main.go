// Command coding-agent watches GitHub, GitLab or Gitea for tasks labelled
// "coding agent" and works on them with an LLM and MCP tool servers.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/sandbox"
)

func main() {
	// A sandbox helper (this binary, run again to confine a command) does
	// its work and exits here, before anything of the daemon starts.
	sandbox.Enter()
	// Before anything reads a secret: the MCP servers we start run as our
	// user and must not read our environment or memory.
	if err := app.Harden(); err != nil {
		fmt.Fprintln(os.Stderr, "coding-agent: warning:", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal the task in hand is let finish its step; a
	// second signal ends the process at once.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
