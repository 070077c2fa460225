package worker

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Tasks left in processing by a holder that is gone, and tasks whose holder
// is alive: the first are put up again after the lease by any host, the
// second never are.

// takenThenKilled makes wd's worker take the task on the forge (processing
// added, the bot label taken) and die before the store's claim: no store
// holds the task, no holder comment names anyone.
func (wd *world) takenThenKilled() {
	wd.t.Helper()
	t, err := wd.w.o.Forge.Get(wd.t.Context(), wd.ref)
	if err != nil {
		wd.t.Fatal(err)
	}
	if all, err := wd.w.relabel(wd.t.Context(), ending{ref: wd.ref, log: wd.w.log(wd.ref), labels: t.Labels}, lifecycle[claimed]); err != nil || !all {
		wd.t.Fatalf("the take: %v, %v", all, err)
	}
	if l := wd.labels(); !slices.Equal(l, []string{testLabels.Processing, "bug"}) {
		wd.t.Fatalf("labels after the take %q", l)
	}
	if _, err := wd.st.Get(wd.t.Context(), wd.ref); !errors.Is(err, store.ErrNotFound) {
		wd.t.Fatalf("the store knows the task: %v", err)
	}
}

// With a store every host shares (and so no forge lease), a task taken on
// the forge by a process killed before its store claim is in processing
// with no row in the store: any host puts it up again once it has not
// changed for the store's lease, and takes it in the same pass.
func TestTaskLeftBetweenTakeAndClaimIsPutUpWithASharedStore(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.SharedStore = true
	wd.takenThenKilled()
	b, _ := wd.other("b")
	b.o.SharedStore, b.o.Owner.Lease = true, testLease
	wd.now = wd.now.Add(testLease - time.Second)
	if n, err := b.Produce(t.Context()); err != nil || n != 0 {
		t.Fatalf("within the lease: %d claimed, %v; want the task left alone", n, err)
	}
	wd.now = wd.now.Add(time.Second)
	if n, err := b.Produce(t.Context()); err != nil || n != 1 {
		t.Fatalf("after the lease: %d claimed, %v; want b to take the task", n, err)
	}
	if rec := wd.record(); rec.Status != task.Queued || rec.Host != "host-b" {
		t.Errorf("row %+v, want queued by host-b", rec)
	}
	if l := wd.labels(); !slices.Equal(l, []string{"agent processing", "bug"}) {
		t.Errorf("labels %q", l)
	}
	if c := wd.comments(); len(c) != 0 {
		t.Errorf("comments %q, want none: no holder comment with a shared store", c)
	}
}

// With a shared store, a task the store holds (queued, then running under
// a holder whose lease runs) is never put up, however long the forge shows
// no change: the store's lease and Backlog's takeovers decide.
func TestTaskHeldInASharedStoreIsNeverPutUp(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.SharedStore = true
	wd.claim()
	b, _ := wd.other("b")
	b.o.SharedStore, b.o.Owner.Lease = true, testLease
	for i := range 10 {
		if i == 5 { // the run begins, under a lease that runs
			a := store.Owner{Host: "test", PID: 1, Instance: "a", Lease: time.Hour}
			if _, err := wd.st.ClaimQueued(t.Context(), wd.ref, a); err != nil {
				t.Fatal(err)
			}
		}
		wd.now = wd.now.Add(testLease)
		if n, err := b.Produce(t.Context()); err != nil || n != 0 {
			t.Fatalf("after %d leases: %d claimed, %v; want the held task left alone", i+1, n, err)
		}
	}
	if l := wd.labels(); !slices.Equal(l, []string{"agent processing", "bug"}) {
		t.Errorf("labels %q", l)
	}
	if rec := wd.record(); rec.Host != "test" {
		t.Errorf("row %+v", rec)
	}
}

