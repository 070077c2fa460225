// Package memqueue is the in-process queue.Queue: a FIFO of jobs guarded by a
// mutex, with optional capacity. A ref already waiting in the queue is not
// queued twice.
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
}

// Queue is an in-process FIFO of jobs, safe for concurrent use.
type Queue struct {
	capacity int
	now      func() time.Time

	mu     sync.Mutex
	jobs   []queue.Job
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
			q.jobs = append(q.jobs, job)
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
func (q *Queue) Take(ctx context.Context) (queue.Job, error) {
	q.mu.Lock()
	for {
		if len(q.jobs) > 0 {
			job := q.jobs[0]
			q.jobs[0] = queue.Job{}
			q.jobs = q.jobs[1:]
			delete(q.queued, job.Ref)
			q.broadcast()
			q.mu.Unlock()
			return job, nil
		}
		if q.closed {
			q.mu.Unlock()
			return queue.Job{}, fmt.Errorf("taking job: %w", queue.ErrClosed)
		}
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return queue.Job{}, fmt.Errorf("taking job: %w", ctx.Err())
		case <-changed:
		}
		q.mu.Lock()
	}
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
