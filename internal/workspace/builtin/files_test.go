package builtin_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/workspace/builtin"
)

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.txt":         "alpha\nbeta\ngamma\n",
		"src/x.go":      "package x\n",
		"ten.txt":       numbered(10),
		"empty":         "",
		"nonl.txt":      "one\ntwo",
		"bin.dat":       "PNG\x00\x01\x02",
		"sub/dir/f.txt": "f\n",
	})
	cs := connect(t, builtin.Options{Dir: dir})
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"whole", map[string]any{"path": "a.txt"}, "alpha\nbeta\ngamma\n"},
		{"nested", map[string]any{"path": "src/x.go"}, "package x\n"},
		{"absolute inside", map[string]any{"path": filepath.Join(dir, "a.txt")}, "alpha\nbeta\ngamma\n"},
		{"dot segments", map[string]any{"path": "./src/../a.txt"}, "alpha\nbeta\ngamma\n"},
		{"offset", map[string]any{"path": "a.txt", "offset_line": 2}, "beta\ngamma\n"},
		{"no final newline", map[string]any{"path": "nonl.txt", "offset_line": 2}, "two"},
		{"max lines to the end", map[string]any{"path": "ten.txt", "offset_line": 9, "max_lines": 2}, "line 9\nline 10\n"},
		{"max lines", map[string]any{"path": "ten.txt", "offset_line": 3, "max_lines": 2},
			"line 3\nline 4\n\n[showed lines 3-4 of ten.txt; the file goes on: call read_file with offset_line=5 to read on]"},
		{"empty", map[string]any{"path": "empty"}, "(empty is empty)"},
		{"binary", map[string]any{"path": "bin.dat"}, "bin.dat is a binary file (6 bytes); read_file shows text files only."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ok(t, cs, "read_file", tc.args); got != tc.want {
				t.Errorf("read_file(%v) = %q, want %q", tc.args, got, tc.want)
			}
		})
	}
	fails(t, cs, "read_file", map[string]any{"path": "missing.txt"}, "reading missing.txt", "no such file")
	fails(t, cs, "read_file", map[string]any{"path": "sub"}, "sub is a directory", "list_files")
	fails(t, cs, "read_file", map[string]any{"path": "a.txt/x"}, "not a directory")
	fails(t, cs, "read_file", map[string]any{"path": ""}, "the path is empty")
	fails(t, cs, "read_file", map[string]any{"path": "a.txt", "offset_line": 4}, "offset_line 4 is past the end: the file has 3 lines")
	fails(t, cs, "read_file", map[string]any{"path": "nonl.txt", "offset_line": 9}, "the file has 2 lines")
	fails(t, cs, "read_file", map[string]any{}, "path")
}