// With stores of their own and the forge lease on (the default), the host
// killed between the take and the claim is itself the watcher once it is
// back: its store knows nothing of the task and no holder comment names
// it, so once the lease has passed it puts the task up and takes it.
func TestTaskLeftBetweenTakeAndClaimIsPutUpByItsHostBack(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = testLease
	wd.run.out = engine.Outcome{End: engine.Done, Summary: "did it", Comment: "Done."}
	wd.takenThenKilled()
	wd.now = wd.now.Add(testLease - time.Second)
	if n, err := wd.w.Produce(t.Context()); err != nil || n != 0 {
		t.Fatalf("within the lease: %d claimed, %v", n, err)
	}
	wd.now = wd.now.Add(time.Second)
	if n, err := wd.w.Produce(t.Context()); err != nil || n != 1 {
		t.Fatalf("after the lease: %d claimed, %v; want the task taken again", n, err)
	}
	if err := wd.w.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	if wd.run.runs != 1 {
		t.Errorf("%d runs, want 1", wd.run.runs)
	}
	wd.want(task.Done, "bug", testLabels.Done)
	if h := wd.holderHosts(); len(h) != 0 {
		t.Errorf("holder comments %q left on a done task", h)
	}
}

// A live holder whose run outlasts many leases (the default one) keeps its
// task: it beats while it runs, and a watching host never puts it up. Its
// holder comment is gone once the task is done.
func TestLiveSlowHolderIsNeverTakenOver(t *testing.T) {
	const lease = 5 * time.Minute // config.DefaultForgeLeaseSeconds
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = lease
	b, bst := wd.host(t, "b")
	b.o.ForgeLease = lease
	wd.claim()
	runs := 0
	wd.w.o.Agent = hookRunner{hook: func() {
		runs++
		for range 30 { // ten leases of work
			wd.now = wd.now.Add(wd.w.BeatInterval())
			if err := wd.w.Beat(t.Context()); err != nil {
				t.Error(err)
			}
			if n, err := b.Produce(t.Context()); err != nil || n != 0 {
				t.Errorf("%d claimed, %v; want the live holder's task left alone", n, err)
			}
		}
	}}
	if err := wd.w.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	if runs != 1 {
		t.Errorf("%d runs, want 1", runs)
	}
	wd.want(task.Done, "bug", testLabels.Done)
	if _, err := bst.Get(t.Context(), wd.ref); err == nil {
		t.Error("the watching host has a row for the task")
	}
	if h := wd.holderHosts(); len(h) != 0 {
		t.Errorf("holder comments %q left on a done task", h)
	}
}

// A task whose holder is gone but that carries the paused label (a pause
// asked for while it ran) is not a task left in processing: no watcher puts
// it up, which would resume it against the pause.
func TestPausedTaskOfAGoneHolderIsNotPutUp(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = testLease
	b, _ := wd.host(t, "b")
	b.o.ForgeLease = testLease
	wd.claim()
	wd.gh.AddLabelDirect(wd.ref.Repo, wd.ref.Number, testLabels.Paused)
	wd.now = wd.now.Add(10 * testLease)
	if n, err := b.Produce(t.Context()); err != nil || n != 0 {
		t.Fatalf("%d claimed, %v; want the paused task left alone", n, err)
	}
	if l := wd.labels(); !slices.Equal(l, []string{"agent paused", "agent processing", "bug"}) {
		t.Errorf("labels %q", l)
	}
}

// Hosts of different names sharing one store (a state directory, or a
// host renamed): a takeover in the store moves the hold on the forge too,
// so that the new holder runs the task instead of finding it another
// host's and letting it go.
func TestTakeoverInASharedStoreMovesTheHold(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = testLease
	wd.claim()
	if _, err := wd.st.ClaimQueued(t.Context(), wd.ref, wd.w.o.Owner); err != nil { // its run begins; it dies
		t.Fatal(err)
	}
	b, _ := wd.other("b")
	b.o.ForgeLease = testLease
	b.o.Agent = &fakeRunner{st: wd.st, out: engine.Outcome{End: engine.Done, Summary: "did it", Comment: "Done."}}
	if n, err := b.Backlog(t.Context()); err != nil || n != 1 {
		t.Fatalf("backlog: %d, %v; want the task taken over", n, err)
	}
	if h := wd.holderHosts(); !slices.Equal(h, []string{"host-b"}) {
		t.Errorf("holder comments %q, want host-b's only", h)
	}
	if err := b.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	if r := b.o.Agent.(*fakeRunner); r.runs != 1 {
		t.Errorf("host-b ran the task %d times, want 1", r.runs)
	}
	wd.want(task.Done, "bug", testLabels.Done)
	for _, c := range wd.comments() {
		if _, ok := report.HolderOf(c); ok {
			t.Errorf("a holder comment is left on the done task: %q", c)
		}
	}
}

