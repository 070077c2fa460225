package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/storetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// A database file removed or replaced under the open store (rm of the
// file, of the state directory, a restore copied over it, its write-ahead
// log deleted) makes every call fail with store.ErrLost, naming the file
// and what happened, and a failure of the store once marked: nothing is
// written into the unlinked file as if it were kept, and no new empty
// database is made at the path. Close still works.
func TestRemovedOrReplacedDatabaseIsLost(t *testing.T) {
	for _, c := range []struct {
		name   string
		break_ func(t *testing.T, dir string)
		file   string // the file named, in dir
		how    string
	}{
		{"file removed", func(t *testing.T, dir string) { remove(t, filepath.Join(dir, FileName)) }, FileName, "removed"},
		{"directory removed", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}, FileName, "removed"},
		{"file replaced", func(t *testing.T, dir string) {
			db := filepath.Join(dir, FileName)
			b, err := os.ReadFile(db)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(db+".restored", b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(db+".restored", db); err != nil {
				t.Fatal(err)
			}
		}, FileName, "replaced"},
		{"write-ahead log removed", func(t *testing.T, dir string) { remove(t, filepath.Join(dir, FileName+"-wal")) }, FileName + "-wal", "removed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, Options{})
			ref := storetest.Ref(1)
			o := storetest.LiveOwner(t, "m")
			if _, err := s.Claim(t.Context(), ref, o); err != nil {
				t.Fatal(err)
			}
			if err := s.SaveCheckpoint(t.Context(), ref, store.Checkpoint{Step: 1, Data: []byte("step one")}); err != nil {
				t.Fatal(err)
			}
			c.break_(t, dir)
			_, replacedBefore := os.Stat(filepath.Join(dir, FileName))

			want := "the state database " + filepath.Join(dir, c.file) + " was " + c.how + " while running"
			if c.file != FileName {
				want = "the state database's write-ahead log " + filepath.Join(dir, c.file) + " was " + c.how + " while running"
			}
			for name, err := range storetest.EveryCall(t.Context(), store.MarkFailures(s), ref, o) {
				if !errors.Is(err, store.ErrLost) || !store.IsFailure(err) || !strings.Contains(err.Error(), want) {
					t.Errorf("%s after the database was %s: %v; want a failure saying %q", name, c.how, err, want)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, FileName)); (err == nil) != (replacedBefore == nil) {
				t.Errorf("the calls made or removed a database at the path: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// The store keeps its write-ahead log while it is open, even when every
// pooled connection was closed for being idle: a log that SQLite removed
// and made again would read as a replaced one.
func TestIdleStoreIsNotLost(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, Options{})
	ref := storetest.Ref(1)
	if _, err := s.Claim(t.Context(), ref, storetest.LiveOwner(t, "m")); err != nil {
		t.Fatal(err)
	}
	s.db.SetMaxIdleConns(0) // every connection back in the pool is closed
	if err := s.SetStatus(t.Context(), ref, task.Done, ""); err != nil {
		t.Fatal(err)
	}
	s.db.SetMaxIdleConns(2)
	if _, err := s.Get(t.Context(), ref); err != nil {
		t.Errorf("Get after the pool was emptied: %v", err)
	}
}
