package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/coding-agent/coding-agent/internal/queue"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Produce discovers tasks carrying the bot label, claims each one (store
// first, atomically, then the labels: processing added, bot removed) and
// queues it, after the new rounds of conversations (Replies). It returns
// how many it queued. A task that fails to be claimed is logged and left for
// the next pass; only a failed discovery or queueing, or a failure of the
// store, is an error.
func (w *Worker) Produce(ctx context.Context) (int, error) {
	found, err := w.o.Forge.Discover(ctx, w.o.Labels.Bot)
	if err != nil {
		return 0, fmt.Errorf("discovering tasks labelled %q: %w", w.o.Labels.Bot, err)
	}
	refs := make([]task.Ref, 0, len(found))
	for _, t := range found {
		refs = append(refs, t.Ref)
	}
	refs = append(refs, w.unpaused(ctx)...)
	n, err := w.Replies(ctx)
	if err != nil {
		return n, err
	}
	for _, ref := range refs {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		ok, err := w.claim(ctx, ref)
		if store.IsFailure(err) {
			return n, err
		}
		if err != nil {
			w.log(ref).Error("claiming task", "error", err)
			continue
		}
		if !ok {
			continue
		}
		n++
		if err := w.enqueue(ctx, ref); err != nil {
			return n, err
		}
	}
	return n, nil
}

// enqueue hands a claimed task to the consumers of this process; without a
// queue, the store's queued status hands it to a consumer sharing the state
// directory.
func (w *Worker) enqueue(ctx context.Context, ref task.Ref) error {
	if w.o.Queue == nil {
		return nil
	}
	if err := w.o.Queue.Put(ctx, queue.Job{Ref: ref, Enqueued: w.o.Now().UTC()}); err != nil {
		return fmt.Errorf("queueing %s: %w", ref, err)
	}
	return nil
}

// claim takes the task for this process. It reports false when someone else
// holds it or it no longer asks for the agent.
func (w *Worker) claim(ctx context.Context, ref task.Ref) (bool, error) {
	log := w.log(ref)
	// The discovery may be stale: another process may have claimed and even
	// finished the task since. Only a task that still carries the bot label
	// is ours; the store claim right after is atomic across processes.
	t, err := w.o.Forge.Get(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("re-reading %s before claiming it: %w", ref, err)
	}
	rec, recErr := w.o.Store.Get(ctx, ref)
	if err := failure(recErr); err != nil {
		return false, fmt.Errorf("reading %s in the store: %w", ref, err)
	}
	// A paused task whose paused label is gone resumes without the bot label.
	resuming := recErr == nil && rec.Status == task.Paused && w.o.Labels.Paused != "" && !t.HasLabel(w.o.Labels.Paused)
	if t.State != "open" || !(t.HasLabel(w.o.Labels.Bot) || resuming) {
		log.Info("task no longer asks for the agent; skipping", "state", t.State)
		return false, nil
	}
	if recErr == nil && w.ours(rec) {
		return false, nil // already queued or running here
	}
	if !resuming {
		if ok, err := w.requested(ctx, t); err != nil || !ok {
			return false, err
		}
	}
	// Final labels of an earlier round go too, so that a task is never seen
	// as done while this round works or fails; so does a pause or stop
	// label left from before: adding the bot label again is the way to
	// resume or restart.
	ok, err := w.take(ctx, t, claimed, task.Failed)
	if ok {
		log.Info("claimed task")
	}
	return ok, err
}

// take holds t for a round of work (event claimed or replied): the store
// first (atomic across processes), then the row's labels, then the store
// says queued. It reports false when another live process holds the task.
// When the processing label cannot be added, the store goes back to undo (a
// failed one records why) and the error is returned; the bot (or awaiting)
// label is still there, so the next pass tries again.
func (w *Worker) take(ctx context.Context, t task.Task, ev event, undo task.Status) (bool, error) {
	ref, log := t.Ref, w.log(t.Ref)
	if _, err := w.o.Store.Claim(ctx, ref, w.o.Owner); err != nil {
		if errors.Is(err, store.ErrClaimed) {
			log.Info("task is held by another process; skipping")
			return false, nil
		}
		return false, fmt.Errorf("claiming %s in the store: %w", ref, err)
	}
	tr := lifecycle[ev]
	if all, err := w.relabel(ctx, ending{ref: ref, log: log, labels: t.Labels}, tr); err != nil {
		err = fmt.Errorf("claiming %s: %w", ref, err)
		why := ""
		if undo == task.Failed {
			why = err.Error()
		}
		w.setStatus(ctx, ref, undo, why)
		return false, err
	} else if !all {
		// Keep going: the task is ours (processing, and held in the
		// store); its finish removes what is left.
		log.Warn("could not remove every label while claiming")
	}
	if err := w.o.Store.SetStatus(ctx, ref, tr.to, ""); err != nil {
		return false, fmt.Errorf("marking %s queued: %w", ref, err)
	}
	return true, nil
}

// unpaused lists paused tasks in the store whose paused label may have been
// removed; claim checks each on the forge.
func (w *Worker) unpaused(ctx context.Context) []task.Ref {
	if w.o.Labels.Paused == "" {
		return nil
	}
	recs, err := w.o.Store.List(ctx)
	if err != nil {
		w.o.Logger.Error("listing paused tasks", "error", err)
		return nil
	}
	var refs []task.Ref
	for _, r := range recs {
		if r.Status == task.Paused {
			refs = append(refs, r.Ref)
		}
	}
	return refs
}

// ours reports whether this process already holds the task.
func (w *Worker) ours(rec store.Record) bool {
	return (rec.Status == task.Queued || rec.Status == task.Running) &&
		rec.Host == w.o.Owner.Host && rec.PID == w.o.Owner.PID
}

// requested reports whether the bot label on t counts as a request: with
// Trust.LabelerNeedsWrite, only from someone with write access or on the
// allow list. Otherwise the label is removed first (so the task is not
// seen again, and a failure to remove it is an error the next pass
// retries) and then one comment says why.
func (w *Worker) requested(ctx context.Context, t task.Task) (bool, error) {
	if !w.o.Trust.LabelerNeedsWrite {
		return true, nil
	}
	log := w.log(t.Ref)
	labeler, err := w.o.Forge.LabeledBy(ctx, t.Ref, w.o.Labels.Bot)
	if err != nil {
		return false, fmt.Errorf("reading who labelled %s: %w", t.Ref, err)
	}
	bot, err := w.botName(ctx)
	if err != nil {
		return false, err
	}
	if ok, err := w.audience(t, bot, true).Trusted(ctx, labeler); err != nil || ok {
		return ok, err
	}
	if err := w.o.Forge.RemoveLabel(ctx, t.Ref, w.o.Labels.Bot); err != nil {
		return false, fmt.Errorf("removing the label an untrusted user added to %s: %w", t.Ref, err)
	}
	log.Warn("the bot label was added by someone without write access; refused and removed", "labeler", labeler)
	body, err := report.Refused(labeler, w.o.Labels.Bot)
	if err == nil {
		post := report.NewPoster(report.PosterOptions{Commenter: w.o.Forge, Ref: t.Ref, Redact: w.o.Redact, Logger: log})
		err = post.PostAll(ctx, body)
	}
	if err != nil {
		log.Error("posting why the task was refused", "error", err)
	}
	return false, nil
}
