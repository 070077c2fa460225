package buildtest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The key changes with every file a build embeds or compiles, and with
// none of the tests or their data.
func TestSourceKeyFollowsWhatTheBuildReads(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	key := func() string {
		t.Helper()
		k, err := sourceKey(root)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write("go.mod", "module example.com/m\n")
	write("go.sum", "")
	write("cmd/m/main.go", "package main\nfunc main() {}\n")
	write("internal/r/r.go", "package r\n")
	write("internal/r/templates/a.tmpl", "hello")
	k := key()
	for _, rel := range []string{"internal/r/r_test.go", "internal/r/testdata/big.golden", "README.md"} {
		write(rel, "anything")
		if key() != k {
			t.Errorf("adding %s changed the key", rel)
		}
	}
	for _, rel := range []string{"internal/r/templates/a.tmpl", "cmd/m/main.go", "go.sum", "internal/r/new.go"} {
		write(rel, "changed "+rel)
		if k2 := key(); k2 == k {
			t.Errorf("changing %s left the key as it was", rel)
		} else {
			k = k2
		}
	}
}

// Locked lets one function run at a time, also across goroutines of one
// process (each opens the lock file anew, as another process does).
func TestLockedRunsOneAtATime(t *testing.T) {
	var mu sync.Mutex
	in, most := 0, 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			err := Locked(func() error {
				mu.Lock()
				in++
				most = max(most, in)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				mu.Lock()
				in--
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d functions ran at once under the lock", most)
	}
}

// A build is made once and found again; builds of other source states
// no test used for an hour are removed, newer ones kept.
func TestCommandIsBuiltOnceAndOldBuildsArePruned(t *testing.T) {
	bin := Command(t, "./internal/toolhost/mcptest/testserver")
	fi, err := os.Stat(bin)
	if err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s: %v, mode %v", bin, err, fi.Mode())
	}
	if again := Command(t, "./internal/toolhost/mcptest/testserver"); again != bin {
		t.Errorf("second call: %s, first %s", again, bin)
	}
	dir := t.TempDir()
	for _, name := range []string{"old", "recent", "current"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * keep)
	if err := os.Chtimes(filepath.Join(dir, "old"), past, past); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(dir, "current"), past, past); err != nil {
		t.Fatal(err)
	}
	prune(dir, "current")
	for name, want := range map[string]bool{"old": false, "recent": true, "current": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s kept: %v, want %v", name, err == nil, want)
		}
	}
}
