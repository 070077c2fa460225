package worker

import (
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/queue/memqueue"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// The dead-letter rule with leases: a run that kills its consumer leaves
// the task running under a dead holder, and whether the task comes back
// through a takeover (a new job) or through its job delivered again, each
// run begun counts once against max_deliveries. Past it the task is given
// up: failed, one comment saying after how many attempts, nothing queued
// or in processing.

// diesMidRun is a consumer of another host that takes the task's job,
// begins its run (the store's claim) and dies: the job is given back, as a
// broker does when its consumer goes away, or acked when lost with the
// process (the in-process queue), and the row stays running under it.
func (wd *world) diesMidRun(q *settled, instance string, redeliver bool) {
	wd.t.Helper()
	d, err := q.Queue.Take(wd.t.Context())
	if err != nil {
		wd.t.Fatal(err)
	}
	owner := store.Owner{Host: "host-x", PID: 1, Instance: instance} // no lease: it lapses at once
	if _, err := wd.st.ClaimQueued(wd.t.Context(), wd.ref, owner); err != nil {
		wd.t.Fatalf("the dying consumer's claim: %v", err)
	}
	if redeliver {
		err = d.Release()
	} else {
		err = d.Ack()
	}
	if err != nil {
		wd.t.Fatal(err)
	}
}

// count is how many of wd's comments contain s.
func (wd *world) count(s string) int {
	n := 0
	for _, c := range wd.comments() {
		if strings.Contains(c, s) {
			n++
		}
	}
	return n
}

// Taken over after each death, the task gets a new job each time, whose
// delivery count starts again at 1: the store's count of runs begun is what
// reaches the limit. The takeover that would begin the third run gives the
// task up instead of saying it took it over.
func TestTakeoverCountsAsADelivery(t *testing.T) {
	wd, q := queuedWorld(t, memqueue.Options{MaxDeliveries: 2})
	wd.w.o.MaxAttempts = 2
	wd.claim()
	for i, instance := range []string{"x1", "x2"} {
		wd.diesMidRun(q, instance, false)
		n, err := wd.w.Backlog(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if want := 1 - i; n != want {
			t.Fatalf("backlog after death %d queued %d, want %d", i+1, n, want)
		}
	}
	if n := q.Len(); n != 0 {
		t.Errorf("%d jobs queued after the task was given up", n)
	}
	wd.want(task.Failed, "bug", testLabels.Failed)
	if n := wd.count("took over this task"); n != 1 {
		t.Errorf("%d takeover comments, want 1 (the takeover that gives the task up says nothing of the kind)", n)
	}
	if n := wd.count("Given up after 2 attempts"); n != 1 {
		t.Errorf("comments %q, want one saying the task was given up after 2 attempts", wd.comments())
	}
	if rec := wd.record(); rec.Status != task.Failed || !strings.Contains(rec.Error, "Given up after 2 attempts") {
		t.Errorf("record %+v", rec)
	}
	if wd.run.runs != 0 {
		t.Errorf("the worker ran the task %d times", wd.run.runs)
	}
	// Asked again, the task starts a new round with its count at 0.
	wd.gh.AddLabelDirect(wd.ref.Repo, wd.ref.Number, testLabels.Bot)
	wd.claim()
	if rec := wd.record(); rec.Attempts != 0 {
		t.Errorf("a new round's attempts: %d", rec.Attempts)
	}
}

// The job delivered again after each death (no takeover in between: the
// in-process queue of the dead consumer's host gives it back) is claimed
// from the dead holder; the delivery that would begin the third run gives
// the task up without running it. The queue itself has no limit here: the
// store's count is the rule.
func TestRedeliveredJobCountsTowardsGivingUp(t *testing.T) {
	wd, q := queuedWorld(t, memqueue.Options{})
	wd.w.o.MaxAttempts = 2
	wd.claim()
	wd.diesMidRun(q, "x1", true)
	wd.diesMidRun(q, "x2", true)
	q.Close()
	if err := wd.w.Consume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if wd.run.runs != 0 {
		t.Errorf("the third delivery ran the task (%d runs)", wd.run.runs)
	}
	if got := strings.Join(q.how, ","); got != "ack" {
		t.Errorf("settled %q, want the job acked", got)
	}
	wd.want(task.Failed, "bug", testLabels.Failed)
	if c := wd.comments(); len(c) != 1 || !strings.Contains(c[0], "Given up after 2 attempts") {
		t.Errorf("comments %q, want one saying the task was given up after 2 attempts", c)
	}
}

// When the broker's count of one job passes max_deliveries first, the task
// fails through the dead letter, and the comment counts the attempts the
// same way: the store's runs begun.
func TestDeadLetterSaysTheAttempts(t *testing.T) {
	wd, q := queuedWorld(t, memqueue.Options{MaxDeliveries: 2})
	wd.w.o.MaxAttempts = 2
	wd.claim()
	wd.diesMidRun(q, "x1", true)
	wd.diesMidRun(q, "x2", true)
	q.Close()
	if err := wd.w.Consume(t.Context()); err != nil {
		t.Fatal(err)
	}
	wd.want(task.Failed, "bug", testLabels.Failed)
	if c := wd.comments(); len(c) != 1 || !strings.Contains(c[0], "Given up after 2 attempts") ||
		!strings.Contains(c[0], "delivered 3 times") {
		t.Errorf("comments %q, want one saying the task was given up after 2 attempts, its job delivered 3 times", c)
	}
}

// With stores of their own, a row whose round has begun its runs may be of
// a task another host has taken up since: giving it up would fail that
// host's task. The row is let go instead, and the task left to its holder.
func TestTaskAnotherHostHoldsIsNotGivenUp(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.ForgeLease, wd.w.o.MaxAttempts = testLease, 1
	b, _ := wd.host(t, "b")
	b.o.ForgeLease = testLease
	wd.claim()
	if _, err := wd.st.ClaimQueued(t.Context(), wd.ref, wd.w.o.Owner); err != nil { // its run begins; the host dies
		t.Fatal(err)
	}
	for range 2 {
		wd.now = wd.now.Add(testLease)
		if _, err := b.Produce(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if h := wd.holderHosts(); !slices.Equal(h, []string{"b"}) {
		t.Fatalf("holder comments %q, want b to have taken the task up", h)
	}
	if _, err := wd.w.Backlog(t.Context()); err != nil { // the host is back
		t.Fatal(err)
	}
	if err := wd.w.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	if rec := wd.record(); rec.Status != task.Stopped {
		t.Errorf("the returning host's row %+v, want let go", rec)
	}
	if l := wd.labels(); !slices.Equal(l, []string{"agent processing", "bug"}) {
		t.Errorf("labels %q, want b's task left as it is", l)
	}
	if n := wd.count("Given up"); n != 0 {
		t.Errorf("%d comments saying the task was given up", n)
	}
}
