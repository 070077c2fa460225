package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/queue/memqueue"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
)

// errFull is what SQLite says when its disk is full.
var errFull = errors.New("database or disk is full (13)")

// breakable is the SQLite store refusing the writes named in refuse, as a
// full disk or a file made read-only does. The end-to-end test in app makes
// a real file unwritable; this one says which write fails.
type breakable struct {
	*sqlite.Store
	mu     sync.Mutex
	refuse map[string]bool
}

func (b *breakable) set(ops ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refuse = map[string]bool{}
	for _, op := range ops {
		b.refuse[op] = true
	}
}

func (b *breakable) check(op string, ref task.Ref) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refuse[op] {
		return fmt.Errorf("%s of %s: %w", op, ref, errFull)
	}
	return nil
}

func (b *breakable) Claim(ctx context.Context, ref task.Ref, o store.Owner) (store.Record, error) {
	if err := b.check("Claim", ref); err != nil {
		return store.Record{}, err
	}
	return b.Store.Claim(ctx, ref, o)
}

func (b *breakable) ClaimQueued(ctx context.Context, ref task.Ref, o store.Owner) (store.Record, error) {
	if err := b.check("Claim", ref); err != nil {
		return store.Record{}, err
	}
	return b.Store.ClaimQueued(ctx, ref, o)
}

func (b *breakable) SetStatus(ctx context.Context, ref task.Ref, s task.Status, msg string) error {
	if err := b.check("SetStatus", ref); err != nil {
		return err
	}
	return b.Store.SetStatus(ctx, ref, s, msg)
}

func (b *breakable) SaveCheckpoint(ctx context.Context, ref task.Ref, cp store.Checkpoint) error {
	if err := b.check("SaveCheckpoint", ref); err != nil {
		return err
	}
	return b.Store.SaveCheckpoint(ctx, ref, cp)
}

// breakableWorld is a world whose worker and runner use a breakable store,
// its failures marked as the app marks them.
func breakableWorld(t *testing.T) (*world, *breakable) {
	wd := newWorld(t, false)
	b := &breakable{Store: wd.st}
	marked := store.MarkFailures(b)
	o := wd.w.o
	o.Store = marked
	wd.w = New(o)
	wd.run.st = marked
	return wd, b
}

// The store failing while a task is in hand stops it where it is: the
// worker says so on the task, leaves its labels and its last record and
// checkpoint, and returns the failure; once the store can be written, the
// next pass finishes the task.
func TestStoreFailureStopsTheTask(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse string // the write that fails
		runs   int    // runs before the store is mended
	}{
		{"checkpoint during the run", "SaveCheckpoint", 1},
		{"claim for work", "Claim", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd, b := breakableWorld(t)
			wd.claim()
			wd.run.out = engine.Outcome{End: engine.Done, Comment: "ok"}
			b.set(tc.refuse)
			err := wd.w.Process(t.Context(), wd.ref)
			if !store.IsFailure(err) || !errors.Is(err, errFull) {
				t.Fatalf("Process returned %v, want the store's failure", err)
			}
			wd.want(task.Queued, "bug", testLabels.Processing)
			c := wd.comments()
			if len(c) != 1 || !strings.Contains(c[0], "cannot record its work") || !strings.Contains(c[0], errFull.Error()) {
				t.Errorf("comments %q, want one saying the store cannot be written and why", c)
			}
			if wd.run.runs != tc.runs {
				t.Errorf("%d runs, want %d", wd.run.runs, tc.runs)
			}

			b.set()
			if n, err := wd.w.Backlog(t.Context()); err != nil || n != 1 {
				t.Fatalf("backlog: %d, %v", n, err)
			}
			if err := wd.w.Process(t.Context(), wd.ref); err != nil {
				t.Fatalf("Process after the store was mended: %v", err)
			}
			wd.want(task.Done, "bug", testLabels.Done)
		})
	}
}

// A final status that cannot be recorded is returned too: the labels say
// done, the store cannot, and the run must not pass for a clean one.
func TestStoreFailureAtTheEndIsReturned(t *testing.T) {
	wd, b := breakableWorld(t)
	wd.claim()
	wd.run.out = engine.Outcome{End: engine.Done, Comment: "ok"}
	b.set("SetStatus")
	if err := wd.w.Process(t.Context(), wd.ref); !store.IsFailure(err) {
		t.Fatalf("Process returned %v, want the store's failure", err)
	}
	if l := wd.labels(); !slices.Equal(l, []string{testLabels.Done, "bug"}) {
		t.Errorf("labels %q", l)
	}
}

// The producer stops at a claim the store refuses: nothing is claimed on
// the forge, and Produce returns the failure.
func TestStoreFailureStopsTheProducer(t *testing.T) {
	wd, b := breakableWorld(t)
	b.set("Claim")
	n, err := wd.w.Produce(t.Context())
	if !store.IsFailure(err) || n != 0 {
		t.Fatalf("produce: %d, %v; want the store's failure", n, err)
	}
	if l := wd.labels(); !slices.Equal(l, []string{testLabels.Bot, "bug"}) {
		t.Errorf("labels %q, want the task untouched", l)
	}
	if c := wd.comments(); len(c) != 0 {
		t.Errorf("comments %q", c)
	}
}

// The consumer stops at the first failure of the store: the next job is
// not started (it stays queued in the store), and Consume returns the
// failure.
func TestStoreFailureStopsTheConsumer(t *testing.T) {
	wd, b := breakableWorld(t)
	second := wd.gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "Another", Body: "Please.", Author: "alice",
		Labels: []string{"bug", testLabels.Bot}})
	q := memqueue.New(memqueue.Options{})
	o := wd.w.o
	o.Queue = q
	wd.w = New(o)
	if n, err := wd.w.Produce(t.Context()); err != nil || n != 2 {
		t.Fatalf("produce: %d, %v", n, err)
	}
	q.Close()
	b.set("SaveCheckpoint")
	if err := wd.w.Consume(t.Context()); !store.IsFailure(err) {
		t.Fatalf("Consume returned %v, want the store's failure", err)
	}
	if wd.run.runs != 1 {
		t.Errorf("%d runs, want 1", wd.run.runs)
	}
	ref := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: second}
	if rec, err := wd.st.Get(t.Context(), ref); err != nil || rec.Status != task.Queued {
		t.Errorf("the second task: %+v, %v; want it queued", rec, err)
	}
}
