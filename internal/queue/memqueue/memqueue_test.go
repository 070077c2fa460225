package memqueue

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coding-agent/coding-agent/internal/queue"
	"github.com/coding-agent/coding-agent/internal/queue/queuetest"
)

func TestConformanceUnbounded(t *testing.T) {
	queuetest.Run(t, func(t *testing.T) queue.Queue { return New(Options{MaxDeliveries: queuetest.MaxDeliveries}) })
}

func TestConformanceBounded(t *testing.T) {
	queuetest.Run(t, func(t *testing.T) queue.Queue {
		return New(Options{Capacity: 16, MaxDeliveries: queuetest.MaxDeliveries})
	})
}

// putAsync starts a Put and returns the channel its error arrives on.
func putAsync(ctx context.Context, q *Queue, job queue.Job) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- q.Put(ctx, job) }()
	return errc
}

func pending(errc <-chan error) bool {
	select {
	case <-errc:
		return false
	default:
		return true
	}
}

func TestPutBlocksWhileFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options{Capacity: 2})
		for i := 1; i <= 2; i++ {
			if err := q.Put(t.Context(), queuetest.Job(i)); err != nil {
				t.Fatal(err)
			}
		}
		// A ref already waiting is not blocked by a full queue: it is a no-op.
		if err := q.Put(t.Context(), queuetest.Job(1)); err != nil {
			t.Fatalf("Put of a waiting ref on a full queue: %v", err)
		}
		errc := putAsync(t.Context(), q, queuetest.Job(3))
		synctest.Wait()
		if !pending(errc) {
			t.Fatal("Put on a full queue returned")
		}
		if d, err := q.Take(t.Context()); err != nil || d.Job.Ref != queuetest.Job(1).Ref {
			t.Fatalf("Take = %+v, %v", d, err)
		}
		synctest.Wait()
		if pending(errc) {
			t.Fatal("Put still blocked after Take made room")
		}
		if q.Len() != 2 {
			t.Errorf("Len = %d, want 2", q.Len())
		}
	})
}

func TestBlockedPutCancelledOrClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options{Capacity: 1})
		if err := q.Put(t.Context(), queuetest.Job(1)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancelled := putAsync(ctx, q, queuetest.Job(2))
		closed := putAsync(t.Context(), q, queuetest.Job(3))
		synctest.Wait()
		cancel()
		synctest.Wait()
		if err := <-cancelled; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Put: err = %v, want context.Canceled", err)
		}
		if !pending(closed) {
			t.Fatal("second Put on a full queue returned")
		}
		q.Close()
		synctest.Wait()
		if err := <-closed; !errors.Is(err, queue.ErrClosed) {
			t.Errorf("Put blocked across Close: err = %v, want ErrClosed", err)
		}
		if q.Len() != 1 {
			t.Errorf("Len = %d, want 1 (only the first job)", q.Len())
		}
	})
}

func TestStampsEnqueued(t *testing.T) {
	at := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	q := New(Options{Now: func() time.Time { return at }})
	job := queuetest.Job(1)
	job.Enqueued = time.Time{}
	if err := q.Put(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	kept := queuetest.Job(2)
	if err := q.Put(t.Context(), kept); err != nil {
		t.Fatal(err)
	}
	if d, _ := q.Take(t.Context()); !d.Job.Enqueued.Equal(at) {
		t.Errorf("zero Enqueued stamped %v, want %v", d.Job.Enqueued, at)
	}
	if d, _ := q.Take(t.Context()); !d.Job.Enqueued.Equal(kept.Enqueued) {
		t.Errorf("set Enqueued became %v, want %v", d.Job.Enqueued, kept.Enqueued)
	}
}

func TestDeadListKeepsTheJob(t *testing.T) {
	q := New(Options{MaxDeliveries: 1})
	if err := q.Put(t.Context(), queuetest.Job(1)); err != nil {
		t.Fatal(err)
	}
	d, err := q.Take(t.Context())
	if err != nil || d.Dead != "" {
		t.Fatalf("first Take = %+v, %v", d, err)
	}
	if err := d.Release(); err != nil {
		t.Fatal(err)
	}
	if d, err = q.Take(t.Context()); err != nil || d.Dead != DeadName || d.Count != 2 {
		t.Fatalf("second Take = %+v, %v; want dead in %s, count 2", d, err, DeadName)
	}
	if dead := q.Dead(); len(dead) != 1 || dead[0].Ref != queuetest.Job(1).Ref {
		t.Errorf("Dead = %+v, want job 1", dead)
	}
	if q.Len() != 0 {
		t.Errorf("Len = %d, want 0", q.Len())
	}
}
