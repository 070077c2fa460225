package builtin_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/workspace/builtin"
)

// tree is a small checkout with a .git directory, a submodule's gitlink
// and a symbolic link.
func tree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"README.md":        "# demo\nneedle in the readme\n",
		"b.go":             "package b\n\nfunc needle() {}\n",
		"src/a.go":         "package src\n// Needle, capitalised\nvar needle = 1\n",
		"src/deep/c.txt":   "needle\n",
		".git/config":      "[core]\nneedle = in git\n",
		"mod/.git":         "gitdir: ../.git/modules/mod\n",
		"mod/m.go":         "package mod\n",
		"bin.dat":          "needle\x00binary",
		"docs/empty/.keep": "",
	})
	if err := os.Symlink("src", filepath.Join(dir, "srclink")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestListFiles(t *testing.T) {
	dir := tree(t)
	cs := connect(t, builtin.Options{Dir: dir})
	top := "README.md\nb.go\nbin.dat\ndocs/\nmod/\nsrc/\nsrclink -> src"
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"root", map[string]any{}, top},
		{"dot", map[string]any{"path": "."}, top},
		{"absolute root", map[string]any{"path": dir}, top},
		{"subdirectory", map[string]any{"path": "src"}, "src/a.go\nsrc/deep/"},
		{"through a link inside", map[string]any{"path": "srclink"}, "src/a.go\nsrc/deep/"},
		{"recursive", map[string]any{"path": "src", "recursive": true}, "src/a.go\nsrc/deep/\nsrc/deep/c.txt"},
		{"recursive skips .git", map[string]any{"path": "mod", "recursive": true}, "mod/m.go"},
		{"empty", map[string]any{"path": "docs/empty/.keep/.."}, "docs/empty/.keep"},
		{"bounded", map[string]any{"max_entries": 2},
			"README.md\nb.go\n[stopped at 2 entries; more exist: list a subdirectory, or raise max_entries (at most 5000)]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ok(t, cs, "list_files", tc.args); got != tc.want {
				t.Errorf("list_files(%v) =\n%s\nwant\n%s", tc.args, got, tc.want)
			}
		})
	}
	got := ok(t, cs, "list_files", map[string]any{"recursive": true})
	if strings.Contains(got, ".git") || !strings.Contains(got, "src/deep/c.txt") {
		t.Errorf("recursive listing of the root = %q, want everything but .git", got)
	}
	if err := os.Remove(filepath.Join(dir, "docs/empty/.keep")); err != nil {
		t.Fatal(err)
	}
	if got := ok(t, cs, "list_files", map[string]any{"path": "docs/empty"}); got != "(docs/empty is empty)" {
		t.Errorf("empty directory = %q", got)
	}
	fails(t, cs, "list_files", map[string]any{"path": "nope"}, "listing nope", "no such file")
	fails(t, cs, "list_files", map[string]any{"path": "b.go"}, "it is a file", "read_file")
}

func TestListFilesBoundedRecursive(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for i := range 700 {
		files[fmt.Sprintf("d%d/f%03d.txt", i%7, i)] = "x"
	}
	writeFiles(t, dir, files)
	cs := connect(t, builtin.Options{Dir: dir})
	got := ok(t, cs, "list_files", map[string]any{"recursive": true})
	lines := strings.Split(got, "\n")
	if len(lines) != 501 || !strings.HasPrefix(lines[500], "[stopped at 500 entries") {
		t.Errorf("a recursive listing of 707 entries gave %d lines, ending %q", len(lines), lines[len(lines)-1])
	}
}

func TestSearch(t *testing.T) {
	dir := tree(t)
	cs := connect(t, builtin.Options{Dir: dir})
	all := "README.md:2: needle in the readme\nb.go:3: func needle() {}\nsrc/a.go:3: var needle = 1\nsrc/deep/c.txt:1: needle"
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"plain skips .git, binaries and links", map[string]any{"pattern": "needle"}, all},
		{"plain is literal", map[string]any{"pattern": "needle()"}, "b.go:3: func needle() {}"},
		{"regex", map[string]any{"pattern": `(?i)^// needle`, "regex": true}, "src/a.go:2: // Needle, capitalised"},
		{"path", map[string]any{"pattern": "needle", "path": "src/deep"}, "src/deep/c.txt:1: needle"},
		{"a file", map[string]any{"pattern": "needle", "path": "b.go"}, "b.go:3: func needle() {}"},
		{"glob on the name", map[string]any{"pattern": "needle", "glob": "*.go"}, "b.go:3: func needle() {}\nsrc/a.go:3: var needle = 1"},
		{"glob on the path", map[string]any{"pattern": "needle", "glob": "src/*/*.txt"}, "src/deep/c.txt:1: needle"},
		{"none", map[string]any{"pattern": "haystack"}, `no matches for "haystack" in the checkout`},
		{"bounded", map[string]any{"pattern": "needle", "max_results": 2},
			"README.md:2: needle in the readme\nb.go:3: func needle() {}\n[stopped at 2 matching lines; more exist: narrow path, glob or pattern, or raise max_results (at most 1000)]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ok(t, cs, "search", tc.args); got != tc.want {
				t.Errorf("search(%v) =\n%s\nwant\n%s", tc.args, got, tc.want)
			}
		})
	}
	fails(t, cs, "search", map[string]any{"pattern": "(", "regex": true}, "not a valid Go regular expression")
	ok(t, cs, "search", map[string]any{"pattern": "("}) // plain text: no syntax
	fails(t, cs, "search", map[string]any{"pattern": "x", "glob": "["}, "glob", "malformed")
	fails(t, cs, "search", map[string]any{"pattern": ""}, "the pattern is empty")
	fails(t, cs, "search", map[string]any{"pattern": "x", "path": "nope"}, "searching nope", "no such file")
}

func TestSearchCutsAndSkips(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("a", 300) + "needle" + strings.Repeat("b", 300)
	big := strings.Repeat("needle\n", builtin.MaxSearchFileBytes/7+1)
	writeFiles(t, dir, map[string]string{"long.txt": long + "\n", "big.txt": big, "crlf.txt": "needle\r\n"})
	cs := connect(t, builtin.Options{Dir: dir})
	got := ok(t, cs, "search", map[string]any{"pattern": "needle"})
	want := "crlf.txt:1: needle\nlong.txt:1: " + strings.Repeat("a", 200) + " [... 406 more bytes]\n[1 files over 1 MiB were not searched]"
	if got != want {
		t.Errorf("search = %q\nwant %q", got, want)
	}
}
