package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/postgres/pgtest"
	"github.com/coding-agent/coding-agent/internal/store/storetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(t.Context(), pgtest.Schema(t), Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

func mustOpen(t *testing.T, url string, opts Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), url, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// migratedLog counts the "store schema migrated" notices of every store
// given its logger.
type migratedLog struct{ n atomic.Int32 }

func (m *migratedLog) Enabled(context.Context, slog.Level) bool { return true }
func (m *migratedLog) WithAttrs([]slog.Attr) slog.Handler       { return m }
func (m *migratedLog) WithGroup(string) slog.Handler            { return m }
func (m *migratedLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "store schema migrated" {
		m.n.Add(1)
	}
	return nil
}

func schemaVersions(t *testing.T, s *Store) []int {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), `SELECT version FROM schema_version ORDER BY version`)
	if err != nil {
		t.Fatalf("reading schema_version: %v", err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

func allVersions() []int {
	var vs []int
	for i := range migrations {
		vs = append(vs, i+1)
	}
	return vs
}

// Hosts starting at once on an empty database all open the store, and the
// schema is migrated once.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	const n = 8
	counter := &migratedLog{}
	stores := make([]*Store, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(t.Context(), url, Options{Logger: slog.New(counter)})
		})
	}
	close(start)
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Errorf("Open %d: %v", i, errs[i])
			continue
		}
		t.Cleanup(func() { s.Close() })
	}
	if t.Failed() {
		return
	}
	if got := counter.n.Load(); got != 1 {
		t.Errorf("%d of %d opens migrated the schema, want 1", got, n)
	}
	if diff := cmp.Diff(allVersions(), schemaVersions(t, stores[0])); diff != "" {
		t.Errorf("schema_version (-want +got):\n%s", diff)
	}
	// Every store works on the one schema.
	for i, s := range stores {
		if _, err := s.Claim(t.Context(), storetest.Ref(i+1), storetest.LiveOwner(t, "m")); err != nil {
			t.Errorf("Claim through store %d: %v", i, err)
		}
	}
	if recs, err := stores[0].List(t.Context()); err != nil || len(recs) != n {
		t.Errorf("List = %d rows, %v; want %d", len(recs), err, n)
	}
}

// Two stores stand in for two hosts: separate pools, separate host names.
// Each round their claimers race for a new task (the insert path), then,
// once it awaits a reply, for the known task (the locked-row path); only
// PostgreSQL's locking stands between them, and exactly one wins each race.
func TestClaimRaceAcrossHosts(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	a := mustOpen(t, url, Options{Hostname: "host-a"})
	b := mustOpen(t, url, Options{Hostname: "host-b"})
	for round := range 30 {
		ref := storetest.Ref(round + 1)
		race(t, a, b, ref, fmt.Sprintf("round %d, new task", round))
		if err := a.SetStatus(t.Context(), ref, task.Awaiting, ""); err != nil {
			t.Fatal(err)
		}
		race(t, a, b, ref, fmt.Sprintf("round %d, awaiting task", round))
	}
}

