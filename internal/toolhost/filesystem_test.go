package toolhost

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// TestFilesystemServerFromNPM runs the reference filesystem server
// (@modelcontextprotocol/server-filesystem, installed by npm ci) over stdio.
func TestFilesystemServerFromNPM(t *testing.T) {
	bin := mcptest.NodeModule(t, ".bin/mcp-server-filesystem")
	dir := t.TempDir()
	h := start(t, Options{Servers: []ServerConfig{{Name: "fs", Command: []string{bin, dir}}}})

	var names []string
	for _, tool := range h.Tools() {
		names = append(names, tool.FullName())
	}
	for _, want := range []string{"fs/write_file", "fs/read_text_file", "fs/list_directory"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools %v lack %s", names, want)
		}
	}

	path := filepath.Join(dir, "notes", "hello.txt")
	if err := os.Mkdir(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	r := call(t, h, "fs/write_file", map[string]string{"path": path, "content": "grüße\n"})
	if r.IsError {
		t.Fatalf("write_file: %+v", r)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "grüße\n" {
		t.Errorf("file on disk = %q, %v", b, err)
	}
	wantOK(t, call(t, h, "fs/read_text_file", map[string]string{"path": path}), "grüße\n")
	r = call(t, h, "fs/list_directory", map[string]string{"path": filepath.Dir(path)})
	if r.IsError || !strings.Contains(r.Text, "hello.txt") {
		t.Errorf("list_directory = %+v, want it to list hello.txt", r)
	}
	// Outside the allowed directory: the server refuses, as a tool error.
	wantToolError(t, call(t, h, "fs/read_text_file", map[string]string{"path": "/etc/hostname"}), "denied")
}
