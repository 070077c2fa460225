package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/obs"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/worker"
)

// taskContext is the context tasks run under: it outlives ctx by
// shutdown_grace_seconds, so that a task in hand may reach its next
// checkpoint; past that its model request or tool call is cancelled, and
// the next run does that step again from the checkpoint before it.
func (a *App) taskContext(ctx context.Context) (context.Context, context.CancelFunc) {
	grace := a.cfg.ShutdownGrace()
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	said := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(said)
		a.Log.Info("shutting down: the tasks in hand stop at their next checkpoint, or are cut", "grace", grace.String(),
			"reason", context.Cause(ctx).Error())
		t := time.AfterFunc(grace, cancel)
		context.AfterFunc(tctx, func() { t.Stop() })
	})
	return tctx, func() {
		if !stop() {
			<-said // the shutdown is being said: before "stopped", which follows
		}
		cancel()
	}
}

// Run is one pass: discover and claim every labelled task, process them all,
// return. With the in-process queue a discovery pass claims no more tasks
// than there are free workers, so Run makes passes while the consumers
// work, until one leaves nothing behind (worker.Drain). It fails only when
// it could not run (discovery failed); a task that fails is reported on
// the task.
func (a *App) Run(ctx context.Context) error {
	if err := a.startAgent(ctx); err != nil {
		return err
	}
	a.pruneEvents(ctx)
	q, err := a.newQueue(ctx)
	if err != nil {
		return err
	}
	defer q.close(a)
	w := a.newWorker(q, ctx.Done())
	backlog, err := w.Backlog(ctx)
	if err != nil {
		return err
	}
	tctx, cancel := a.taskContext(ctx)
	defer cancel()
	// The passes stop when the consumer does (a store that cannot be
	// written), which then no longer frees workers.
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	consumed := make(chan error, 1)
	go func() {
		err := w.Consume(tctx)
		stop()
		consumed <- err
	}()
	n, derr := w.Drain(dctx)
	// Cut short by the consumer's end (not by ctx): its error, if any, is
	// the one to return.
	consumerEnded := dctx.Err() != nil && ctx.Err() == nil
	a.Log.Info("run: tasks claimed", "count", n)
	if n+backlog == 0 && derr == nil && !consumerEnded {
		a.Log.Info("run: nothing to do", a.watched()...)
	}
	q.Close()
	if err := <-consumed; err != nil {
		return err
	}
	if derr != nil && !consumerEnded {
		return derr
	}
	// A task left queued because the forge refused the credentials was
	// not finished: the run failed, and says why.
	return w.Refused()
}

// Serve polls every continuous.producer.interval_minutes and processes what
// it finds until ctx ends; the tasks in hand then stop at their next
// checkpoint. A consumer that stops on its own (the store cannot be
// written) ends the polling too, and Serve returns its error. With
// server.listen it serves webhooks, which make the passes at once, and
// /healthz, /readyz and /metrics.
func (a *App) Serve(ctx context.Context) (err error) {
	// Said last, once everything has stopped; only after serving was said.
	started := false
	defer func(ctx context.Context) {
		if started {
			a.stopped(ctx, err)
		}
	}(ctx)
	stopListening, err := a.listen()
	if err != nil {
		return err
	}
	defer stopListening()
	if err := a.startAgent(ctx); err != nil {
		return err
	}
	q, err := a.newQueue(ctx)
	if err != nil {
		return err
	}
	defer q.close(a)
	a.queueDepth(q)
	w := a.newWorker(q, ctx.Done())
	a.serving()
	started = true
	tctx, cancel := a.taskContext(ctx)
	defer cancel()
	done, ctx := a.consume(ctx, w, tctx)
	// A store found lost by a pass ends both polls, and Serve returns it.
	ctx, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	pruned := make(chan struct{})
	go func() {
		defer close(pruned)
		_ = a.poll(ctx, time.Hour, nil, func(ctx context.Context) error { a.pruneEvents(ctx); return nil })
	}()
	defer func() { <-pruned }()
	replies := make(chan struct{})
	go func() {
		defer close(replies)
		if !a.cfg.Conversation.Enabled {
			return
		}
		// Tasks awaiting a reply are checked more often than discovery runs.
		if err := a.poll(ctx, a.cfg.Conversation.PollInterval(), a.wake.replies, func(ctx context.Context) error {
			_, err := w.Replies(ctx)
			return err
		}); err != nil {
			lose(err)
		}
	}()
	// A pass that left tasks for want of a free worker runs again as soon
	// as one is free, not a whole interval later; a webhook makes one at
	// once.
	var left atomic.Bool
	var idle idleness
	produce := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-a.wake.produce:
			case <-w.Freed():
				if !left.Load() {
					continue
				}
			}
			select {
			case produce <- struct{}{}:
			default:
			}
		}
	}()
	if err := a.poll(ctx, a.cfg.Continuous.Producer.Interval(), produce, func(ctx context.Context) error {
		b, err := w.Backlog(ctx)
		if err != nil {
			return err
		}
		p, err := w.Pass(ctx)
		left.Store(p.Left > 0)
		if err == nil {
			idle.passed(a, w, b+p.Queued+p.Left)
		}
		return err
	}); err != nil {
		lose(err)
	}
	<-replies
	q.Close()
	return lostOr(ctx, <-done)
}