// In a store shared by hosts of different names, the host whose consumer
// wins the store's claim of a task another host took on the forge moves
// that host's hold to itself and runs it; it does not find the other's
// hold and stop the task for good (two serve processes on one state_dir).
func TestClaimInASharedStoreMovesTheHold(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = testLease
	wd.claim() // host-a takes it on the forge and queues it
	if h := wd.holderHosts(); !slices.Equal(h, []string{wd.w.o.Owner.Host}) {
		t.Fatalf("holder comments %q after the take, want host-a's", h)
	}
	b, _ := wd.other("b")
	b.o.ForgeLease = testLease
	b.o.Agent = &fakeRunner{st: wd.st, out: engine.Outcome{End: engine.Done, Summary: "did it", Comment: "Done."}}
	if err := b.Process(t.Context(), wd.ref); err != nil { // host-b's consumer got the job
		t.Fatal(err)
	}
	if r := b.o.Agent.(*fakeRunner); r.runs != 1 {
		t.Errorf("host-b ran the task %d times, want 1", r.runs)
	}
	wd.want(task.Done, "bug", testLabels.Done)
}

// An operator's resume of a task left between the take and the claim puts
// it up again once no holder can still be on its way (a lease after its
// last change), saying when before that; release does it at once; and
// either says what the task is when it is not left in processing.
func TestPutBackOfATaskLeftBetweenTakeAndClaim(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = testLease
	wd.takenThenKilled()
	said, put, err := wd.w.PutBack(t.Context(), wd.ref, false)
	if err != nil || put || !strings.Contains(said, "no holder shows") || !strings.Contains(said, "09:01:00 UTC") {
		t.Fatalf("resume within the lease: %q, %v, %v; want nothing done, saying from when it is put up", said, put, err)
	}
	wd.now = wd.now.Add(testLease)
	said, put, err = wd.w.PutBack(t.Context(), wd.ref, false)
	if err != nil || !put || !strings.Contains(said, "put up again") {
		t.Fatalf("resume after the lease: %q, %v, %v; want it put up", said, put, err)
	}
	if l := wd.labels(); !slices.Equal(l, []string{"agent", "bug"}) {
		t.Errorf("labels %q, want the bot label back and processing gone", l)
	}
	said, put, err = wd.w.PutBack(t.Context(), wd.ref, true)
	if err != nil || put || !strings.Contains(said, "not in processing") {
		t.Errorf("release of a task put up: %q, %v, %v", said, put, err)
	}
	wd.claim()
	said, put, err = wd.w.PutBack(t.Context(), wd.ref, true)
	if err != nil || put || !strings.Contains(said, "a process of this store holds it") {
		t.Errorf("release of a task this store holds: %q, %v, %v", said, put, err)
	}
}

