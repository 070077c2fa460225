// Command testserver is the MCP test server of package mcptest on stdio.
// Tests get its path from mcptest.Build.
//
// With -banner TEXT it first writes TEXT (environment variables expanded)
// as a line on stdout, as servers that print a banner do. With -files DIR it
// serves only the file tools of mcptest.NewFileServer, confined to DIR.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	banner := flag.String("banner", "", "a line to write on stdout before serving")
	files := flag.String("files", "", "serve only the file tools, confined to this directory")
	flag.Parse()
	if *files != "" {
		if err := mcptest.NewFileServer(*files).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "mcptest file server:", err)
			os.Exit(1)
		}
		return
	}
	var stubborn atomic.Bool
	// MCPTEST_MAX_SLEEP_MS, if more than 0, caps the sleep tool, and
	// MCPTEST_SLEEP_STARTED names the file it announces each wait on (see
	// ServerOptions.MaxSleep and SleepStarted).
	maxSleep, _ := strconv.Atoi(os.Getenv("MCPTEST_MAX_SLEEP_MS"))
	s := mcptest.NewServer(mcptest.ServerOptions{
		MaxSleep:     time.Duration(maxSleep) * time.Millisecond,
		SleepStarted: os.Getenv("MCPTEST_SLEEP_STARTED"),
		Exit:         os.Exit,
		IgnoreShutdown: func() {
			signal.Ignore(syscall.SIGTERM)
			stubborn.Store(true)
		},
		Hang:   hang,
		Print:  func(line string) { fmt.Fprintln(os.Stdout, line) },
		Leaks:  true,
		Asks:   os.Getenv("MCPTEST_ASKS") != "",
		Banner: os.Getenv("MCPTEST_BANNER"),
	})
	if *banner != "" {
		fmt.Fprintln(os.Stdout, os.ExpandEnv(*banner))
	}
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
