package worker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

const testLease = time.Minute

// holderHosts are the comments' hosts of the holder comments on wd's task.
func (wd *world) holderHosts() []string {
	var out []string
	for _, c := range wd.comments() {
		if h, ok := report.HolderOf(c); ok {
			out = append(out, h.Host)
		}
	}
	return out
}

// A task whose holder vanished (no heartbeat) is put up again by a host
// watching it once ForgeLease passes, not before, and taken by that host;
// the vanished host, back, finds it lost and does not run it.
func TestVanishedHolderIsPutUpAfterTheLease(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = testLease
	b, _ := wd.host(t, "b")
	b.o.ForgeLease = testLease
	wd.claim() // host "test" takes it, then vanishes
	if h := wd.holderHosts(); !slices.Equal(h, []string{"test"}) {
		t.Fatalf("holder comments %q, want one naming test", h)
	}
	for _, step := range []time.Duration{0, 30 * time.Second, 29 * time.Second} {
		wd.now = wd.now.Add(step)
		if n, err := b.Produce(t.Context()); err != nil || n != 0 {
			t.Fatalf("after %s without a beat: %d claimed, %v; want the task left alone", step, n, err)
		}
	}
	wd.now = wd.now.Add(time.Second) // a whole lease since b first saw the holder unchanged
	if n, err := b.Produce(t.Context()); err != nil || n != 1 {
		t.Fatalf("after the lease: %d claimed, %v; want b to take the task", n, err)
	}
	if h := wd.holderHosts(); !slices.Equal(h, []string{"b"}) {
		t.Errorf("holder comments %q, want only b's (the stale one deleted)", h)
	}
	if l := wd.labels(); !slices.Equal(l, []string{"agent processing", "bug"}) {
		t.Errorf("labels %q", l)
	}
	// The vanished host is back: its beat finds its comment gone.
	if err := wd.w.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	rec, err := wd.st.Get(t.Context(), wd.ref)
	if err != nil || rec.Status != task.Stopped {
		t.Errorf("the vanished host's row: %+v, %v; want stopped, let go", rec, err)
	}
	if err := wd.w.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	if wd.run.runs != 0 {
		t.Errorf("the vanished host ran the task %d times", wd.run.runs)
	}
}

