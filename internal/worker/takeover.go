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
//     in a comment on the task; a task whose round has begun MaxAttempts
//     runs is given up instead (giveUp);
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
	w.moveHold(ctx, ref, prev)
	if w.exhausted(prev.Attempts) {
		// Its runs all ended in hand, its holder's too: given up here
		// rather than queued (and said taken over) once more, unless
		// another host holds it on the forge (its run lets it go).
		if ok, _, err := w.holds(ctx, ref); err == nil && ok {
			return false, w.giveUp(ctx, ref, prev.Attempts)
		}
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
	body, err := w.o.Lang.TakenOver(report.TakeOver{From: from, To: w.o.Owner.Host, Released: released,
		Until: prev.LeaseUntil.UTC().Format(time.DateTime + " UTC")})
	if err == nil {
		post := w.poster(ref, log)
		err = post.PostAll(ctx, engine.Key{}, body)
	}
	if err != nil {
		log.Error("posting that the task was taken over", "error", err)
	}
}

// exhausted reports whether a round that has begun begun runs of its task
// may begin no more (MaxAttempts). A run begun is one that a job delivered
// again, a takeover's new job or a resume started: each ended with the
// task still in hand, or it would not be asked to run again.
func (w *Worker) exhausted(begun int) bool {
	return w.o.MaxAttempts > 0 && begun >= w.o.MaxAttempts
}

// giveUp fails ref, which this process holds, after begun runs: the
// dead-letter rule with leases. The failure comment says so once (the
// process that claimed the task is the only one to say it); the checkpoint
// is kept, as for any system error, so that asking again resumes from it.
// It returns a failure of the store.
func (w *Worker) giveUp(ctx context.Context, ref task.Ref, begun int) error {
	log := w.log(ref)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	post := w.poster(ref, log)
	var labels []string
	if t, err := w.o.Forge.Get(fctx, ref); err == nil {
		labels = t.Labels
	}
	reason := givenUp(begun) + fmt.Sprintf(": each run ended with the task still in hand (the process running it died, "+
		"was killed or shut down, or lost the task's lease), and the queue's max_deliveries allows %d", w.o.MaxAttempts)
	log.Error("giving the task up: its runs keep ending in hand", "attempts", begun, "max_deliveries", w.o.MaxAttempts)
	_, err := w.move(fctx, ending{ref: ref, post: post, log: log, labels: labels, reason: reason}, runBroke)
	return failure(err)
}

// givenUp says how many runs a task was given up after.
func givenUp(begun int) string {
	switch begun {
	case 0:
		return "Given up before its first run"
	case 1:
		return "Given up after 1 attempt"
	}
	return fmt.Sprintf("Given up after %d attempts", begun)
}
