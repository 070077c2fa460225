package builtin_test

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/workspace/builtin"
)

// marker is in every file outside the checkout: no answer may hold it.
const marker = "TOP-SECRET-OUTSIDE-4f1c"

// jail is a checkout beside a directory outside it, with symbolic links
// from one to the other made after the server started.
type jail struct {
	dir, outside string
	cs           *mcp.ClientSession
}

func newJail(t *testing.T) *jail {
	t.Helper()
	base := t.TempDir()
	j := &jail{dir: filepath.Join(base, "checkout"), outside: filepath.Join(base, "outside")}
	writeFiles(t, j.outside, map[string]string{"secret.txt": marker + "\n", "sub/deep.txt": marker + "\n"})
	writeFiles(t, j.dir, map[string]string{
		"sub/in.txt":                "inside\n",
		".git/config":               "[core]\n",
		"mod/.git":                  "gitdir: ../.git/modules/mod\n",
		"mod/.git.d/x":              "x\n",
		"MOD/.Git/hooks/pre-commit": "#!/bin/sh\n",
	})
	j.cs = connect(t, builtin.Options{Dir: j.dir})
	for link, target := range map[string]string{
		"out":     j.outside,
		"outfile": filepath.Join(j.outside, "secret.txt"),
		"relout":  "../outside",
		"relfile": "../outside/secret.txt",
		"sneaky":  "sub/../../outside",
		"absin":   filepath.Join(j.dir, "sub"),
		"insub":   "sub",
		"gitlink": ".git",
		"loop":    "loop",
	} {
		if err := os.Symlink(target, filepath.Join(j.dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

// snapshot is every file and directory below dir with its content.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			m[p] = "dir"
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			m[p] = "link to " + target
			return err
		}
		b, err := os.ReadFile(p)
		m[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// refused calls every tool on p, and fails the test unless each call is a
// tool error that neither shows nor changes anything outside.
func (j *jail) refused(t *testing.T, p string, want ...string) {
	t.Helper()
	before := snapshot(t, j.outside)
	for tool, args := range map[string]map[string]any{
		"read_file":  {"path": p},
		"write_file": {"path": p, "content": "pwned"},
		"edit_file":  {"path": p, "old_text": marker, "new_text": "pwned"},
		"list_files": {"path": p},
		"search":     {"pattern": "SECRET-OUTSIDE", "path": p},
	} {
		text := fails(t, j.cs, tool, args, want...)
		if strings.Contains(text, marker) {
			t.Errorf("%s(%q) shows what is outside: %q", tool, p, text)
		}
	}
	if after := snapshot(t, j.outside); !maps.Equal(before, after) {
		t.Errorf("calls on %q changed the outside: %v → %v", p, before, after)
	}
}

func TestEscapesRefused(t *testing.T) {
	j := newJail(t)
	for _, tc := range []struct{ name, path, why string }{
		{"dot-dot", "../x", "leads out of the checkout"},
		{"dot-dot to the outside", "../outside/secret.txt", "leads out of the checkout"},
		{"dot-dot after a directory", "sub/../../outside/secret.txt", "leads out of the checkout"},
		{"dot-dot after a link", "insub/../../outside/secret.txt", "leads out of the checkout"},
		{"absolute outside", "/etc/passwd", "outside the checkout"},
		{"absolute to the outside", filepath.Join(filepath.Dir(j.dir), "outside", "secret.txt"), "outside the checkout"},
		{"absolute prefix lookalike", j.dir + "x/secret.txt", "outside the checkout"},
		{"link to an outside directory", "out", "absolute path"},
		{"through a link to an outside directory", "out/secret.txt", "absolute path"},
		{"parent is a link to outside", "out/sub/new.txt", "absolute path"},
		{"link to an outside file", "outfile", "absolute path"},
		{"relative link out", "relout", "through a symbolic link"},
		{"through a relative link out", "relout/secret.txt", "through a symbolic link"},
		{"relative file link out", "relfile", "through a symbolic link"},
		{"link out through a subdirectory", "sneaky/secret.txt", "through a symbolic link"},
		{"absolute link inside", "absin/in.txt", "absolute path"},
		{"link loop", "loop", "too many symbolic links"},
		{"NUL byte", "sub/in.txt\x00../../outside/secret.txt", "NUL byte"},
	} {
		t.Run(tc.name, func(t *testing.T) { j.refused(t, tc.path, tc.why) })
	}
}

// TestEscapesNotFollowed: walking the checkout from its root never goes
// through the links that lead out.
func TestEscapesNotFollowed(t *testing.T) {
	j := newJail(t)
	for _, args := range []map[string]any{
		{"pattern": "SECRET-OUTSIDE"},
		{"pattern": "SECRET.OUTSIDE", "regex": true},
		{"pattern": "SECRET-OUTSIDE", "path": "."},
	} {
		if got := ok(t, j.cs, "search", args); strings.Contains(got, marker) || !strings.HasPrefix(got, "no matches") {
			t.Errorf("search(%v) = %q", args, got)
		}
	}
	got := ok(t, j.cs, "list_files", map[string]any{"recursive": true, "max_entries": 5000})
	for line := range strings.SplitSeq(got, "\n") {
		if strings.Contains(line, "deep.txt") || strings.HasSuffix(line, "secret.txt") && !strings.Contains(line, " -> ") {
			t.Errorf("a recursive listing went through a link out: %q", line)
		}
	}
	if !strings.Contains(got, "out -> "+j.outside) {
		t.Errorf("the listing does not show the link: %s", got)
	}
}

func TestLinksInsideFollowed(t *testing.T) {
	j := newJail(t)
	if got := ok(t, j.cs, "read_file", map[string]any{"path": "insub/in.txt"}); got != "inside\n" {
		t.Errorf("read through a link inside = %q", got)
	}
	ok(t, j.cs, "write_file", map[string]any{"path": "insub/new.txt", "content": "new"})
	if got := readBack(t, j.dir, "sub/new.txt"); got != "new" {
		t.Errorf("written through a link inside: %q", got)
	}
	ok(t, j.cs, "edit_file", map[string]any{"path": "insub/new.txt", "old_text": "new", "new_text": "newer"})
	if got := readBack(t, j.dir, "sub/new.txt"); got != "newer" {
		t.Errorf("edited through a link inside: %q", got)
	}
	if got := ok(t, j.cs, "read_file", map[string]any{"path": ".git/config"}); got != "[core]\n" {
		t.Errorf("reading .git/config = %q", got)
	}
}

func TestGitWritesRefused(t *testing.T) {
	j := newJail(t)
	before := snapshot(t, j.dir)
	for _, p := range []string{
		".git/config", ".git/hooks/pre-commit", ".git", "mod/.git/config", "mod/.git",
		"MOD/.Git/hooks/x", "MOD/.Git/hooks/pre-commit", ".GIT/config", "sub/../.git/config",
		".git./config", ".git /config", ".g\u200cit/config", "GIT~1/config", "gitlink/config", "gitlink",
		filepath.Join(j.dir, ".git", "config"),
	} {
		fails(t, j.cs, "write_file", map[string]any{"path": p, "content": "pwned"}, ".git", "do not write there")
		fails(t, j.cs, "edit_file", map[string]any{"path": p, "old_text": "core", "new_text": "pwned"}, ".git", "do not write there")
	}
	if after := snapshot(t, j.dir); !maps.Equal(before, after) {
		t.Errorf("refused writes changed the checkout: %v → %v", before, after)
	}
	// Names that only start like .git are files like any other.
	ok(t, j.cs, "write_file", map[string]any{"path": "mod/.git.d/x", "content": "y"})
	ok(t, j.cs, "write_file", map[string]any{"path": ".gitignore", "content": "*.o\n"})
	ok(t, j.cs, "write_file", map[string]any{"path": "sub/git/x", "content": "y"})
}

// TestSwapRace swaps a directory of the checkout for a link to the outside
// while the tools read, list and search it: whatever wins each race, nothing
// outside is shown or written.
func TestSwapRace(t *testing.T) {
	j := newJail(t)
	writeFiles(t, j.dir, map[string]string{"swap/secret.txt": "inside\n"})
	before := snapshot(t, j.outside)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		swap, real := filepath.Join(j.dir, "swap"), filepath.Join(j.dir, "swap.real")
		targets := []string{"../outside", j.outside}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// A write_file may create swap while it is away: errors
			// are expected, and RemoveAll clears the way.
			_ = os.Rename(swap, real)
			_ = os.Symlink(targets[i%2], swap)
			_ = os.RemoveAll(swap) // the link itself, not where it leads
			_ = os.Rename(real, swap)
		}
	})
	for range 300 {
		for tool, args := range map[string]map[string]any{
			"read_file":  {"path": "swap/secret.txt"},
			"list_files": {"path": "swap"},
			"search":     {"pattern": "SECRET-OUTSIDE", "path": "swap"},
			"write_file": {"path": "swap/new.txt", "content": "x"},
		} {
			if text, _ := call(t, j.cs, tool, args); strings.Contains(text, marker) {
				t.Fatalf("%s during a swap shows the outside: %q", tool, text)
			}
		}
	}
	close(stop)
	wg.Wait()
	if after := snapshot(t, j.outside); !maps.Equal(before, after) {
		t.Errorf("calls during a swap changed the outside: %v → %v", before, after)
	}
}
