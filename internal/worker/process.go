package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// finishTimeout bounds the last forge calls of a task (final labels and
// comment), which run even when the task's context has ended.
const finishTimeout = 2 * time.Minute

// Process runs the agent on one claimed task and leaves it in a final state.
// Failures are reported on the task and in the store, not returned: one
// task's failure never stops the others.
func (w *Worker) Process(ctx context.Context, ref task.Ref) {
	if _, busy := w.active.LoadOrStore(ref, struct{}{}); busy {
		return
	}
	defer w.active.Delete(ref)
	log := w.log(ref)
	if rec, err := w.o.Store.Get(ctx, ref); err == nil && rec.Status != task.Queued && rec.Status != task.Running {
		log.Info("job is stale; task is no longer queued", "status", rec.Status)
		return
	}
	if _, err := w.o.Store.Claim(ctx, ref, w.o.Owner); err != nil {
		if !errors.Is(err, store.ErrClaimed) {
			log.Error("claiming task for work", "error", err)
		}
		return
	}
	post := report.NewPoster(report.PosterOptions{Commenter: w.o.Forge, Ref: ref, Redact: w.o.Redact})
	in, skip, err := w.load(ctx, ref, post)
	if skip {
		return
	}
	var out engine.Outcome
	if err == nil {
		log.Info("working on task", "title", in.Task.Title)
		started := time.Now()
		out, err = w.o.Agent.Run(ctx, in)
		log.Info("task run ended", "end", out.End, "calls", out.Calls, "duration", time.Since(started).String(), "error", err)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	f := ending{ref: ref, post: post, log: log, labels: in.Task.Labels, mark: max(out.Mark, engine.MarkOf(in.Comments))}
	switch {
	case err != nil && ctx.Err() != nil:
		w.interrupted(fctx, f, out.Calls) // cut off after the shutdown grace
	case err != nil:
		// A system error: keep the checkpoint, so a retry resumes.
		w.fail(fctx, f, err.Error(), true)
	case out.End == engine.Paused:
		w.paused(fctx, f, out)
	case out.End == engine.Stopped:
		w.stopped(fctx, f, out)
	case out.End == engine.Interrupted:
		w.interrupted(fctx, f, out.Calls)
	case out.End == engine.Done:
		w.done(fctx, f, out)
	default:
		f.reported = out.Reported
		w.fail(fctx, f, out.Reason, false)
	}
}

// ending is what the finish steps of one task need.
type ending struct {
	ref    task.Ref
	post   *report.Poster
	log    *slog.Logger
	labels []string // the task's labels when work started
	// reported: the run already posted its closing comment (planning mode).
	reported bool
	// mark is the newest comment id the run's context held.
	mark int64
}

// load reads the task and its comments and checks it is still ours to run.
func (w *Worker) load(ctx context.Context, ref task.Ref, post *report.Poster) (engine.Input, bool, error) {
	t, err := w.o.Forge.Get(ctx, ref)
	if err != nil {
		return engine.Input{}, false, fmt.Errorf("reading %s: %w", ref, err)
	}
	if t.State != "open" {
		w.log(ref).Info("task was closed before work started")
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer cancel()
		w.setStatus(fctx, ref, task.Stopped, "closed before work started")
		if err := w.o.Forge.RemoveLabel(fctx, ref, w.o.Labels.Processing); err != nil {
			w.log(ref).Error("removing label", "label", w.o.Labels.Processing, "error", err)
		}
		return engine.Input{}, true, nil
	}
	comments, err := w.o.Forge.Comments(ctx, ref)
	if err != nil {
		return engine.Input{}, false, fmt.Errorf("reading comments of %s: %w", ref, err)
	}
	bot, err := w.botName(ctx)
	if err != nil {
		return engine.Input{}, false, err
	}
	in := engine.Input{Task: t, Comments: comments, BotName: bot, Post: post}
	if conv, ok, err := w.o.Store.LoadConversation(ctx, ref); err != nil {
		return engine.Input{}, false, fmt.Errorf("loading the conversation of %s: %w", ref, err)
	} else if ok {
		in.Rounds = conv.Summaries
	}
	if w.o.NewWatch != nil {
		in.Watch = w.o.NewWatch(t, comments, bot)
	}
	return in, false, nil
}

// done sets the done label (and removes processing, and a bot or failed
// label left from before), then records the task done.
func (w *Worker) done(ctx context.Context, f ending, out engine.Outcome) {
	summary := out.Summary
	if summary == "" {
		summary = out.Comment
	}
	if w.await(ctx, f, summary) {
		return
	}
	if !w.relabel(ctx, f, w.o.Labels.Done, w.o.Labels.Processing, w.o.Labels.Failed) {
		w.finishLater(ctx, f)
		return
	}
	w.setStatus(ctx, f.ref, task.Done, "")
	w.clearCheckpoint(ctx, f)
	f.log.Info("task done")
}

// fail reports the failure on the task: failed_label added and processing
// (and a stale done label) removed, then an error comment. Never the done
// label. keep leaves the checkpoint, so that re-labelling resumes the work.
func (w *Worker) fail(ctx context.Context, f ending, reason string, keep bool) {
	reason = w.o.Redact(reason)
	f.log.Error("task failed", "reason", reason)
	if !w.relabel(ctx, f, w.o.Labels.Failed, w.o.Labels.Processing, w.o.Labels.Done) {
		w.finishLater(ctx, f)
		return
	}
	if f.reported {
		// The closing comment is on the task already.
	} else if body, err := report.Failed(reason, w.o.Labels.Failed, w.o.Labels.Bot); err != nil {
		f.log.Error("rendering failure comment", "error", err)
	} else if err := f.post.Post(ctx, body); err != nil {
		f.log.Error("posting failure comment", "error", err)
	}
	w.setStatus(ctx, f.ref, task.Failed, reason)
	if !keep {
		w.clearCheckpoint(ctx, f)
	}
}

// finishLater leaves a task whose final labels could not be set queued in
// the store: the next pass resumes it from its checkpoint, which returns the
// recorded outcome at once, and tries the labels again.
func (w *Worker) finishLater(ctx context.Context, f ending) {
	f.log.Error("could not set the final labels; the next pass finishes the task")
	w.setStatus(ctx, f.ref, task.Queued, "")
}

// interrupted leaves the task for the next run: queued in the store with its
// checkpoint and still labelled processing, so the next run (or consumer)
// sharing this state directory resumes it and no other claims it.
func (w *Worker) interrupted(ctx context.Context, f ending, turn int) {
	f.log.Info("task interrupted at a checkpoint; it resumes on the next run", "turn", turn)
	w.setStatus(ctx, f.ref, task.Queued, "")
	if body, err := report.Interrupted(turn); err == nil {
		if err := f.post.Post(ctx, body); err != nil {
			f.log.Error("posting interruption comment", "error", err)
		}
	}
}

// paused leaves the task paused with its checkpoint: processing removed
// (the paused label someone added stays), a comment saying how to resume.
// The producer resumes it once the paused label is gone.
func (w *Worker) paused(ctx context.Context, f ending, out engine.Outcome) {
	f.log.Info("task paused at a checkpoint", "calls", out.Calls, "reason", out.Reason)
	w.setStatus(ctx, f.ref, task.Paused, "")
	if err := w.o.Forge.RemoveLabel(ctx, f.ref, w.o.Labels.Processing); err != nil {
		f.log.Error("removing label", "label", w.o.Labels.Processing, "error", err)
	}
	body, err := report.Paused(out.Calls, out.Reason, w.o.Labels.Paused, w.o.Labels.Bot)
	w.postNotice(ctx, f, body, err)
}

// stopped ends the task for good at a checkpoint: never done, processing
// removed, a comment saying why; its checkpoint is dropped, so the bot
// label starts it afresh.
func (w *Worker) stopped(ctx context.Context, f ending, out engine.Outcome) {
	f.log.Info("task stopped at a checkpoint", "calls", out.Calls, "reason", out.Reason)
	w.setStatus(ctx, f.ref, task.Stopped, out.Reason)
	if err := w.o.Forge.RemoveLabel(ctx, f.ref, w.o.Labels.Processing); err != nil {
		f.log.Error("removing label", "label", w.o.Labels.Processing, "error", err)
	}
	body, err := report.Stopped(out.Calls, out.Reason, w.o.Labels.Bot)
	w.postNotice(ctx, f, body, err)
	w.clearCheckpoint(ctx, f)
}

func (w *Worker) postNotice(ctx context.Context, f ending, body string, err error) {
	if err != nil {
		f.log.Error("rendering a notice", "error", err)
		return
	}
	if err := f.post.Post(ctx, body); err != nil {
		f.log.Error("posting a notice", "error", err)
	}
}

// relabel adds the final label, then removes processing (the label the
// task is in), and the bot, opposite final and awaiting labels where the
// task had them, each once. It removes nothing when the addition failed (a
// task keeps a label saying where it stands), and reports whether every
// change was made.
func (w *Worker) relabel(ctx context.Context, f ending, add, processing, opposite string) bool {
	if err := w.o.Forge.AddLabel(ctx, f.ref, add); err != nil {
		f.log.Error("adding label", "label", add, "error", err)
		return false
	}
	ok := true
	remove := []string{processing}
	for _, l := range []string{w.o.Labels.Bot, opposite, w.o.Labels.Awaiting} {
		if l == "" || l == add || l == processing {
			continue
		}
		if slices.Contains(f.labels, l) {
			remove = append(remove, l)
		}
	}
	for _, l := range remove {
		if err := w.o.Forge.RemoveLabel(ctx, f.ref, l); err != nil {
			f.log.Error("removing label", "label", l, "error", err)
			ok = false
		}
	}
	return ok
}

func (w *Worker) clearCheckpoint(ctx context.Context, f ending) {
	if err := w.o.Store.ClearCheckpoint(ctx, f.ref); err != nil {
		f.log.Error("clearing checkpoint", "error", err)
	}
}

func (w *Worker) setStatus(ctx context.Context, ref task.Ref, s task.Status, msg string) {
	if err := w.o.Store.SetStatus(ctx, ref, s, msg); err != nil {
		w.log(ref).Error("recording task status", "status", s, "error", err)
	}
}
