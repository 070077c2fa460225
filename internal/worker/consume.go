package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/coding-agent/coding-agent/internal/queue"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Consume runs Workers goroutines taking jobs until the queue is closed and
// drained, or ctx ends. Once Options.Shutdown is closed no job is taken or
// started; the runs in hand stop at their next checkpoint (their state is
// saved); ctx ending cuts them off.
// A job is acked once its task has left the consumer's hands (see settleJob);
// a job delivered more times than the queue allows comes dead-lettered and
// its task fails saying so.
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
	// The heartbeats of the tasks in hand: their leases in the store, and
	// their holds on the forge (Options.ForgeLease).
	hctx, stopBeats := context.WithCancel(ctx)
	var beats sync.WaitGroup
	beats.Go(func() { w.holdLeases(hctx) })
	beats.Go(func() { w.beatHolds(hctx) })
	defer func() { stopBeats(); beats.Wait() }()
	for range w.o.Workers {
		wg.Go(func() {
			for {
				d, err := w.o.Queue.Take(ctx)
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
					// Unsettled, and no more taken: the task is queued
					// in the store, and a networked queue delivers the
					// job again once this consumer goes away.
					return
				}
				how := ack
				if d.Dead != "" {
					err = w.deadLettered(ctx, d)
				} else {
					how, err = w.process(ctx, d.Job.Ref)
				}
				if err != nil {
					how = leave
				}
				w.settleJob(d, how)
				w.finished(d.Job.Ref)
				if err != nil {
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

// settleJob settles d as process said: acked once its task left the
// consumer's hands; given back (released) when a final label change is to
// be tried again; left unsettled when its task stays queued to resume, so
// that a networked queue delivers it again once this consumer goes away and
// the consumer that takes it resumes the task from its checkpoint.
func (w *Worker) settleJob(d queue.Delivery, how settlement) {
	var err error
	switch how {
	case ack:
		err = d.Ack() // failing, the job comes again; Process finds its task stale
	case release:
		if !w.o.Redeliver {
			err = d.Ack()
			break
		}
		err = d.Release()
	}
	if err != nil {
		w.log(d.Job.Ref).Warn("settling a job", "how", how, "error", err)
	}
}

// deadLettered fails the task of a job the queue moved to its dead-letter
// queue, saying why, unless the task is not queued any more (a stale job).
// It returns a failure of the store.
func (w *Worker) deadLettered(ctx context.Context, d queue.Delivery) error {
	ref, log := d.Job.Ref, w.log(d.Job.Ref)
	rec, err := w.o.Store.Get(ctx, ref)
	if err := failure(err); err != nil {
		return fmt.Errorf("reading %s in the store: %w", ref, err)
	}
	if err == nil && rec.Status != task.Queued && rec.Status != task.Running {
		log.Info("dead-lettered job is stale; task is no longer queued", "status", rec.Status, "dead_letter_queue", d.Dead)
		return nil
	}
	claimed, err := w.o.Store.ClaimQueued(ctx, ref, w.o.Owner)
	if err != nil {
		if errors.Is(err, store.ErrClaimed) {
			log.Info("dead-lettered job's task is held by another process", "dead_letter_queue", d.Dead)
			return nil
		}
		if errors.Is(err, store.ErrNotHeld) || errors.Is(err, store.ErrNotFound) {
			log.Info("dead-lettered job is stale; task is no longer queued", "why", err.Error(), "dead_letter_queue", d.Dead)
			return nil
		}
		return failure(fmt.Errorf("claiming %s in the store: %w", ref, err))
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	post := w.poster(ref, log)
	var labels []string
	if t, err := w.o.Forge.Get(fctx, ref); err == nil {
		labels = t.Labels
	}
	// The runs begun are the store's count, as for a task given up after
	// a takeover (giveUp); the broker counted the job's deliveries.
	reason := fmt.Sprintf("%s: its job was delivered %d times, more than the queue's max_deliveries allows "+
		"(each consumer it went to stopped before the task left its hands); the job was moved to the dead-letter queue %q, "+
		"where it stays for the operator", givenUp(claimed.Attempts-1), d.Count, d.Dead)
	_, err = w.move(fctx, ending{ref: ref, post: post, log: log, labels: labels, reason: reason}, runBroke)
	return failure(err)
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