// lostOr is err, or, when there is none, the lost store's error that ended
// ctx (see poll).
func lostOr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); err == nil && errors.Is(cause, store.ErrLost) {
		return cause
	}
	return err
}

// Produce discovers and claims tasks, marking them queued in the store for
// a consumer sharing the state directory, and, with queue.type rabbitmq,
// putting their jobs on the broker. With once it makes one pass.
func (a *App) Produce(ctx context.Context, once bool) error {
	if a.cfg.Conversation.Enabled {
		// The reply judge asks the model about a reply it is unsure of.
		m, err := a.newLLM(a.budget(ctx))
		if err != nil {
			return err
		}
		a.llm = m
	}
	var w *worker.Worker
	if a.cfg.Queue.Type == config.QueueRabbitMQ {
		q, err := a.newQueue(ctx)
		if err != nil {
			return err
		}
		defer q.close(a)
		w = a.newWorker(q, ctx.Done())
	} else {
		w = a.newWorker(nil, ctx.Done())
	}
	pass := func(ctx context.Context) (int, error) {
		n, err := w.Backlog(ctx) // tasks whose holder stopped renewing its lease
		if err != nil {
			return n, err
		}
		m, err := w.Produce(ctx)
		return n + m, err
	}
	if once {
		n, err := pass(ctx)
		a.Log.Info("produce: tasks queued", "count", n)
		return err
	}
	return a.poll(ctx, a.cfg.Continuous.Producer.Interval(), nil, func(ctx context.Context) error {
		_, err := pass(ctx)
		return err
	})
}

// Consume processes the tasks queued in the store (or, with queue.type
// rabbitmq, the jobs on the broker), polling for new ones. With once it
// processes what is queued now and returns.
func (a *App) Consume(ctx context.Context, once bool) error {
	if err := a.startAgent(ctx); err != nil {
		return err
	}
	q, err := a.newQueue(ctx)
	if err != nil {
		return err
	}
	defer q.close(a)
	w := a.newWorker(q, ctx.Done())
	tctx, cancel := a.taskContext(ctx)
	defer cancel()
	if once {
		if _, err := w.Backlog(ctx); err != nil {
			return err
		}
		q.Close()
		if err := w.Consume(tctx); err != nil {
			return err
		}
		return w.Refused()
	}
	done, pctx := a.consume(ctx, w, tctx)
	// The store's queued tasks (in-process queue), and with any queue the
	// tasks whose holder stopped renewing its lease.
	perr := a.poll(pctx, a.cfg.Continuous.Producer.Interval(), nil, func(ctx context.Context) error {
		_, err := w.Backlog(ctx)
		return err
	})
	q.Close()
	if err := <-done; err != nil {
		return err
	}
	return perr
}

// consume runs w's consumer under tctx in the background; done gets its
// error once it returns. The context returned is ctx, ended too when the
// consumer returns an error, so that polling stops with it.
func (a *App) consume(ctx context.Context, w *worker.Worker, tctx context.Context) (<-chan error, context.Context) {
	ctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		err := w.Consume(tctx)
		if err != nil {
			a.Log.Error("the consumer stopped; polling stops too", "error", err, obs.Fatal, true)
			stop()
		}
		done <- err
	}()
	return done, ctx
}

// poll runs pass now and then every interval until ctx ends, and at once
// when wake is signalled (a webhook; nil: never); a failed pass is logged
// and retried at the next tick. A pass that finds the store's database
// gone (store.ErrLost) ends the polling with that error: it does not come
// back, and every pass after would fail the same way.
func (a *App) poll(ctx context.Context, interval time.Duration, wake <-chan struct{}, pass func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := pass(ctx); err != nil && ctx.Err() == nil {
			if errors.Is(err, store.ErrLost) {
				a.Log.Error("polling stops: the state store's database is gone", "error", err, obs.Fatal, true)
				return err
			}
			a.Log.Error("polling pass failed; retrying at the next tick", "error", err, "interval", interval.String())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-wake:
		}
	}
}

