package toolhost

import (
	"errors"
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

// TestFilesystemServerPerTask runs the npm filesystem server per task, its
// allowed directory the task's ${WORKSPACE}: each of two tasks works in its
// own checkout and cannot reach the other's.
func TestFilesystemServerPerTask(t *testing.T) {
	bin := mcptest.NodeModule(t, ".bin/mcp-server-filesystem")
	h := start(t, Options{Servers: []ServerConfig{{Name: "fs", Scope: ScopeTask, Command: []string{bin, "${WORKSPACE}"}}}})
	if !slices.ContainsFunc(h.Tools(), func(tool Tool) bool { return tool.FullName() == "fs/write_file" }) {
		t.Fatalf("the probe listed %v, without fs/write_file", h.Tools())
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	a := forTask(t, h, TaskVars{Workspace: dirA, TaskRef: "github:acme/app#1", Branch: "coding-agent/1"})
	b := forTask(t, h, TaskVars{Workspace: dirB, TaskRef: "github:acme/app#2", Branch: "coding-agent/2"})

	r := sessionCall(t, a, "fs/list_allowed_directories", nil)
	if !strings.Contains(r.Text, dirA) || strings.Contains(r.Text, dirB) {
		t.Errorf("task A's allowed directories: %q, want %s alone", r.Text, dirA)
	}
	fileA := filepath.Join(dirA, "notes.txt")
	if r := sessionCall(t, a, "fs/write_file", map[string]string{"path": fileA, "content": "A's notes\n"}); r.IsError {
		t.Fatalf("write_file through A: %+v", r)
	}
	wantOK(t, sessionCall(t, a, "fs/read_text_file", map[string]string{"path": fileA}), "A's notes\n")
	// B sees nothing of A's workspace.
	wantToolError(t, sessionCall(t, b, "fs/read_text_file", map[string]string{"path": fileA}), "denied")
	wantToolError(t, sessionCall(t, b, "fs/list_directory", map[string]string{"path": dirA}), "denied")
	if r := sessionCall(t, b, "fs/list_directory", map[string]string{"path": dirB}); r.IsError || strings.Contains(r.Text, "notes.txt") {
		t.Errorf("B's workspace lists %+v", r)
	}
	// Writing outside its workspace is refused by the server.
	for _, outside := range []string{filepath.Join(dirB, "from-a.txt"), filepath.Join(t.TempDir(), "elsewhere.txt")} {
		wantToolError(t, sessionCall(t, a, "fs/write_file", map[string]string{"path": outside, "content": "x"}), "denied")
		if _, err := os.Stat(outside); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after a refused write: %v", outside, err)
		}
	}
}
