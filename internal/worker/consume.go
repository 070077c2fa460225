package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/coding-agent/coding-agent/internal/queue"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Consume runs Workers goroutines taking jobs until the queue is closed and
// drained, or ctx ends. Once Options.Shutdown is closed no job is started;
// their next checkpoint (their state is saved); ctx ending cuts them off.
// A failure of the store stops every goroutine once its task in hand is
// left (the jobs not taken stay queued in the store) and is returned.
func (w *Worker) Consume(ctx context.Context) error {
	if w.o.Queue == nil {
		return errors.New("consuming: no queue configured")
	}
	var (
		wg      sync.WaitGroup
		stop    sync.Once
		stopped = make(chan struct{})
		errs    = make(chan error, w.o.Workers) // each goroutine sends at most once, then returns
	)
	for range w.o.Workers {
		wg.Go(func() {
			for {
				job, err := w.o.Queue.Take(ctx)
				if err != nil {
					if !errors.Is(err, queue.ErrClosed) && ctx.Err() == nil {
						errs <- fmt.Errorf("taking a job: %w", err)
					}
					return
				}
				if isClosed(stopped) {
					return
				}
				if isClosed(w.o.Shutdown) {
					continue // leave it queued in the store for the next run
				}
				if err := w.Process(ctx, job.Ref); err != nil {
					stop.Do(func() { close(stopped) })
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

// Backlog queues the tasks the store holds that no process is working on:
// queued (claimed by a producer in another process, or left by a shutdown),
// or running under another process of this host, which may have died (the
// claim in Process takes over only a dead holder's task). It returns how
// many it queued.
func (w *Worker) Backlog(ctx context.Context) (int, error) {
	recs, err := w.o.Store.List(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing queued tasks: %w", err)
	}
	n := 0
	for i := len(recs) - 1; i >= 0; i-- { // oldest first
		r := recs[i]
		orphan := r.Status == task.Running && r.Host == w.o.Owner.Host && r.PID != w.o.Owner.PID
		if r.Status != task.Queued && !orphan {
			continue
		}
		if err := w.enqueue(ctx, r.Ref); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func isClosed(c <-chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func collect(c <-chan error) []error {
	var out []error
	for err := range c {
		out = append(out, err)
	}
	return out
}
