package worker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/report"
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
