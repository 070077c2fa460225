// Package builtin is the daemon's own MCP tool server, named "workspace",
// bound to one task's checkout: it reads, writes, edits, lists and searches
// the files of the checkout, and runs commands in the task's sandbox through
// a Runner. The daemon serves it in-process, over the go-sdk's in-memory
// transports.
//
// Every path a tool takes is relative to the checkout (an absolute path
// inside it is accepted too). Files are reached through an os.Root opened on
// the checkout for each call, so ".." and symbolic links cannot lead out of
// it, even when a link is created or changed while a call runs; on top of
// that the tools follow no absolute link and no link that leads out, and
// write and edit nothing inside a ".git" (in any case, at any depth,
// whether a directory or a gitlink file).
//
// A tool's failure (a bad path, no such file, text not found, a command
// that exits non-zero) is a tool result with IsError set, for the model to
// read and adapt; nothing a call asks makes the server fail or panic.
package builtin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Name is the server's name: its tools are "workspace/read_file" and so on
// in the tool host.
const Name = "workspace"

// The defaults and bounds of Options and of the tools' arguments.
const (
	DefaultMaxTimeout   = 300 * time.Second
	DefaultMaxReadBytes = 64 << 10
	// MaxWriteBytes bounds write_file's content and the file edit_file
	// edits.
	MaxWriteBytes = 5 << 20
	// MaxSearchFileBytes: search skips larger files.
	MaxSearchFileBytes = 1 << 20
)

// Runner runs one command line in the task's sandbox (the daemon passes a
// sandbox-backed one), with /bin/sh -c semantics, in the checkout.
type Runner interface {
	// Run runs command and bounds it by timeout. The error means the
	// sandbox could not start it (a system problem); a command that fails
	// is a Ran with its exit code.
	Run(ctx context.Context, command string, timeout time.Duration) (Ran, error)
}

// Ran is how a command run by a Runner ended.
type Ran struct {
	ExitCode int    // -1 when it did not exit on its own (a signal, the timeout)
	TimedOut bool   // killed at the timeout
	Signal   string // the signal that ended it ("SIGKILL"), if any
	// Stdout and Stderr are already cut to the runner's limit (head and
	// tail kept); StdoutDropped and StderrDropped count the bytes cut.
	Stdout, Stderr               string
	StdoutDropped, StderrDropped int64
	Duration                     time.Duration
	// Note is what the daemon did first, for the model to read before the
	// command's own answer (the setup, run again because a file it depends
	// on changed); "" for nothing.
	Note string
}

// Options configure a server; zero values mean the defaults.
type Options struct {
	// Dir is the checkout; every path is relative to it. It must exist.
	Dir string
	// Runner runs run_command's commands; nil: no run_command tool.
	Runner Runner
	// MaxTimeout is the most run_command's timeout_seconds may ask, and
	// its default; 0 → DefaultMaxTimeout.
	MaxTimeout time.Duration
	// MaxReadBytes bounds one read_file answer (a note says how to read
	// on); 0 → DefaultMaxReadBytes. Keep it below the tool host's
	// MaxResultBytes, or the host cuts the answer and its note.
	MaxReadBytes int
}

// schemas caches the tools' input schemas across servers: one server is
// made per task, and deriving them by reflection each time is the bulk of
// NewServer's cost.
var schemas = mcp.NewSchemaCache()

// server holds what the tools of one server share.
type server struct {
	co         checkout
	runner     Runner
	maxTimeout time.Duration
	maxRead    int
}

// NewServer returns the workspace server for the checkout o.Dir, with its
// tools.
func NewServer(o Options) (*mcp.Server, error) {
	co, err := newCheckout(o.Dir)
	if err != nil {
		return nil, err
	}
	s := &server{co: co, runner: o.Runner, maxTimeout: o.MaxTimeout, maxRead: o.MaxReadBytes}
	if s.maxTimeout <= 0 {
		s.maxTimeout = DefaultMaxTimeout
	}
	if s.maxRead <= 0 {
		s.maxRead = DefaultMaxReadBytes
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: Name, Version: "1"}, &mcp.ServerOptions{
		Instructions: "Tools on the task's checkout. Paths are relative to the checkout root.",
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		SchemaCache:  schemas,
	})
	s.addFileTools(srv)
	s.addFindTools(srv)
	if s.runner != nil {
		s.addRunTool(srv)
	}
	return srv, nil
}

// newCheckout checks that dir is a directory and notes its absolute path,
// as given and with symbolic links resolved.
func newCheckout(dir string) (checkout, error) {
	if dir == "" {
		return checkout{}, errors.New("creating the workspace server: Options.Dir is empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return checkout{}, fmt.Errorf("creating the workspace server: resolving %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return checkout{}, fmt.Errorf("creating the workspace server: resolving %s: %w", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return checkout{}, fmt.Errorf("creating the workspace server: %w", err)
	}
	if !fi.IsDir() {
		return checkout{}, fmt.Errorf("creating the workspace server: %s is not a directory", dir)
	}
	return checkout{dir: abs, real: real}, nil
}

// text is a tool result of one text.
func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// readOnly and writes are the tools' annotations.
var (
	readOnly = &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
	writes   = &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: new(true), OpenWorldHint: new(false)}
)
