package worker

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/queue/memqueue"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// storeLease is short, so that the heartbeat (a third of it) runs often.
const storeLease = 150 * time.Millisecond

// blockingRunner saves a checkpoint, says it started, then runs until its
// context ends (returning the context's error) or for d, then ends done.
type blockingRunner struct {
	st      store.Store
	d       time.Duration
	started chan struct{}
	err     chan error // the run's end, once
}

func newBlockingRunner(st store.Store, d time.Duration) *blockingRunner {
	return &blockingRunner{st: st, d: d, started: make(chan struct{}, 1), err: make(chan error, 1)}
}

func (r *blockingRunner) Run(ctx context.Context, in engine.Input) (engine.Outcome, error) {
	if err := r.st.SaveCheckpoint(ctx, in.Task.Ref, store.Checkpoint{Step: 1, Data: []byte(`{}`)}); err != nil {
		return engine.Outcome{}, err
	}
	r.started <- struct{}{}
	select {
	case <-ctx.Done():
		r.err <- ctx.Err()
		return engine.Outcome{Calls: 1}, ctx.Err()
	case <-time.After(r.d):
		r.err <- nil
		return engine.Outcome{End: engine.Done, Summary: "did it", Comment: "Done.", Calls: 1}, nil
	}
}

// leasedWorld is a queued world whose worker holds leases of storeLease and
// runs r.
func leasedWorld(t *testing.T, r Runner, st func(store.Store) store.Store) (*world, *settled) {
	wd, q := queuedWorld(t, memqueue.Options{})
	o := wd.w.o
	o.Owner = store.Owner{Host: "host-a", PID: 1, Instance: "a", Lease: storeLease}
	o.Agent = r
	if st != nil {
		o.Store = st(wd.st)
	}
	wd.w = New(o)
	return wd, q
}

// other is a worker on another host sharing wd's store and forge.
func (wd *world) other(instance string) (*Worker, *memqueue.Queue) {
	q := memqueue.New(memqueue.Options{})
	o := wd.w.o
	o.Owner = store.Owner{Host: "host-b", PID: 2, Instance: instance, Lease: time.Hour}
	o.Queue, o.Store = q, wd.st
	return New(o), q
}

// consume runs wd's consumer until its queue is drained and closed.
func consumeInBackground(t *testing.T, w *Worker) <-chan error {
	done := make(chan error, 1)
	go func() { done <- w.Consume(t.Context()) }()
	return done
}

