package worker

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/queue/memqueue"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// heldRunner finishes every run done, noting the most tasks the store held
// as queued or running at the start of a run.
type heldRunner struct {
	st      store.Store
	mu      sync.Mutex
	runs    int
	maxHeld int
}

func (r *heldRunner) Run(ctx context.Context, in engine.Input) (engine.Outcome, error) {
	recs, err := r.st.List(ctx)
	if err != nil {
		return engine.Outcome{}, err
	}
	held := 0
	for _, rec := range recs {
		if rec.Status == task.Queued || rec.Status == task.Running {
			held++
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs++
	r.maxHeld = max(r.maxHeld, held)
	return engine.Outcome{End: engine.Done, Comment: "Done."}, nil
}

// fairWorld is a world with five labelled tasks and a worker of two
// workers on the in-process queue.
func fairWorld(t *testing.T, fair bool) (*world, *memqueue.Queue, *heldRunner) {
	wd := newWorld(t, false)
	for range 4 {
		wd.gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "Another", Body: "Please.", Author: "alice",
			Labels: []string{"bug", testLabels.Bot}})
	}
	q := memqueue.New(memqueue.Options{})
	r := &heldRunner{st: wd.st}
	o := wd.w.o
	o.Queue, o.Workers, o.FairClaim, o.Agent = q, 2, fair, r
	wd.w = New(o)
	return wd, q, r
}

// labelled counts the tasks still carrying label.
func (wd *world) labelled(label string) int {
	n := 0
	for i := 1; i <= 5; i++ {
		if slices.Contains(wd.gh.Labels("acme/app", i), label) {
			n++
		}
	}
	return n
}

// With FairClaim a pass claims only as many tasks as the process has free
// workers; the others keep the bot label, for the next pass or another
// host. Without it (a broker), a pass claims all.
func TestPassClaimsNoMoreThanFreeWorkers(t *testing.T) {
	wd, _, _ := fairWorld(t, true)
	p, err := wd.w.Pass(t.Context())
	if err != nil || p.Queued != 2 || p.Left != 3 {
		t.Fatalf("first pass: %+v, %v; want 2 queued, 3 left", p, err)
	}
	if n := wd.labelled(testLabels.Bot); n != 3 {
		t.Errorf("%d tasks still labelled %q, want 3", n, testLabels.Bot)
	}
	// Nothing consumed yet: both jobs still wait, so no worker is free.
	if p, err = wd.w.Pass(t.Context()); err != nil || p.Queued != 0 || p.Left != 3 {
		t.Fatalf("second pass with every worker taken: %+v, %v; want none queued, 3 left", p, err)
	}

	wd, _, _ = fairWorld(t, false)
	if p, err := wd.w.Pass(t.Context()); err != nil || p.Queued != 5 || p.Left != 0 {
		t.Fatalf("pass without FairClaim: %+v, %v; want all 5 queued", p, err)
	}
}

// Drain (what `run` does) claims pass after pass while the consumers
// work, until every labelled task is done, never holding more tasks than
// workers.
func TestDrainDoesEveryTaskAFewAtATime(t *testing.T) {
	wd, q, r := fairWorld(t, true)
	consumed := make(chan error, 1)
	go func() { consumed <- wd.w.Consume(t.Context()) }()
	n, err := wd.w.Drain(t.Context())
	q.Close()
	if cerr := <-consumed; err != nil || cerr != nil || n != 5 {
		t.Fatalf("drain: %d queued, %v; consume: %v; want 5 queued", n, err, cerr)
	}
	if r.runs != 5 || wd.labelled(testLabels.Done) != 5 {
		t.Errorf("%d runs, %d tasks done; want 5 and 5", r.runs, wd.labelled(testLabels.Done))
	}
	if r.maxHeld > 2 {
		t.Errorf("the store held %d tasks queued or running at once, more than the 2 workers", r.maxHeld)
	}
}

// serve runs the store's backlog before every pass: a job still waiting in
// the queue is queued again (a no-op for the queue) and must not count as
// a second job, or the process would think its workers taken for good.
func TestBacklogOfAWaitingJobDoesNotTakeAWorker(t *testing.T) {
	wd, q, _ := fairWorld(t, true)
	if p, err := wd.w.Pass(t.Context()); err != nil || p.Queued != 2 {
		t.Fatalf("first pass: %+v, %v; want 2 queued", p, err)
	}
	for range 3 {
		if _, err := wd.w.Backlog(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	q.Close()
	if err := wd.w.Consume(t.Context()); err != nil { // the two jobs, each once
		t.Fatal(err)
	}
	q2 := memqueue.New(memqueue.Options{})
	wd.w.o.Queue = q2
	if p, err := wd.w.Pass(t.Context()); err != nil || p.Queued != 2 || p.Left != 1 {
		t.Fatalf("pass once both jobs were done: %+v, %v; want 2 queued (both workers free), 1 left", p, err)
	}
}
