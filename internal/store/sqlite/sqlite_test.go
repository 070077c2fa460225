package sqlite

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(t.Context(), t.TempDir())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

func mustOpen(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	s, err := OpenWith(t.Context(), dir, opts)
	if err != nil {
		t.Fatalf("OpenWith(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestTwoStoresOneFile stands in for two processes sharing the file: two
// *Store values have separate connection pools, so only SQLite's own locking
// stands between their claims.
func TestTwoStoresOneFile(t *testing.T) {
	dir := t.TempDir()
	a, b := mustOpen(t, dir, Options{}), mustOpen(t, dir, Options{})
	const perStore = 6
	ref := storetest.Ref(1)
	start := make(chan struct{})
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		wins, lost int
	)
	for _, s := range []*Store{a, b} {
		for range perStore {
			wg.Go(func() {
				<-start
				_, err := s.Claim(t.Context(), ref, storetest.LiveOwner(t, "m"))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, store.ErrClaimed):
					lost++
				default:
					t.Errorf("Claim: %v", err)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if wins != 1 || lost != 2*perStore-1 {
		t.Errorf("wins %d, refused %d; want 1 and %d", wins, lost, 2*perStore-1)
	}
	ra, err := a.Get(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Get(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(ra, rb) {
		t.Errorf("the two stores disagree (-a +b):\n%s", cmp.Diff(ra, rb))
	}
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ref := storetest.Ref(1)
	rec, err := s.Claim(t.Context(), ref, storetest.LiveOwner(t, "m"))
	if err != nil {
		t.Fatal(err)
	}
	cp := store.Checkpoint{Step: 3, Data: []byte("state"), CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	if err := s.SaveCheckpoint(t.Context(), ref, cp); err != nil {
		t.Fatal(err)
	}
	conv := store.Conversation{Round: 1, Mark: 77, Since: time.Date(2026, 1, 2, 3, 5, 0, 9, time.UTC),
		Summaries: []string{"first round"}}
	if err := s.SaveConversation(t.Context(), ref, conv); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, dir, Options{})
	got, err := s.Get(t.Context(), ref)
	if err != nil {
		t.Fatalf("Get after reopen: %v", err)
	}
	if !cmp.Equal(rec, got) {
		t.Errorf("record after reopen (-before +after):\n%s", cmp.Diff(rec, got))
	}
	gotCP, ok, err := s.LoadCheckpoint(t.Context(), ref)
	if err != nil || !ok || !cmp.Equal(cp, gotCP) {
		t.Errorf("checkpoint after reopen = %+v, %v, %v; want %+v", gotCP, ok, err, cp)
	}
	gotConv, ok, err := s.LoadConversation(t.Context(), ref)
	if err != nil || !ok || !cmp.Equal(conv, gotConv) {
		t.Errorf("conversation after reopen = %+v, %v, %v; want %+v", gotConv, ok, err, conv)
	}
	var version int
	if err := s.db.QueryRowContext(t.Context(), "PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != len(migrations) {
		t.Errorf("user_version = %d, want %d", version, len(migrations))
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, Options{})
	if _, err := s.db.ExecContext(t.Context(), "PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s2, err := Open(t.Context(), dir); err == nil {
		s2.Close()
		t.Fatal("Open of a database from a newer program succeeded")
	}
}

// TestConnectionPragmas checks that every pooled connection, not just the
// first, waits on locks, enforces foreign keys and zeroes what it deletes.
func TestConnectionPragmas(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{BusyTimeout: 7 * time.Second})
	var mode string
	if err := s.db.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	for i := range maxOpenConns {
		c, err := s.db.Conn(t.Context()) // held, so the next one is a new connection
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var busy, fk int
		if err := c.QueryRowContext(t.Context(), "PRAGMA busy_timeout").Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(t.Context(), "PRAGMA foreign_keys").Scan(&fk); err != nil {
			t.Fatal(err)
		}
		var secure int
		if err := c.QueryRowContext(t.Context(), "PRAGMA secure_delete").Scan(&secure); err != nil {
			t.Fatal(err)
		}
		if busy != 7000 || fk != 1 || secure != 1 {
			t.Errorf("connection %d: busy_timeout %d foreign_keys %d secure_delete %d, want 7000, 1 and 1", i, busy, fk, secure)
		}
	}
}

// TestTakeoverRules drives liveness through the injected probe.
func TestTakeoverRules(t *testing.T) {
	storetest.TakeoverRules(t, mustOpen(t, t.TempDir(), Options{Hostname: storetest.ProbeHost, Alive: storetest.ProbeAlive}))
}

func TestTimesFromClock(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	s := mustOpen(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	rec, err := s.Claim(t.Context(), storetest.Ref(1), store.Owner{Host: "h", PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.CreatedAt.Equal(now) || rec.CreatedAt.Location() != time.UTC || rec.UpdatedAt.Nanosecond() != 123456789 {
		t.Errorf("times %v / %v, want %v in UTC with nanoseconds", rec.CreatedAt, rec.UpdatedAt, now.UTC())
	}
}

func TestOpenCreatesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "nested")
	s := mustOpen(t, dir, Options{})
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		t.Errorf("database file: %v", err)
	}
	if s.Path() != filepath.Join(dir, FileName) {
		t.Errorf("Path() = %s", s.Path())
	}
}

// A cleared checkpoint leaves no copy of its text in the store's files:
// not in the database's pages (secure_delete), nor in the WAL, whether the
// store is still open or closed. Replaced checkpoints are gone too. The
// checkpoint is large enough to need overflow pages, which a deletion
// frees.
func TestClearedCheckpointLeavesNoTrace(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ref := storetest.Ref(1)
	if _, err := s.Claim(t.Context(), ref, storetest.LiveOwner(t, "m")); err != nil {
		t.Fatal(err)
	}
	const marker = "MARKER-sk-proj-0123456789"
	for i, size := range []int{200, 20000, 300} {
		data := []byte(fmt.Sprintf("%d %s %s", i, marker, strings.Repeat("x", size)))
		if err := s.SaveCheckpoint(t.Context(), ref, store.Checkpoint{Step: i, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ClearCheckpoint(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	checkNoMarker := func(when string) {
		t.Helper()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(b, []byte(marker)); n > 0 {
				t.Errorf("%s: %s holds the cleared checkpoint's text %d times", when, e.Name(), n)
			}
		}
	}
	checkNoMarker("store open")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoMarker("store closed")
}