// A holder that beats keeps its task, however long it works.
func TestLiveHolderKeepsItsTask(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = testLease
	b, _ := wd.host(t, "b")
	b.o.ForgeLease = testLease
	wd.claim()
	for range 30 { // ten minutes
		wd.now = wd.now.Add(wd.w.BeatInterval())
		if err := wd.w.Beat(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n, err := b.Produce(t.Context()); err != nil || n != 0 {
			t.Fatalf("%d claimed, %v; want the live holder's task left alone", n, err)
		}
	}
	if h := wd.holderHosts(); !slices.Equal(h, []string{"test"}) {
		t.Errorf("holder comments %q, want test's", h)
	}
	wd.want(task.Queued, "agent processing", "bug")
}

// A host restarting with a task in its store that another host took up
// meanwhile lets it go instead of resuming it.
func TestRestartedHostDoesNotResumeATaskTakenOver(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = testLease
	b, bst := wd.host(t, "b")
	b.o.ForgeLease = testLease
	wd.claim()
	for range 2 {
		if _, err := b.Produce(t.Context()); err != nil {
			t.Fatal(err)
		}
		wd.now = wd.now.Add(testLease)
	}
	if rec, err := bst.Get(t.Context(), wd.ref); err != nil || rec.Status != task.Queued {
		t.Fatalf("b's row: %+v, %v; want b to have taken the task", rec, err)
	}
	// "test" restarts: its backlog resumes the task it still has queued.
	if n, err := wd.w.Backlog(t.Context()); err != nil || n != 1 {
		t.Fatalf("backlog: %d, %v", n, err)
	}
	if err := wd.w.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	if wd.run.runs != 0 {
		t.Errorf("the restarted host ran the task")
	}
	if rec, _ := wd.st.Get(t.Context(), wd.ref); rec.Status != task.Stopped {
		t.Errorf("the restarted host's row: %+v; want let go", rec)
	}
	// b runs it.
	if err := b.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	if b.o.Agent.(*fakeRunner).runs != 1 {
		t.Errorf("b did not run the task")
	}
}

// hookRunner runs hook in the middle of the run and ends as its context
// says.
type hookRunner struct{ hook func() }

func (r hookRunner) Run(ctx context.Context, _ engine.Input) (engine.Outcome, error) {
	r.hook()
	if err := ctx.Err(); err != nil {
		return engine.Outcome{}, err
	}
	return engine.Outcome{End: engine.Done, Comment: "done"}, nil
}

// A run in hand whose hold is lost (a watcher put the task up while this
// host could not beat) stops at the next beat, lets the task go, and posts
// nothing more.
func TestRunWhoseHoldIsLostStops(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = testLease
	b, _ := wd.host(t, "b")
	b.o.ForgeLease = testLease
	wd.claim()
	before := len(wd.comments())
	wd.w.o.Agent = hookRunner{hook: func() {
		for range 2 { // this host stalls for a lease: b puts the task up and takes it
			if _, err := b.Produce(t.Context()); err != nil {
				t.Error(err)
			}
			wd.now = wd.now.Add(testLease)
		}
		if err := wd.w.Beat(t.Context()); err != nil {
			t.Error(err)
		}
	}}
	if err := wd.w.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	rec, err := wd.st.Get(t.Context(), wd.ref)
	if err != nil || rec.Status != task.Stopped {
		t.Errorf("row %+v, %v; want stopped", rec, err)
	}
	// b's holder comment replaced this host's; nothing else was posted.
	if c := wd.comments(); len(c) != before {
		t.Errorf("comments %q, want only b's holder comment in place of this host's", c)
	}
	if h := wd.holderHosts(); !slices.Equal(h, []string{"b"}) {
		t.Errorf("holder comments %q", h)
	}
	if l := wd.labels(); !slices.Equal(l, []string{"agent processing", "bug"}) {
		t.Errorf("labels %q: b's round must keep processing", l)
	}
}

// A host that took a task and died before posting its holder comment left
// it in processing with no holder: watchers put it up once the task has
// not changed for the lease.
func TestTaskLeftWithoutHolderIsPutUp(t *testing.T) {
	wd := newWorld(t, false)
	wd.claim() // the forge lease off on this host: no holder comment, as if it died before posting
	b, _ := wd.host(t, "b")
	b.o.ForgeLease = testLease
	wd.now = wd.now.Add(testLease - time.Second)
	if n, err := b.Produce(t.Context()); err != nil || n != 0 {
		t.Fatalf("before the lease: %d claimed, %v", n, err)
	}
	wd.now = wd.now.Add(time.Second)
	if n, err := b.Produce(t.Context()); err != nil || n != 1 {
		t.Fatalf("after the lease: %d claimed, %v; want b to take the task", n, err)
	}
	if h := wd.holderHosts(); !slices.Equal(h, []string{"b"}) {
		t.Errorf("holder comments %q, want b's", h)
	}
	if l := wd.labels(); !slices.Equal(l, []string{"agent processing", "bug"}) {
		t.Errorf("labels %q", l)
	}
}

// sibling is a second process of wd's host sharing its store (serve and a
// run, or two runs, on one machine).
func (wd *world) sibling(t *testing.T) *Worker {
	t.Helper()
	wd.w.o.Owner.Instance = "first"
	o := wd.w.o
	o.Owner = store.Owner{Host: o.Owner.Host, PID: o.Owner.PID + 1, Instance: "second"}
	o.Agent = &fakeRunner{st: wd.st, out: engine.Outcome{End: engine.Done, Comment: "done"}}
	return New(o)
}

// Two processes of one host share its store: each beats only the tasks it
// claimed. A task the first took, whose holder comment the forge has not
// taken yet, is left alone by the second's heartbeats and passes (it once
// let it go, which stopped it: the run found a stopped row and the task
// stayed in processing), and the first runs it, once.
func TestAnotherProcessOfTheHostLeavesItsSiblingsTask(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = testLease
	wd.run.out = engine.Outcome{End: engine.Done, Comment: "done"}
	second := wd.sibling(t)
	wd.gh.Inject(forgetest.Fault{Method: "POST", Path: "/comments", Status: 500, Times: 4}) // one comment's tries
	wd.claim()
	if h := wd.holderHosts(); len(h) != 0 {
		t.Fatalf("holder comments %q, want none posted yet", h)
	}
	for range beatsPerLease - 1 {
		wd.now = wd.now.Add(second.BeatInterval())
		if err := second.Beat(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n, err := second.Produce(t.Context()); err != nil || n != 0 {
			t.Fatalf("the second process's pass: %d claimed, %v; want none", n, err)
		}
		if rec := wd.record(); rec.Status != task.Queued || rec.Instance != "first" {
			t.Fatalf("row %+v after the second process's beat, want queued by the first", rec)
		}
	}
	if err := wd.w.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	if wd.run.runs != 1 || second.o.Agent.(*fakeRunner).runs != 0 {
		t.Errorf("runs: first %d, second %d; want 1, 0", wd.run.runs, second.o.Agent.(*fakeRunner).runs)
	}
	wd.want(task.Done, "bug", testLabels.Done)
}

// A task's row says queued, which lets any process sharing the store
// claim it (Backlog), only once its holder comment is on the forge: the
// claimant asks the forge whether its host holds the task.
func TestRowIsQueuedAfterTheHolderComment(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = testLease
	var at [][]string
	wd.w.o.Store = statusSpy{Store: wd.st, set: func(s task.Status) {
		if s == task.Queued {
			at = append(at, wd.holderHosts())
		}
	}}
	wd.claim()
	if len(at) != 1 || !slices.Equal(at[0], []string{"test"}) {
		t.Fatalf("holder comments when the row said queued: %q, want one naming test", at)
	}
	second := wd.sibling(t)
	if n, err := second.Backlog(t.Context()); err != nil || n != 1 {
		t.Fatalf("the second process's backlog: %d, %v", n, err)
	}
	if err := second.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	if runs := second.o.Agent.(*fakeRunner).runs; runs != 1 {
		t.Errorf("the second process ran the task %d times, want 1", runs)
	}
	wd.want(task.Done, "bug", testLabels.Done)
}

// statusSpy tells set of every status written.
type statusSpy struct {
	store.Store
	set func(task.Status)
}

func (s statusSpy) SetStatus(ctx context.Context, ref task.Ref, st task.Status, msg string) error {
	s.set(st)
	return s.Store.SetStatus(ctx, ref, st, msg)
}