// race has three claimers on each store claim ref at once, each as its
// store's host (a is host-a, b host-b), and wants one winner whose record both stores read.
func race(t *testing.T, a, b *Store, ref task.Ref, what string) {
	t.Helper()
	const perStore = 3
	start := make(chan struct{})
	var (
		wg         sync.WaitGroup
		wins, lost atomic.Int32
	)
	for s, host := range map[*Store]string{a: "host-a", b: "host-b"} {
		for range perStore {
			wg.Go(func() {
				<-start
				_, err := s.Claim(t.Context(), ref, store.Owner{Host: host, PID: os.Getpid(), Instance: host, Model: host, Lease: time.Hour})
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, store.ErrClaimed):
					lost.Add(1)
				default:
					t.Errorf("%s: Claim on %s: %v", what, host, err)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 || lost.Load() != 2*perStore-1 {
		t.Fatalf("%s: %d won, %d refused; want 1 and %d", what, wins.Load(), lost.Load(), 2*perStore-1)
	}
	ra, errA := a.Get(t.Context(), ref)
	rb, errB := b.Get(t.Context(), ref)
	if errA != nil || errB != nil || !cmp.Equal(ra, rb) || ra.Status != task.Running || ra.Model != ra.Host {
		t.Fatalf("%s: the stores read %+v (%v) and %+v (%v); want one running record of the winner", what, ra, errA, rb, errB)
	}
}

func TestReopen(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	s := mustOpen(t, url, Options{})
	ref := storetest.Ref(1)
	rec, err := s.Claim(t.Context(), ref, storetest.LiveOwner(t, "m"))
	if err != nil {
		t.Fatal(err)
	}
	cp := store.Checkpoint{Step: 3, Data: []byte("state"), CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	if err := s.SaveCheckpoint(t.Context(), ref, cp); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	counter := &migratedLog{}
	s = mustOpen(t, url, Options{Logger: slog.New(counter)})
	if n := counter.n.Load(); n != 0 {
		t.Errorf("reopening an up-to-date database migrated it %d times", n)
	}
	if got, err := s.Get(t.Context(), ref); err != nil || !cmp.Equal(rec, got) {
		t.Errorf("record after reopen = %+v, %v; want %+v", got, err, rec)
	}
	if got, ok, err := s.LoadCheckpoint(t.Context(), ref); err != nil || !ok || !cmp.Equal(cp, got) {
		t.Errorf("checkpoint after reopen = %+v, %v, %v; want %+v", got, ok, err, cp)
	}
	if diff := cmp.Diff(allVersions(), schemaVersions(t, s)); diff != "" {
		t.Errorf("schema_version after reopen (-want +got):\n%s", diff)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	s := mustOpen(t, url, Options{})
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO schema_version (version) VALUES (99)`); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(t.Context(), url, Options{}); err == nil {
		s2.Close()
		t.Fatal("Open of a database from a newer program succeeded")
	}
}

// TestTakeoverRules drives liveness through the injected probe.
func TestTakeoverRules(t *testing.T) {
	t.Parallel()
	storetest.TakeoverRules(t, mustOpen(t, pgtest.Schema(t), Options{Hostname: storetest.ProbeHost, Alive: storetest.ProbeAlive}))
}

func TestTimesFromClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	s := mustOpen(t, pgtest.Schema(t), Options{Now: func() time.Time { return now }})
	rec, err := s.Claim(t.Context(), storetest.Ref(1), store.Owner{Host: "h", PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.CreatedAt.Equal(now) || rec.CreatedAt.Location() != time.UTC || rec.UpdatedAt.Nanosecond() != 123456789 {
		t.Errorf("times %v / %v, want %v in UTC with nanoseconds", rec.CreatedAt, rec.UpdatedAt, now.UTC())
	}
}

// A URL that cannot be parsed is refused without repeating it: its password
// would reach the log.
func TestBadURLKeepsPassword(t *testing.T) {
	_, err := Open(t.Context(), "postgres://agent:hunter2-secret@[::1/db", Options{})
	if err == nil {
		t.Fatal("Open of a malformed URL succeeded")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error repeats the password: %v", err)
	}
}

// A summary holding a NUL character round-trips: the JSON type keeps the
// \u0000 escape that JSONB refuses.
func TestSummaryWithNUL(t *testing.T) {
	t.Parallel()
	s := mustOpen(t, pgtest.Schema(t), Options{})
	ref := storetest.Ref(1)
	if _, err := s.Claim(t.Context(), ref, storetest.LiveOwner(t, "m")); err != nil {
		t.Fatal(err)
	}
	want := store.Conversation{Round: 1, Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Summaries: []string{"a\x00b"}}
	if err := s.SaveConversation(t.Context(), ref, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.LoadConversation(t.Context(), ref)
	if err != nil || !ok || !cmp.Equal(want, got) {
		t.Errorf("LoadConversation = %+v, %v, %v; want %s", got, ok, err, fmt.Sprint(want))
	}
}

// A database that lost its tables is a failure of the store, never an
// answer: no call reads it as an unknown task, and MarkFailures marks
// every error.
func TestBrokenDatabaseIsAFailure(t *testing.T) {
	t.Parallel()
	s := mustOpen(t, pgtest.Schema(t), Options{})
	ref := storetest.Ref(1)
	if _, err := s.Claim(t.Context(), ref, storetest.LiveOwner(t, "m")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(t.Context(), `DROP TABLE tasks CASCADE`); err != nil {
		t.Fatal(err)
	}
	m := store.MarkFailures(s)
	ctx := t.Context()
	checks := map[string]error{}
	_, checks["Claim"] = m.Claim(ctx, ref, storetest.LiveOwner(t, "m"))
	_, checks["Get"] = m.Get(ctx, ref)
	_, checks["List"] = m.List(ctx)
	checks["SetStatus"] = m.SetStatus(ctx, ref, task.Done, "")
	checks["AddCounters"] = m.AddCounters(ctx, ref, store.Counters{LLMCalls: 1})
	checks["SaveCheckpoint"] = m.SaveCheckpoint(ctx, ref, store.Checkpoint{Step: 1})
	_, _, checks["LoadCheckpoint"] = m.LoadCheckpoint(ctx, ref)
	checks["ClearCheckpoint"] = m.ClearCheckpoint(ctx, ref)
	checks["SaveConversation"] = m.SaveConversation(ctx, ref, store.Conversation{})
	_, _, checks["LoadConversation"] = m.LoadConversation(ctx, ref)
	for name, err := range checks {
		if !store.IsFailure(err) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrClaimed) {
			t.Errorf("%s on a database without its tables: err = %v, want a store failure", name, err)
		}
	}
}
