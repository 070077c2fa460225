// Package queuetest is the conformance suite every queue.Queue backend must
// pass. A backend's test calls Run (or RunWith) with a function that returns a
// new, empty queue.
package queuetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/queue"
	"github.com/coding-agent/coding-agent/internal/task"
)

// MaxDeliveries is the max deliveries the queues under test must have: the
// job delivered for the (MaxDeliveries+1)th time is moved to the dead-letter
// queue.
const MaxDeliveries = 3

// Options tunes the suite for a backend. The zero value runs everything.
type Options struct {
	// NoBubble skips the subtests that run inside a testing/synctest bubble
	// to prove that Take and Put wait. A backend whose waiting happens on the
	// network (not on a channel or lock) cannot be observed from a bubble.
	NoBubble bool
	// NoDedup skips the subtest proving that Put of a ref already waiting
	// is a no-op: a broker does not look into its queue. The consumer finds
	// the second job of a ref stale.
	NoDedup bool
	// Consumer opens a second consumer c of q's jobs (its own connection,
	// for a networked backend) and a function that makes c go away as a
	// dying process would, settling nothing. nil skips the subtest that
	// needs it (an in-process queue has no consumer that can go away alone).
	Consumer func(t *testing.T, q queue.Queue) (c queue.Queue, goAway func())
}

// Run runs the whole suite. newQueue must return a new, empty queue with room
// for at least 16 jobs and MaxDeliveries on every call; the suite closes it
// (Close must tolerate a second call). Bubble subtests call newQueue inside
// the bubble.
func Run(t *testing.T, newQueue func(t *testing.T) queue.Queue) {
	t.Helper()
	RunWith(t, newQueue, Options{})
}

// RunWith runs the suite with opts.
func RunWith(t *testing.T, newQueue func(t *testing.T) queue.Queue, opts Options) {
	t.Helper()
	plain := []struct {
		name string
		fn   func(t *testing.T, q queue.Queue)
	}{
		{"FIFO", testFIFO},
		{"Dedup", testDedup},
		{"TakeReleasedByPut", testTakeReleasedByPut},
		{"CloseDrains", testCloseDrains},
		{"ProducersConsumers", testProducersConsumers},
		{"AckedNeverAgain", testAckedNeverAgain},
		{"ReleasedUntilDead", testReleasedUntilDead},
	}
	for _, tc := range plain {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "Dedup" && opts.NoDedup {
				t.Skip("backend does not deduplicate waiting refs")
			}
			tc.fn(t, open(t, newQueue))
		})
	}
	t.Run("ConsumerGoesAway", func(t *testing.T) {
		if opts.Consumer == nil {
			t.Skip("backend has no consumer that can go away on its own")
		}
		testConsumerGoesAway(t, open(t, newQueue), opts.Consumer)
	})
	bubbled := []struct {
		name string
		fn   func(t *testing.T, q queue.Queue)
	}{
		{"TakeBlocksUntilPut", testTakeBlocksUntilPut},
		{"TakeCancelled", testTakeCancelled},
		{"CloseReleasesTake", testCloseReleasesTake},
	}
	for _, tc := range bubbled {
		t.Run(tc.name, func(t *testing.T) {
			if opts.NoBubble {
				t.Skip("backend opted out of synctest bubbles")
			}
			synctest.Test(t, func(t *testing.T) { tc.fn(t, open(t, newQueue)) })
		})
	}
	// Outside a bubble the same promises, without proving that Take waited.
	t.Run("TakeCancelledOutsideBubble", func(t *testing.T) { testTakeCancelledOutside(t, open(t, newQueue)) })
	t.Run("CloseReleasesTakeOutsideBubble", func(t *testing.T) { testCloseReleasesTakeOutside(t, open(t, newQueue)) })
}

func open(t *testing.T, newQueue func(t *testing.T) queue.Queue) queue.Queue {
	q := newQueue(t)
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("Close at cleanup: %v", err)
		}
	})
	return q
}

