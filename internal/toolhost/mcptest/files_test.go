package mcptest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The file tools write, read and list in their directory and refuse every
// path that leads out of it: "..", an absolute path elsewhere, a symbolic
// link to a file or a directory outside.
func TestFileServerStaysInItsDirectory(t *testing.T) {
	ctx := context.Background()
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "link.txt")); err != nil {
		t.Fatal(err)
	}
	serverT, clientT := mcp.NewInMemoryTransports()
	ss, err := NewFileServer(root).Connect(ctx, serverT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		var b strings.Builder
		for _, c := range res.Content {
			b.WriteString(c.(*mcp.TextContent).Text)
		}
		return b.String(), res.IsError
	}

	if out, isErr := call("write_file", map[string]any{"path": filepath.Join(root, "hello.txt"), "content": "hello"}); isErr {
		t.Fatalf("write_file inside: %s", out)
	}
	if out, isErr := call("read_text_file", map[string]any{"path": "hello.txt"}); isErr || out != "hello" {
		t.Errorf("read_text_file of a relative path = %q (error %v), want hello", out, isErr)
	}
	if out, isErr := call("list_directory", map[string]any{"path": root}); isErr || !strings.Contains(out, "[FILE] hello.txt") {
		t.Errorf("list_directory = %q (error %v), want [FILE] hello.txt among the entries", out, isErr)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"write_file", map[string]any{"path": filepath.Join(root, "..", "escaped.txt"), "content": "x"}},
		{"write_file", map[string]any{"path": filepath.Join(outside, "escaped.txt"), "content": "x"}},
		{"write_file", map[string]any{"path": filepath.Join(root, "out", "escaped.txt"), "content": "x"}},
		{"read_text_file", map[string]any{"path": filepath.Join(root, "link.txt")}},
		{"read_text_file", map[string]any{"path": "../" + filepath.Base(outside) + "/secret.txt"}},
		{"list_directory", map[string]any{"path": filepath.Join(root, "out")}},
	} {
		out, isErr := call(c.tool, c.args)
		if !isErr || !strings.Contains(out, "Access denied - path outside allowed directories") {
			t.Errorf("%s %v = %q (error %v), want it refused as outside", c.tool, c.args, out, isErr)
		}
	}
	for _, dir := range []string{outside, filepath.Dir(root)} {
		if _, err := os.Stat(filepath.Join(dir, "escaped.txt")); err == nil {
			t.Errorf("a file was written in %s", dir)
		}
	}
}
