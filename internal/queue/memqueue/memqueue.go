// Package memqueue is the in-process queue.Queue: a FIFO of jobs guarded by a
// mutex, with optional capacity. A ref already waiting in the queue is not
// queued twice. A released delivery goes back to the head of the queue; a
// job delivered more than MaxDeliveries times is moved to the dead list.
package memqueue

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/coding-agent/coding-agent/internal/queue"
	"github.com/coding-agent/coding-agent/internal/task"
)

var _ queue.Queue = (*Queue)(nil)

// Options tunes a Queue. The zero value means defaults.
type Options struct {
	// Capacity is how many jobs may wait; Put blocks while the queue is full.
	// 0 means unbounded.
	Capacity int
	// Now stamps jobs put with a zero Enqueued time; nil means time.Now.
	Now func() time.Time
	// MaxDeliveries is how many times a job may be delivered before it is
	// moved to the dead list instead; 0 means without limit.
	MaxDeliveries int
}

// DeadName is the dead-letter queue a Delivery names.
const DeadName = "memqueue.dead"

// entry is a waiting job and how many times it was delivered.
type entry struct {
	job   queue.Job
	count int
}

// Queue is an in-process FIFO of jobs, safe for concurrent use.
type Queue struct {
	capacity int
	now      func() time.Time
	max      int

	mu     sync.Mutex
	jobs   []entry
	dead   []queue.Job
	queued map[task.Ref]bool // refs in jobs
	closed bool
	// changed is closed and replaced whenever jobs or closed change, waking
	// every waiter to look again.
	changed chan struct{}
}

// New returns an empty queue.
func New(opts Options) *Queue {
	q := &Queue{
		capacity: opts.Capacity,
		now:      opts.Now,
		max:      opts.MaxDeliveries,
		queued:   map[task.Ref]bool{},
		changed:  make(chan struct{}),
	}
	if q.now == nil {
		q.now = time.Now
	}
	return q
}

// broadcast wakes the waiters; q.mu must be held.
func (q *Queue) broadcast() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// Put appends job. It returns at once when job's ref is already waiting (the
// waiting job keeps its place), blocks while the queue is full, and fails with
// queue.ErrClosed once the queue is closed.
func (q *Queue) Put(ctx context.Context, job queue.Job) error {
	if job.Enqueued.IsZero() {
		job.Enqueued = q.now()
	}
	q.mu.Lock()
	for {
		switch {
		case q.closed:
			q.mu.Unlock()
			return fmt.Errorf("putting %s: %w", job.Ref, queue.ErrClosed)
		case q.queued[job.Ref]:
			q.mu.Unlock()
			return nil
		case q.capacity <= 0 || len(q.jobs) < q.capacity:
			q.jobs = append(q.jobs, entry{job: job})
			q.queued[job.Ref] = true
			q.broadcast()
			q.mu.Unlock()
			return nil
		}
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("putting %s: %w", job.Ref, ctx.Err())
		case <-changed:
		}
		q.mu.Lock()
	}
}

// Take removes and returns the oldest job, blocking until there is one. After
// Close it still returns the jobs left, then queue.ErrClosed.
func (q *Queue) Take(ctx context.Context) (queue.Delivery, error) {
	q.mu.Lock()
	for {
		if len(q.jobs) > 0 {
			e := q.jobs[0]
			q.jobs[0] = entry{}
			q.jobs = q.jobs[1:]
			delete(q.queued, e.job.Ref)
			e.count++
			dead := ""
			if q.max > 0 && e.count > q.max {
				q.dead = append(q.dead, e.job)
				dead = DeadName
			}
			q.broadcast()
			q.mu.Unlock()
			if dead != "" {
				return queue.NewDelivery(e.job, e.count, dead, nil), nil
			}
			return queue.NewDelivery(e.job, e.count, "", settler{q: q, e: e}), nil
		}
		if q.closed {
			q.mu.Unlock()
			return queue.Delivery{}, fmt.Errorf("taking job: %w", queue.ErrClosed)
		}
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return queue.Delivery{}, fmt.Errorf("taking job: %w", ctx.Err())
		case <-changed:
		}
		q.mu.Lock()
	}
}

// settler settles a delivery of q.
type settler struct {
	q *Queue
	e entry
}

// Ack forgets the job.
func (s settler) Ack() error { return nil }

// Release puts the job back at the head of the queue, even past its
// capacity or after Close, unless its ref is waiting already.
func (s settler) Release() error {
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued[s.e.job.Ref] {
		return nil
	}
	q.jobs = append([]entry{s.e}, q.jobs...)
	q.queued[s.e.job.Ref] = true
	q.broadcast()
	return nil
}

// Dead lists the jobs moved to the dead list, oldest first.
func (q *Queue) Dead() []queue.Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]queue.Job(nil), q.dead...)
}

// Len is the number of waiting jobs.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.jobs)
}

// Close stops Put; Take drains what is left. Closing twice is harmless.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		q.broadcast()
	}
	return nil
}