// base is the Enqueued time of the suite's jobs: UTC, whole microseconds, so
// that backends that serialise it keep it exactly.
var base = time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)

// Job returns a distinct job for n.
func Job(n int) queue.Job {
	return queue.Job{
		Ref:      task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n},
		Enqueued: base.Add(time.Duration(n) * time.Microsecond),
	}
}

func put(t *testing.T, q queue.Queue, jobs ...queue.Job) {
	t.Helper()
	for _, j := range jobs {
		if err := q.Put(t.Context(), j); err != nil {
			t.Fatalf("Put(%s): %v", j.Ref, err)
		}
	}
}

// take takes a delivery and acks it.
func take(t *testing.T, q queue.Queue) queue.Job {
	t.Helper()
	d := deliver(t, q)
	if err := d.Ack(); err != nil {
		t.Fatalf("Ack(%s): %v", d.Job.Ref, err)
	}
	return d.Job
}

// deliver takes a delivery and leaves it unsettled.
func deliver(t *testing.T, q queue.Queue) queue.Delivery {
	t.Helper()
	d, err := q.Take(t.Context())
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return d
}

func sameJob(a, b queue.Job) bool { return a.Ref == b.Ref && a.Enqueued.Equal(b.Enqueued) }

func testFIFO(t *testing.T, q queue.Queue) {
	var want []queue.Job
	for i := 1; i <= 5; i++ {
		want = append(want, Job(i))
	}
	put(t, q, want...)
	var got []queue.Job
	for range want {
		got = append(got, take(t, q))
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(sameJob)); diff != "" {
		t.Errorf("jobs out of order (-put +taken):\n%s", diff)
	}
}

func testDedup(t *testing.T, q queue.Queue) {
	later := Job(1)
	later.Enqueued = later.Enqueued.Add(time.Hour)
	put(t, q, Job(1), Job(2), later, Job(3), Job(2))
	want := []queue.Job{Job(1), Job(2), Job(3)}
	var got []queue.Job
	for range want {
		got = append(got, take(t, q))
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(sameJob)); diff != "" {
		t.Errorf("a waiting ref was queued again (-want +taken):\n%s", diff)
	}
	// Once taken, the ref may be queued again.
	put(t, q, later)
	if j := take(t, q); !sameJob(j, later) {
		t.Errorf("re-queued job = %+v, want %+v", j, later)
	}
	put(t, q, Job(4))
	if j := take(t, q); !sameJob(j, Job(4)) {
		t.Errorf("after dedup the queue held %+v, want only job 4", j)
	}
}

// testTakeReleasedByPut: a Take started on an empty queue returns the job a
// later Put brings.
func testTakeReleasedByPut(t *testing.T, q queue.Queue) {
	got := make(chan queue.Job, 1)
	go func() {
		d, err := q.Take(t.Context())
		if err != nil {
			t.Errorf("Take: %v", err)
		}
		if err := d.Ack(); err != nil {
			t.Errorf("Ack: %v", err)
		}
		got <- d.Job
	}()
	put(t, q, Job(1))
	if j := <-got; !sameJob(j, Job(1)) {
		t.Errorf("Take = %+v, want %+v", j, Job(1))
	}
}

func testCloseDrains(t *testing.T, q queue.Queue) {
	put(t, q, Job(1), Job(2))
	if err := q.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := q.Put(t.Context(), Job(3)); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Put after Close: err = %v, want ErrClosed", err)
	}
	for _, want := range []queue.Job{Job(1), Job(2)} {
		if j := take(t, q); !sameJob(j, want) {
			t.Errorf("draining after Close: Take = %+v, want %+v", j, want)
		}
	}
	if _, err := q.Take(t.Context()); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Take on a closed, drained queue: err = %v, want ErrClosed", err)
	}
}

