package builtin

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fuzzMarker = "FUZZ-OUTSIDE-MARKER-91e2"

// fuzzJail makes a checkout beside an outside directory holding the marker,
// with links from one to the other, and returns the checkout's server.
func fuzzJail(f *testing.F) (s *server, outside string) {
	f.Helper()
	base := f.TempDir()
	dir, outside := filepath.Join(base, "checkout"), filepath.Join(base, "outside")
	for p, content := range map[string]string{
		filepath.Join(outside, "secret.txt"):     fuzzMarker,
		filepath.Join(outside, "sub", "s.txt"):   fuzzMarker,
		filepath.Join(dir, "sub", "in.txt"):      "inside",
		filepath.Join(dir, ".git", "config"):     "[core]",
		filepath.Join(dir, "mod", ".git"):        "gitdir: x",
		filepath.Join(dir, "MOD", ".Git", "cfg"): "x",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"out": outside, "outfile": filepath.Join(outside, "secret.txt"), "relout": "../outside",
		"relfile": "../outside/secret.txt", "sneaky": "sub/../../outside", "insub": "sub", "loop": "loop",
		"sub/up": "..", "sub/upup": "../..",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			f.Fatal(err)
		}
	}
	co, err := newCheckout(dir)
	if err != nil {
		f.Fatal(err)
	}
	return &server{co: co, maxTimeout: DefaultMaxTimeout, maxRead: DefaultMaxReadBytes}, outside
}

// tree is every path below dir, with a file's content or a link's target.
func tree(t testing.TB, dir string) map[string]string {
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			m[p] = "dir"
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			m[p] = "-> " + target
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

// FuzzPaths gives every tool one path: nothing outside the checkout is
// ever shown or changed, and what a path resolves to is inside.
func FuzzPaths(f *testing.F) {
	s, outside := fuzzJail(f)
	for _, p := range []string{
		"sub/in.txt", "insub/in.txt", ".", "", "../x", "../outside/secret.txt", "sub/../../outside/secret.txt",
		"/etc/passwd", filepath.Join(outside, "secret.txt"), s.co.dir + "/../outside/secret.txt", s.co.dir + "x",
		"out", "out/secret.txt", "out/sub/new.txt", "outfile", "relout/secret.txt", "relfile", "sneaky/secret.txt",
		"loop", "loop/x", "sub/up/sub/in.txt", "sub/upup/outside/secret.txt", "insub/../../outside/secret.txt",
		"sub/in.txt\x00/../../outside/secret.txt", ".git/config", "mod/.git/config", "MOD/.Git/hooks/x",
		".GIT", ".g\u200cit/config", "gitlink/config", "a//b/./c", "new/dir/f.txt",
	} {
		f.Add(p)
	}
	before := tree(f, outside)
	f.Fuzz(func(t *testing.T, p string) {
		var answers []string
		note := func(out string, err error) {
			answers = append(answers, out)
			if err != nil {
				answers = append(answers, err.Error())
			}
		}
		note(s.readFile(readInput{Path: p}))
		note(s.writeFile(writeInput{Path: p, Content: "fuzz"}))
		note(s.editFile(editInput{Path: p, OldText: fuzzMarker, NewText: "fuzz"}))
		note(s.editFile(editInput{Path: p, OldText: "fuzz", NewText: "fuzzed"}))
		note(s.listFiles(listInput{Path: p, Recursive: true}))
		note(s.search(context.Background(), searchInput{Pattern: "OUTSIDE-MARKER", Path: p}))
		for _, a := range answers {
			if strings.Contains(a, fuzzMarker) {
				t.Fatalf("path %q: an answer shows the outside: %q", p, a)
			}
		}
		if after := tree(t, outside); !maps.Equal(before, after) {
			t.Fatalf("path %q changed the outside: %v", p, after)
		}
		checkResolved(t, s, p)
	})
}

// checkResolved: what p resolves to is a local path whose target, links
// followed by the system, is inside the checkout.
func checkResolved(t *testing.T, s *server, p string) {
	root, err := s.co.open()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = root.Close() }()
	loc, err := s.co.locate(root, p)
	if err != nil {
		return
	}
	if loc != "." && !filepath.IsLocal(loc) {
		t.Fatalf("path %q resolved to %q, not a local path", p, loc)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(s.co.real, loc))
	if err != nil {
		return // does not exist (yet)
	}
	if real != s.co.real && !strings.HasPrefix(real, s.co.real+string(filepath.Separator)) {
		t.Fatalf("path %q resolved to %q, which is %s, outside the checkout", p, loc, real)
	}
}
