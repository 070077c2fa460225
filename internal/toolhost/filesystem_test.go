package toolhost

import (
	"log/slog"
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
	logs := &logRecorder{}
	h := start(t, Options{Servers: []ServerConfig{{Name: "fs", Command: []string{bin, dir}}}, Logger: slog.New(logs)})
	// Every input schema of the real server can be checked.
	if got := logs.find("MCP tool's input schema cannot be checked; its arguments go unchecked"); len(got) != 0 {
		t.Errorf("schemas that cannot be checked: %v", got)
	}

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
	// A wrong type deep in the arguments is found before the server is called.
	r = call(t, h, "fs/edit_file", map[string]any{"path": path, "edits": []any{map[string]any{"oldText": 1, "newText": "x"}}})
	wantToolError(t, r, `argument "edits[].oldText": type: 1 has type "integer", want "string"`, "The tool was not called")
	// Outside the allowed directory: the server refuses, as a tool error.
	wantToolError(t, call(t, h, "fs/read_text_file", map[string]string{"path": "/etc/hostname"}), "denied")
}