// lease says how a running task is held at now: the instance and until
// when, or that its lease lapsed (any process takes it over at its next
// pass) or was released.
func lease(r store.Record, now time.Time, zone *time.Location) string {
	switch {
	case r.Status != task.Running:
		return "-"
	case r.Instance == "" || r.LeaseUntil.IsZero():
		return "released"
	case now.After(r.LeaseUntil):
		return r.Instance + " lapsed " + r.LeaseUntil.In(zone).Format(timeLayout)
	}
	return r.Instance + " until " + r.LeaseUntil.In(zone).Format("15:04:05 MST")
}

// Release frees a task from the process holding it, from any host: its
// lease lapses at once, the holder's run ends at its next renewal, and
// the next pass of any process sharing the store takes the task over from
// its last checkpoint. A task in processing that the store does not hold
// (taken on the forge by a process killed before its store claim, or held
// by a host with a store of its own) is put up again on the forge instead,
// its holder's hold there revoked (worker.PutBack).
func (a *App) Release(ctx context.Context, ref task.Ref, out io.Writer) error {
	prev, err := a.store.Release(ctx, ref)
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrNotHeld):
		said, put, perr := a.newWorker(nil, nil).PutBack(ctx, ref, true)
		if perr != nil {
			return fmt.Errorf("releasing %s: %w", ref, perr)
		}
		if put {
			fmt.Fprintf(out, "%s: %s\n", ref, said)
			return nil
		}
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("releasing %s: the store has no such task, and on the forge %s", ref, said)
		}
		return fmt.Errorf("%w; only a running or queued task is held by a process, and on the forge %s", err, said)
	case err != nil:
		return err
	}
	holder := fmt.Sprintf("%s, pid %d", prev.Host, prev.PID)
	if prev.Instance != "" {
		holder += ", instance " + prev.Instance
	}
	fmt.Fprintf(out, "%s: released from %s; the next pass of any process sharing the store takes it over from its last checkpoint\n", ref, holder)
	return nil
}

func oneLine(s string, max int) string {
	r := []rune(s)
	for i, c := range r {
		if c == '\n' || c == '\t' {
			r[i] = ' '
		}
	}
	if len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return string(r)
}

// Signal actions: what `coding-agent pause|resume|stop REF` does.
const (
	SignalPause  = "pause"
	SignalResume = "resume"
	SignalStop   = "stop"
)

// Signal pauses, resumes or stops a task from the command line by setting
// the labels a running agent watches: the paused label (added or removed) or
// the stopped label. A paused task resumes on the next poll once its paused
// label is gone.
func (a *App) Signal(ctx context.Context, action string, ref task.Ref, out io.Writer) error {
	if ref.Forge != a.cfg.TaskSource {
		return fmt.Errorf("%s is on %s, but task_source is %s", ref, ref.Forge, a.cfg.TaskSource)
	}
	l := a.cfg.Labels()
	var err error
	switch action {
	case SignalPause:
		err = a.forge.AddLabel(ctx, ref, l.Paused)
	case SignalResume:
		return a.resume(ctx, ref, out)
	case SignalStop:
		// A task awaiting a reply has no run to reach a checkpoint: it
		// stops now, on the forge and in the store.
		stopped, said, serr := a.newWorker(nil, nil).StopAwaiting(ctx, ref)
		if serr != nil {
			return fmt.Errorf("stop %s: %w", ref, serr)
		}
		if stopped {
			fmt.Fprintf(out, "%s: %s\n", ref, said)
			return nil
		}
		err = a.forge.AddLabel(ctx, ref, l.Stopped)
	default:
		return fmt.Errorf("unknown action %q: want pause, resume or stop", action)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", action, ref, err)
	}
	fmt.Fprintf(out, "%s: %s requested; the agent acts on it at its next checkpoint\n", ref, action)
	return nil
}

// resume resumes a paused task (its paused label removed); a task that is
// not paused but left in processing is put up again (worker.PutBack, once
// no holder keeps it); anything else is refused, saying what the task is,
// so that the command never says it did what it did not.
func (a *App) resume(ctx context.Context, ref task.Ref, out io.Writer) error {
	l := a.cfg.Labels()
	t, err := a.forge.Get(ctx, ref)
	if err != nil {
		return fmt.Errorf("resume %s: %w", ref, err)
	}
	if l.Paused != "" && t.HasLabel(l.Paused) {
		if err := a.forge.RemoveLabel(ctx, ref, l.Paused); err != nil {
			return fmt.Errorf("resume %s: %w", ref, err)
		}
		fmt.Fprintf(out, "%s: resume requested; the agent acts on it at its next checkpoint\n", ref)
		return nil
	}
	said, put, err := a.newWorker(nil, nil).PutBack(ctx, ref, false)
	if err != nil {
		return fmt.Errorf("resume %s: %w", ref, err)
	}
	if !put {
		return fmt.Errorf("resume %s: it is not paused (no %q label), and %s", ref, l.Paused, said)
	}
	fmt.Fprintf(out, "%s: not paused, but left in processing: %s\n", ref, said)
	return nil
}
