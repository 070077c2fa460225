package builtin_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/workspace/builtin"
)

// connect serves a workspace server made with o to a go-sdk client over
// in-memory transports, and closes both at the end of the test.
func connect(tb testing.TB, o builtin.Options) *mcp.ClientSession {
	tb.Helper()
	ctx := context.Background()
	srv, err := builtin.NewServer(o)
	if err != nil {
		tb.Fatalf("NewServer: %v", err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		tb.Fatalf("server connect: %v", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		tb.Fatalf("client connect: %v", err)
	}
	tb.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

// call calls tool with args and returns the result's text.
func call(tb testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) (string, *mcp.CallToolResult) {
	tb.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		tb.Fatalf("%s(%v): protocol error: %v", tool, args, err)
	}
	var parts []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			tb.Fatalf("%s: content %T, want text", tool, c)
		}
		parts = append(parts, tc.Text)
	}
	return strings.Join(parts, "\n"), res
}

// ok calls tool and fails the test unless the result is not an error.
func ok(tb testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) string {
	tb.Helper()
	text, res := call(tb, cs, tool, args)
	if res.IsError {
		tb.Fatalf("%s(%v) is an error: %s", tool, args, text)
	}
	return text
}

// fails calls tool and fails the test unless the result is an error whose
// text holds every one of want.
func fails(tb testing.TB, cs *mcp.ClientSession, tool string, args map[string]any, want ...string) string {
	tb.Helper()
	text, res := call(tb, cs, tool, args)
	if !res.IsError {
		tb.Fatalf("%s(%v) is not an error: %s", tool, args, text)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			tb.Errorf("%s(%v) = %q, want it to say %q", tool, args, text, w)
		}
	}
	return text
}

// writeFiles writes files (path → content) below dir.
func writeFiles(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// readBack reads a file below dir.
func readBack(tb testing.TB, dir, p string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// fakeRunner answers every Run with ran or err, and records the calls.
type fakeRunner struct {
	ran Ran
	err error

	mu       sync.Mutex
	commands []string
	timeouts []time.Duration
}

// Ran is builtin.Ran, shorter.
type Ran = builtin.Ran

func (f *fakeRunner) Run(ctx context.Context, command string, timeout time.Duration) (builtin.Ran, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commands = append(f.commands, command)
	f.timeouts = append(f.timeouts, timeout)
	return f.ran, f.err
}

func (f *fakeRunner) lastTimeout() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timeouts) == 0 {
		return 0
	}
	return f.timeouts[len(f.timeouts)-1]
}