// A task another host holds on the forge (stores of their own): resume
// leaves it to its live holder; release revokes the hold and puts it up,
// and the holder's next heartbeat stops it.
func TestReleaseRevokesAnotherHostsHold(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = testLease
	b, _ := wd.host(t, "b")
	b.o.ForgeLease = testLease
	wd.claim()
	said, put, err := b.PutBack(t.Context(), wd.ref, false)
	if err != nil || put || !strings.Contains(said, "host test holds it") {
		t.Fatalf("resume from b: %q, %v, %v; want the live holder left alone", said, put, err)
	}
	said, put, err = b.PutBack(t.Context(), wd.ref, true)
	if err != nil || !put || !strings.Contains(said, "host test's hold on the forge") {
		t.Fatalf("release from b: %q, %v, %v; want the hold revoked", said, put, err)
	}
	if h := wd.holderHosts(); len(h) != 0 {
		t.Errorf("holder comments %q after the release", h)
	}
	if err := wd.w.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	if rec := wd.record(); rec.Status != task.Stopped {
		t.Errorf("the released holder's row %+v, want let go", rec)
	}
	if n, err := b.Produce(t.Context()); err != nil || n != 1 {
		t.Errorf("b's pass after the release: %d, %v; want the task taken", n, err)
	}
}

// A holder comment that cannot be posted when the task is taken (the forge
// refuses comments for a while) does not cost the task: it is this
// process's for a lease, the run goes ahead, and the next heartbeat posts
// the comment. One that cannot be posted for a whole lease lets the task
// go, as a watcher may by then have put it up.
func TestHolderCommentIsPostedByALaterBeat(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refused int // POSTs of comments the forge refuses: 4 (postonce.MaxAttempts) per comment
		holder  []string
		status  task.Status
	}{
		{"posted by the next beat", 4, []string{"test"}, task.Done},
		{"never posted", -1, nil, task.Stopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd := newWorld(t, false)
			wd.w.o.ForgeLease = testLease
			wd.gh.Inject(forgetest.Fault{Method: "POST", Path: "/comments", Status: 500, Times: tc.refused})
			wd.claim()
			if h := wd.holderHosts(); len(h) != 0 {
				t.Fatalf("holder comments %q, want none posted yet", h)
			}
			if ok, why, err := wd.w.holds(t.Context(), wd.ref); err != nil || !ok {
				t.Fatalf("holds just after the claim: %v (%s), %v; want the task this process's", ok, why, err)
			}
			var during []string
			wd.w.o.Agent = hookRunner{hook: func() {
				for range beatsPerLease { // a lease of work
					wd.now = wd.now.Add(wd.w.BeatInterval())
					if err := wd.w.Beat(t.Context()); err != nil {
						t.Error(err)
					}
				}
				during = wd.holderHosts()
			}}
			if err := wd.w.Process(t.Context(), wd.ref); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(during, tc.holder) {
				t.Errorf("holder comments during the run %q, want %q", during, tc.holder)
			}
			if rec := wd.record(); rec.Status != tc.status {
				t.Errorf("row %+v, want %s", rec, tc.status)
			}
		})
	}
}

// The holder comment is the daemon's bookkeeping: the run is not shown it
// among the task's comments.
func TestHolderCommentIsNotShownToTheModel(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease = testLease
	wd.gh.AddComment(wd.ref.Repo, wd.ref.Number, "alice", "Please hurry.")
	wd.run.out = engine.Outcome{End: engine.Done, Summary: "did it", Comment: "Done."}
	wd.claim()
	if err := wd.w.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, c := range wd.run.in.Comments {
		bodies = append(bodies, c.Body)
	}
	if !slices.Equal(bodies, []string{"Please hurry."}) {
		t.Errorf("the run was shown %q, want alice's comment only", bodies)
	}
}

// With neither a forge lease nor a shared store a host cannot tell a task
// another host holds from a left one: resume leaves it, saying so, and
// release (the operator's word) puts it up.
func TestResumeCannotTellWithoutAForgeLease(t *testing.T) {
	wd := newWorld(t, false)
	wd.takenThenKilled()
	wd.now = wd.now.Add(time.Hour)
	said, put, err := wd.w.PutBack(t.Context(), wd.ref, false)
	if err != nil || put || !strings.Contains(said, "cannot tell") {
		t.Fatalf("resume: %q, %v, %v; want nothing done, saying it cannot tell", said, put, err)
	}
	if said, put, err := wd.w.PutBack(t.Context(), wd.ref, true); err != nil || !put {
		t.Fatalf("release: %q, %v, %v; want it put up", said, put, err)
	}
}