func testProducersConsumers(t *testing.T, q queue.Queue) {
	const producers, each, consumers = 4, 50, 3
	var prod sync.WaitGroup
	for p := range producers {
		prod.Go(func() {
			for i := range each {
				if err := q.Put(t.Context(), Job(p*each+i+1)); err != nil {
					t.Errorf("Put: %v", err)
					return
				}
			}
		})
	}
	var (
		mu   sync.Mutex
		seen = map[task.Ref]int{}
		cons sync.WaitGroup
	)
	for range consumers {
		cons.Go(func() {
			for {
				d, err := q.Take(t.Context())
				if errors.Is(err, queue.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Take: %v", err)
					return
				}
				if err := d.Ack(); err != nil {
					t.Errorf("Ack: %v", err)
				}
				mu.Lock()
				seen[d.Job.Ref]++
				mu.Unlock()
			}
		})
	}
	prod.Wait()
	if err := q.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	cons.Wait()
	if len(seen) != producers*each {
		t.Errorf("consumers saw %d distinct jobs, want %d", len(seen), producers*each)
	}
	for ref, n := range seen {
		if n != 1 {
			t.Errorf("%s taken %d times", ref, n)
		}
	}
}

// testTakeBlocksUntilPut: Take on an empty queue waits (durably, in the
// bubble) and returns only once a job is put.
func testTakeBlocksUntilPut(t *testing.T, q queue.Queue) {
	got := make(chan queue.Job, 1)
	go func() {
		d, err := q.Take(t.Context())
		if err != nil {
			t.Errorf("Take: %v", err)
		}
		if err := d.Ack(); err != nil {
			t.Errorf("Ack: %v", err)
		}
		got <- d.Job
	}()
	synctest.Wait()
	select {
	case j := <-got:
		t.Fatalf("Take on an empty queue returned %+v", j)
	default:
	}
	put(t, q, Job(7))
	synctest.Wait()
	select {
	case j := <-got:
		if !sameJob(j, Job(7)) {
			t.Errorf("Take = %+v, want %+v", j, Job(7))
		}
	default:
		t.Fatal("Take still blocked after Put")
	}
}

func testTakeCancelled(t *testing.T, q queue.Queue) {
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := q.Take(ctx)
		errc <- err
	}()
	synctest.Wait()
	cancel()
	synctest.Wait()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Take after cancel: err = %v, want context.Canceled", err)
		}
	default:
		t.Fatal("Take still blocked after its context was cancelled")
	}
	// The cancelled Take took nothing: a job put now goes to the next Take.
	put(t, q, Job(1))
	if j := take(t, q); !sameJob(j, Job(1)) {
		t.Errorf("Take = %+v, want %+v", j, Job(1))
	}

	dctx, dcancel := context.WithTimeout(t.Context(), time.Minute)
	defer dcancel()
	start := time.Now()
	if _, err := q.Take(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Take with a deadline: err = %v, want context.DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited != time.Minute {
		t.Errorf("Take returned after %v (bubble time), want at its 1m deadline", waited)
	}
}

