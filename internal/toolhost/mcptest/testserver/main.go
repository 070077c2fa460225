// Command testserver is the MCP test server of package mcptest on stdio.
// Tests get its path from mcptest.Build.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	var stubborn atomic.Bool
	s := mcptest.NewServer(mcptest.ServerOptions{
		Exit: os.Exit,
		IgnoreShutdown: func() {
			signal.Ignore(syscall.SIGTERM)
			stubborn.Store(true)
		},
	})
	fmt.Fprintln(os.Stderr, "mcptest server ready")
	err := s.Run(context.Background(), &mcp.StdioTransport{})
	if stubborn.Load() {
		for { // only SIGKILL ends this process now
			time.Sleep(time.Hour)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptest server:", err)
		os.Exit(1)
	}
}