// A run whose task keeps its lease runs to its end, however many leases
// long: the heartbeat renews it, and no other host can take it over.
func TestHeldLeaseIsRenewedForALongRun(t *testing.T) {
	// A lease long enough that a busy machine (CI's two cores under
	// -race) does not starve the heartbeat past it, and a run four of
	// them long.
	const lease = 2 * time.Second
	r := newBlockingRunner(nil, 4*lease)
	wd, q := leasedWorld(t, r, nil)
	wd.w.o.Owner.Lease = lease
	r.st = wd.st
	wd.claim()
	q.Close()
	done := consumeInBackground(t, wd.w)
	<-r.started
	b, _ := wd.other("b")
	for i := 0; i < 3; i++ {
		time.Sleep(lease)
		if n, err := b.Backlog(t.Context()); err != nil || n != 0 {
			t.Fatalf("another host's backlog took over %d tasks (%v) while the holder renews its lease", n, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-r.err; err != nil {
		t.Fatalf("the run was ended: %v", err)
	}
	wd.want(task.Done, "bug", testLabels.Done)
}

// An operator's release ends the holder's run at its next renewal, and the
// holder leaves the task as it is (no label, status or comment of its
// own); another host's next pass takes it over, saying so on the task.
func TestReleasedTaskEndsItsRunAndIsTakenOver(t *testing.T) {
	r := newBlockingRunner(nil, time.Hour)
	wd, q := leasedWorld(t, r, nil)
	r.st = wd.st
	wd.claim()
	q.Close()
	done := consumeInBackground(t, wd.w)
	<-r.started
	if _, err := wd.st.Release(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	if err := <-r.err; !errors.Is(err, context.Canceled) {
		t.Fatalf("run ended with %v, want it cut", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(q.how, ","); got != "ack" {
		t.Errorf("settled %q, want the job acked (the task is someone else's)", got)
	}
	wd.want(task.Running, "bug", testLabels.Processing)
	if c := wd.comments(); len(c) != 0 {
		t.Fatalf("the holder that lost its lease posted %q", c)
	}
	b, bq := wd.other("b")
	if n, err := b.Backlog(t.Context()); err != nil || n != 1 {
		t.Fatalf("the other host's backlog queued %d (%v), want the released task", n, err)
	}
	rec := wd.record()
	if rec.Status != task.Queued || rec.Host != "host-b" || rec.Instance != "b" {
		t.Errorf("after the takeover: %+v", rec)
	}
	c := wd.comments()
	if len(c) != 1 || !strings.Contains(c[0], "An operator released it") || !strings.Contains(c[0], "(host-a, pid 1)") ||
		!strings.Contains(c[0], "on host-b continues") {
		t.Errorf("comments %q, want one saying host-b took over what an operator released from host-a", c)
	}
	if bq.Len() != 1 {
		t.Errorf("the other host's queue holds %d jobs, want the task's", bq.Len())
	}
	if !wd.checkpoint() {
		t.Error("the checkpoint is gone: the new holder could not resume")
	}
}

// A holder whose lease lapsed (it stopped renewing: killed, frozen, cut
// off) is taken over by another host's next pass, not before.
func TestLapsedLeaseIsTakenOverByAnotherHost(t *testing.T) {
	wd := newWorld(t, false)
	a := store.Owner{Host: "host-a", PID: 1, Instance: "a", Lease: storeLease}
	if _, err := wd.st.Claim(t.Context(), wd.ref, a); err != nil {
		t.Fatal(err)
	}
	b, bq := wd.other("b")
	if n, err := b.Backlog(t.Context()); err != nil || n != 0 {
		t.Fatalf("backlog within the lease queued %d (%v), want none", n, err)
	}
	time.Sleep(storeLease + 20*time.Millisecond)
	if n, err := b.Backlog(t.Context()); err != nil || n != 1 {
		t.Fatalf("backlog after the lease lapsed queued %d (%v), want the task", n, err)
	}
	c := wd.comments()
	if len(c) != 1 || !strings.Contains(c[0], "stopped renewing its claim") || !strings.Contains(c[0], "instance a") {
		t.Errorf("comments %q, want one saying host-a's lease ran out", c)
	}
	if rec := wd.record(); rec.Status != task.Queued || rec.Instance != "b" || bq.Len() != 1 {
		t.Errorf("after the takeover: %+v, %d jobs", rec, bq.Len())
	}
	// A second pass, of either host, takes nothing: b holds it.
	if n, err := b.Backlog(t.Context()); err != nil || n != 1 { // queued: b's own store backlog
		t.Errorf("b's next backlog: %d, %v", n, err)
	}
	if len(wd.comments()) != 1 {
		t.Errorf("a second pass posted again: %q", wd.comments())
	}
}

// A restart on the same host (the holder's process is gone) resumes the
// task silently, as before leases, without waiting for the lease.
func TestDeadProcessOfThisHostIsTakenOverSilently(t *testing.T) {
	wd := newWorld(t, false)
	host, err := os.Hostname() // the store judges liveness on this machine
	if err != nil {
		t.Fatal(err)
	}
	dead := store.Owner{Host: host, PID: deadPID(t), Instance: "old", Lease: time.Hour}
	if _, err := wd.st.Claim(t.Context(), wd.ref, dead); err != nil {
		t.Fatal(err)
	}
	b, _ := wd.other("b")
	b.o.Owner.Host = host
	if n, err := b.Backlog(t.Context()); err != nil || n != 1 {
		t.Fatalf("backlog queued %d (%v), want the dead process's task", n, err)
	}
	if c := wd.comments(); len(c) != 0 {
		t.Errorf("comments %q, want none for a restart on the same host", c)
	}
}

// deadPID is the PID of a child process that has exited and been reaped.
func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// failingRenew is a store whose Renew fails.
type failingRenew struct{ store.Store }

func (failingRenew) Renew(context.Context, store.Owner) ([]task.Ref, error) {
	return nil, errors.New("connection refused")
}

// A holder that cannot renew for a whole lease ends its runs: another host
// may take them over by then, and two runs must never overlap.
func TestUnrenewableLeaseEndsTheRun(t *testing.T) {
	r := newBlockingRunner(nil, time.Hour)
	wd, q := leasedWorld(t, r, func(s store.Store) store.Store { return failingRenew{s} })
	r.st = wd.st
	wd.claim()
	q.Close()
	done := consumeInBackground(t, wd.w)
	<-r.started
	if err := <-r.err; !errors.Is(err, context.Canceled) {
		t.Fatalf("run ended with %v, want it cut", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wd.want(task.Running, "bug", testLabels.Processing)
	if c := wd.comments(); len(c) != 0 {
		t.Errorf("comments %q, want none", c)
	}
}

func (wd *world) record() store.Record {
	wd.t.Helper()
	rec, err := wd.st.Get(wd.t.Context(), wd.ref)
	if err != nil {
		wd.t.Fatal(err)
	}
	return rec
}

// fencedRunner saves its checkpoint fenced by instance, as the engine does
// in the app, after release ran.
type fencedRunner struct {
	st       store.Store
	instance string
	release  func()
}

func (r fencedRunner) Run(ctx context.Context, in engine.Input) (engine.Outcome, error) {
	r.release()
	err := store.HeldBy(r.st, r.instance).SaveCheckpoint(ctx, in.Task.Ref, store.Checkpoint{Step: 2, Data: []byte(`{}`)})
	return engine.Outcome{Calls: 1}, err
}

// A run that loses its task between two renewals finds out at its next
// checkpoint, whose save is refused: it ends there and leaves the task to
// its new holder, without failing it.
func TestRefusedCheckpointEndsTheRunQuietly(t *testing.T) {
	wd, q := leasedWorld(t, nil, nil)
	wd.w.o.Owner.Lease = time.Hour // no renewal comes before the checkpoint
	wd.w.o.Agent = fencedRunner{st: wd.st, instance: "a", release: func() {
		if _, err := wd.st.Release(t.Context(), wd.ref); err != nil {
			t.Error(err)
		}
	}}
	wd.claim()
	q.Close()
	if err := wd.w.Consume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(q.how, ","); got != "ack" {
		t.Errorf("settled %q, want ack", got)
	}
	wd.want(task.Running, "bug", testLabels.Processing)
	if c := wd.comments(); len(c) != 0 {
		t.Errorf("comments %q, want none", c)
	}
}