func testCloseReleasesTake(t *testing.T, q queue.Queue) {
	const waiters = 3
	errc := make(chan error, waiters)
	for range waiters {
		go func() {
			_, err := q.Take(t.Context())
			errc <- err
		}()
	}
	synctest.Wait()
	if err := q.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	synctest.Wait()
	for i := range waiters {
		select {
		case err := <-errc:
			if !errors.Is(err, queue.ErrClosed) {
				t.Errorf("waiting Take after Close: err = %v, want ErrClosed", err)
			}
		default:
			t.Fatalf("%d of %d waiting Takes still blocked after Close", waiters-i, waiters)
		}
	}
	if err := q.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// testAckedNeverAgain: an acked job is gone; a released one comes back,
// delivered once more; first deliveries count 1.
func testAckedNeverAgain(t *testing.T, q queue.Queue) {
	put(t, q, Job(1), Job(2))
	d1 := deliver(t, q)
	if !sameJob(d1.Job, Job(1)) || d1.Count != 1 || d1.Dead != "" {
		t.Fatalf("first delivery = %+v, want job 1, count 1, not dead", d1)
	}
	if err := d1.Ack(); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	d2 := deliver(t, q)
	if !sameJob(d2.Job, Job(2)) || d2.Count != 1 {
		t.Fatalf("second delivery = %+v, want job 2, count 1", d2)
	}
	if err := d2.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	again := deliver(t, q)
	if !sameJob(again.Job, Job(2)) || again.Count != 2 {
		t.Fatalf("after Release: delivery = %+v, want job 2, count 2", again)
	}
	if err := again.Ack(); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	// Settling twice changes nothing.
	if err := d1.Release(); err != nil {
		t.Fatalf("Release after Ack: %v", err)
	}
	put(t, q, Job(3))
	if j := take(t, q); !sameJob(j, Job(3)) {
		t.Errorf("after acking jobs 1 and 2 the queue held %+v, want only job 3", j)
	}
}

// testReleasedUntilDead: each release delivers the job again with a higher
// count; the delivery past MaxDeliveries is reported dead and the job is
// not delivered again.
func testReleasedUntilDead(t *testing.T, q queue.Queue) {
	put(t, q, Job(1))
	for i := 1; i <= MaxDeliveries; i++ {
		d := deliver(t, q)
		if !sameJob(d.Job, Job(1)) || d.Count != i || d.Dead != "" {
			t.Fatalf("delivery %d = %+v, want job 1, count %d, not dead", i, d, i)
		}
		if err := d.Release(); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	d := deliver(t, q)
	if !sameJob(d.Job, Job(1)) || d.Count != MaxDeliveries+1 || d.Dead == "" {
		t.Fatalf("delivery past max = %+v, want job 1, count %d, dead", d, MaxDeliveries+1)
	}
	if err := d.Release(); err != nil {
		t.Fatalf("Release of a dead delivery: %v", err)
	}
	put(t, q, Job(2))
	if j := take(t, q); !sameJob(j, Job(2)) {
		t.Errorf("after the dead letter the queue held %+v, want only job 2", j)
	}
}

// testConsumerGoesAway: a job taken by a consumer that goes away without
// settling it is delivered again, counted; an acked one is not.
func testConsumerGoesAway(t *testing.T, q queue.Queue, consumer func(*testing.T, queue.Queue) (queue.Queue, func())) {
	c, goAway := consumer(t, q)
	put(t, q, Job(1), Job(2))
	if j := take(t, c); !sameJob(j, Job(1)) {
		t.Fatalf("second consumer took %+v, want job 1", j)
	}
	if d := deliver(t, c); !sameJob(d.Job, Job(2)) {
		t.Fatalf("second consumer took %+v, want job 2", d.Job)
	}
	goAway()
	d := deliver(t, q)
	if !sameJob(d.Job, Job(2)) || d.Count != 2 {
		t.Fatalf("after the consumer went away: delivery = %+v, want job 2, count 2", d)
	}
	if err := d.Ack(); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	put(t, q, Job(3))
	if j := take(t, q); !sameJob(j, Job(3)) {
		t.Errorf("the queue held %+v, want only job 3", j)
	}
}

func testTakeCancelledOutside(t *testing.T, q queue.Queue) {
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := q.Take(ctx)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Take after cancel: err = %v, want context.Canceled", err)
	}
	put(t, q, Job(1))
	if j := take(t, q); !sameJob(j, Job(1)) {
		t.Errorf("Take = %+v, want %+v", j, Job(1))
	}
}

func testCloseReleasesTakeOutside(t *testing.T, q queue.Queue) {
	const waiters = 3
	errc := make(chan error, waiters)
	for range waiters {
		go func() {
			_, err := q.Take(t.Context())
			errc <- err
		}()
	}
	if err := q.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range waiters {
		if err := <-errc; !errors.Is(err, queue.ErrClosed) {
			t.Errorf("waiting Take after Close: err = %v, want ErrClosed", err)
		}
	}
}