func TestReadFileLimit(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("é", 100) // 200 bytes on one line
	writeFiles(t, dir, map[string]string{"big.txt": numbered(100), "long.txt": long + "\nnext\n"})
	cs := connect(t, builtin.Options{Dir: dir, MaxReadBytes: 64})
	got := ok(t, cs, "read_file", map[string]any{"path": "big.txt"})
	head, note, found := strings.Cut(got, "\n[")
	if !found || head != numbered(9) { // 9 lines of 7 bytes fit in 64
		t.Fatalf("read_file cut at 64 bytes = %q, want 9 whole lines and a note", got)
	}
	for _, w := range []string{"showed lines 1-9", "offset_line=10", "limited to 64 bytes"} {
		if !strings.Contains(note, w) {
			t.Errorf("note %q does not say %q", note, w)
		}
	}
	if got := ok(t, cs, "read_file", map[string]any{"path": "big.txt", "offset_line": 9, "max_lines": 1}); got != "line 9\n\n[showed lines 9-9 of big.txt; the file goes on: call read_file with offset_line=10 to read on]" {
		t.Errorf("reading on = %q", got)
	}
	got = ok(t, cs, "read_file", map[string]any{"path": "long.txt"})
	if !strings.HasPrefix(got, strings.Repeat("é", 32)+"\n[line 1 of long.txt is longer than the 64 bytes read_file shows") {
		t.Errorf("a line over the limit = %q", got)
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"old.txt": "old content that is long\n"})
	if err := os.Chmod(filepath.Join(dir, "old.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, builtin.Options{Dir: dir})
	if got := ok(t, cs, "write_file", map[string]any{"path": "new/deep/f.txt", "content": "hello\n"}); got != "created new/deep/f.txt (6 bytes written)" {
		t.Errorf("write_file new = %q", got)
	}
	if got := readBack(t, dir, "new/deep/f.txt"); got != "hello\n" {
		t.Errorf("new file holds %q", got)
	}
	if got := ok(t, cs, "write_file", map[string]any{"path": "old.txt", "content": "short"}); got != "overwrote old.txt (5 bytes written)" {
		t.Errorf("write_file old = %q", got)
	}
	if got := readBack(t, dir, "old.txt"); got != "short" {
		t.Errorf("overwritten file holds %q", got)
	}
	if fi, err := os.Stat(filepath.Join(dir, "old.txt")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("overwritten file's mode = %v, %v; want it kept (0755)", fi.Mode(), err)
	}
	ok(t, cs, "write_file", map[string]any{"path": "empty.txt", "content": ""})
	if got := readBack(t, dir, "empty.txt"); got != "" {
		t.Errorf("empty write holds %q", got)
	}
	fails(t, cs, "write_file", map[string]any{"path": "new", "content": "x"}, "writing new", "directory")
	fails(t, cs, "write_file", map[string]any{"path": "old.txt/x", "content": "x"}, "writing old.txt/x", "not a directory")
	fails(t, cs, "write_file", map[string]any{"path": "big", "content": strings.Repeat("x", builtin.MaxWriteBytes+1)},
		"more than the 5242880 bytes write_file takes")
	if _, err := os.Stat(filepath.Join(dir, "big")); !os.IsNotExist(err) {
		t.Errorf("an oversized write left a file: %v", err)
	}
	fails(t, cs, "write_file", map[string]any{"path": "x.txt"}, "content")
}

func TestEditFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"main.go": "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n",
		"dup.txt": "a x b x c x\n",
		"bin":     "x\x00y",
	})
	cs := connect(t, builtin.Options{Dir: dir})
	got := ok(t, cs, "edit_file", map[string]any{"path": "main.go", "old_text": "\tprintln(\"hi\")\n", "new_text": "\tprintln(\"hello\")\n"})
	if got != "replaced 1 occurrence in main.go" {
		t.Errorf("edit_file = %q", got)
	}
	if got := readBack(t, dir, "main.go"); got != "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n" {
		t.Errorf("edited file = %q", got)
	}
	fails(t, cs, "edit_file", map[string]any{"path": "dup.txt", "old_text": "x", "new_text": "y"}, "occurs 3 times", "replace_all")
	if got := readBack(t, dir, "dup.txt"); got != "a x b x c x\n" {
		t.Errorf("a refused edit changed the file: %q", got)
	}
	if got := ok(t, cs, "edit_file", map[string]any{"path": "dup.txt", "old_text": "x", "new_text": "yy", "replace_all": true}); got != "replaced 3 occurrences in dup.txt" {
		t.Errorf("replace_all = %q", got)
	}
	if got := readBack(t, dir, "dup.txt"); got != "a yy b yy c yy\n" {
		t.Errorf("replace_all left %q", got)
	}
	text := fails(t, cs, "edit_file", map[string]any{"path": "main.go", "old_text": "SECRET-GUESS", "new_text": "x"}, "not found", "read_file")
	if strings.Contains(text, "SECRET-GUESS") || strings.Contains(text, "package main") {
		t.Errorf("the not-found answer quotes the text or the file: %q", text)
	}
	fails(t, cs, "edit_file", map[string]any{"path": "main.go", "old_text": "", "new_text": "x"}, "old_text is empty")
	fails(t, cs, "edit_file", map[string]any{"path": "main.go", "old_text": "main", "new_text": "main"}, "the same")
	fails(t, cs, "edit_file", map[string]any{"path": "nope.go", "old_text": "a", "new_text": "b"}, "editing nope.go", "no such file")
	fails(t, cs, "edit_file", map[string]any{"path": "bin", "old_text": "x", "new_text": "z"}, "binary")
	fails(t, cs, "edit_file", map[string]any{"path": ".", "old_text": "x", "new_text": "z"}, "directory")
}
