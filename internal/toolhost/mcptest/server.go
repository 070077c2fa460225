// Package mcptest provides a small MCP server for tests: the same tools in memory
// (NewInMemory) and as a stdio program (Build compiles testserver/).
package mcptest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServerOptions adds the tools that only make sense in a process of their own.
// The zero value gives the tools that are safe in memory.
type ServerOptions struct {
	// Exit, if set, adds the crash tool, which calls Exit(3) in the middle of
	// a call, and the add tool, which calls Exit(4) when its arguments do not
	// match its input schema.
	Exit func(code int)
	// IgnoreShutdown, if set, adds the ignore_shutdown tool, which calls it so that
	// the process ignores SIGTERM and the end of its input.
	IgnoreShutdown func()
	// Hang, if set, adds the hang tool, which calls it: from then on the
	// server answers nothing (the test server stops its own process).
	Hang func()
	// Print, if set, adds the print tool, which calls it with a line to write
	// on stdout, outside the protocol.
	Print func(line string)
}

// Tool arguments.
type (
	// EchoArgs are the arguments of echo.
	EchoArgs struct {
		Text string `json:"text" jsonschema:"the text to send back"`
	}
	// EnvArgs are the arguments of env.
	EnvArgs struct {
		Name string `json:"name" jsonschema:"name of the environment variable"`
	}
	// SleepArgs are the arguments of sleep.
	SleepArgs struct {
		MS int `json:"ms" jsonschema:"milliseconds to wait"`
	}
	// BigArgs are the arguments of big.
	BigArgs struct {
		Bytes int    `json:"bytes" jsonschema:"length of the answer in bytes (at least)"`
		Unit  string `json:"unit,omitempty" jsonschema:"string repeated to build the answer (default x)"`
	}
	// WriteFileArgs are the arguments of write_file.
	WriteFileArgs struct {
		Path    string `json:"path" jsonschema:"file to write"`
		Content string `json:"content" jsonschema:"content of the file"`
	}
)

// readOnly marks the tools that change nothing (echo, fail, env, pid), as
// real servers do with readOnlyHint.
var readOnly = &mcp.ToolAnnotations{ReadOnlyHint: true}

// NewServer returns an MCP server with the tools echo, fail, env, sleep, big,
// write_file and pid, plus crash, add, ignore_shutdown, hang and print when
// opts allows them.
func NewServer(opts ServerOptions) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Annotations: readOnly, Description: "Returns its text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in EchoArgs) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Annotations: readOnly, Description: "Always ends in a tool error."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("fail: this tool always fails")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Annotations: readOnly, Description: "Returns the value of an environment variable, or <unset>."},
		func(_ context.Context, _ *mcp.CallToolRequest, in EnvArgs) (*mcp.CallToolResult, any, error) {
			v, ok := os.LookupEnv(in.Name)
			if !ok {
				v = "<unset>"
			}
			return text(v), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Waits ms milliseconds, or until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in SleepArgs) (*mcp.CallToolResult, any, error) {
			t := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return text(fmt.Sprintf("slept %d ms", in.MS)), nil, nil
			case <-ctx.Done():
				return nil, nil, fmt.Errorf("sleep: %w", ctx.Err())
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Returns unit repeated to at least bytes bytes."},
		func(_ context.Context, _ *mcp.CallToolRequest, in BigArgs) (*mcp.CallToolResult, any, error) {
			unit := in.Unit
			if unit == "" {
				unit = "x"
			}
			n := (in.Bytes + len(unit) - 1) / len(unit)
			return text(strings.Repeat(unit, max(n, 0))), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Writes content to the file at path."},
		func(_ context.Context, _ *mcp.CallToolRequest, in WriteFileArgs) (*mcp.CallToolResult, any, error) {
			if err := os.WriteFile(in.Path, []byte(in.Content), 0o644); err != nil {
				return nil, nil, fmt.Errorf("write_file: %w", err)
			}
			return text(fmt.Sprintf("wrote %d bytes to %s", len(in.Content), in.Path)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Annotations: readOnly, Description: "Returns the server's process id."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	addProcessTools(s, opts)
	addFaultTools(s, opts)
	return s
}

func addProcessTools(s *mcp.Server, opts ServerOptions) {
	if opts.Exit != nil {
		mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Ends the server process in the middle of the call."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				opts.Exit(3)
				return text("unreachable"), nil, nil
			})
	}
	if opts.IgnoreShutdown != nil {
		mcp.AddTool(s, &mcp.Tool{Name: "ignore_shutdown", Description: "Makes the process ignore SIGTERM and the end of its input."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				opts.IgnoreShutdown()
				return text("ignoring shutdown"), nil, nil
			})
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// NewInMemory starts a fresh in-memory server (the tools of NewServer with zero
// options) and returns the client end of its transport. Its signature fits a
// connect hook such as toolhost.Options.Connect once the config is dropped.
// The server session is closed when the test ends.
func NewInMemory(ctx context.Context, t testing.TB) (mcp.Transport, error) {
	serverT, clientT := mcp.NewInMemoryTransports()
	ss, err := NewServer(ServerOptions{}).Connect(ctx, serverT, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting in-memory test server: %w", err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	return clientT, nil
}
