package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Backlog queues the tasks the store holds that no process is working on,
// oldest first, and returns how many it queued:
//   - running tasks whose holder no longer holds them (its lease lapsed, an
//     operator released it, or it is a dead process of this host) are taken
//     over, atomically across processes and hosts, and resume from their
//     checkpoint; a holder on another host, or a released task, is told
//     in a comment on the task;
//   - without Redeliver (the store is the queue), queued tasks: claimed by
//     a producer in another process, or left by a shutdown. A broker
//     keeps their jobs itself.
func (w *Worker) Backlog(ctx context.Context) (int, error) {
	recs, err := w.o.Store.List(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing queued tasks: %w", err)
	}
	n := 0
	for i := len(recs) - 1; i >= 0; i-- { // oldest first
		r := recs[i]
		switch {
		case r.Status == task.Running:
			ok, err := w.takeOver(ctx, r.Ref)
			if err != nil || !ok {
				if store.IsFailure(err) {
					return n, err
				}
				continue
			}
		case r.Status == task.Queued && !w.o.Redeliver:
		default:
			continue
		}
		if err := w.enqueue(ctx, r.Ref); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// takeOver takes ref over for this process when its holder no longer holds
// it, marks it queued, and reports whether it did. A task in hand here, or
// still held, is left alone.
func (w *Worker) takeOver(ctx context.Context, ref task.Ref) (bool, error) {
	if _, mine := w.active.Load(ref); mine {
		return false, nil
	}
	log := w.log(ref)
	prev, err := w.o.Store.TakeOver(ctx, ref, w.o.Owner)
	switch {
	case errors.Is(err, store.ErrClaimed), errors.Is(err, store.ErrNotHeld):
		return false, nil
	case err != nil:
		log.Error("taking over a task", "error", err)
		return false, err
	}
	released := prev.Instance == ""
	log.Warn("took over a task its holder no longer holds", "holder_host", prev.Host, "holder_pid", prev.PID,
		"holder_instance", prev.Instance, "lease_until", prev.LeaseUntil, "released", released)
	if released || prev.Host != w.o.Owner.Host {
		// A restart on the same host resumes silently, as it always has;
		// another host or an operator's release is said on the task.
		w.tellTakeOver(ctx, ref, prev, released)
	}
	if err := w.o.Store.SetStatus(ctx, ref, task.Queued, ""); err != nil {
		return false, fmt.Errorf("marking %s queued after taking it over: %w", ref, err)
	}
	return true, nil
}

// tellTakeOver posts who held ref before this process took it over; a
// comment that cannot be posted is logged.
func (w *Worker) tellTakeOver(ctx context.Context, ref task.Ref, prev store.Record, released bool) {
	log := w.log(ref)
	from := fmt.Sprintf("%s, pid %d", prev.Host, prev.PID)
	if prev.Instance != "" {
		from += ", instance " + prev.Instance
	}
	body, err := report.TakenOver(report.TakeOver{From: from, To: w.o.Owner.Host, Released: released,
		Until: prev.LeaseUntil.UTC().Format(time.DateTime + " UTC")})
	if err == nil {
		post := report.NewPoster(report.PosterOptions{Commenter: w.o.Forge, Ref: ref, Redact: w.o.Redact, Logger: log})
		err = post.PostAll(ctx, engine.Key{}, body)
	}
	if err != nil {
		log.Error("posting that the task was taken over", "error", err)
	}
}
