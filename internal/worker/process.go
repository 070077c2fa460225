package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/coding-agent/coding-agent/internal/agent"
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
func (w *Worker) Process(ctx context.Context, ref task.Ref, stopping <-chan struct{}) {
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
	var out agent.Outcome
	if err == nil {
		log.Info("working on task", "title", in.Task.Title)
		started := time.Now()
		out, err = w.o.Agent.Run(ctx, in)
		log.Info("task run ended", "status", out.Status, "turns", out.Turns, "duration", time.Since(started).String(), "error", err)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	switch {
	case err != nil && (errors.Is(err, agent.ErrInterrupted) || isClosed(stopping) || ctx.Err() != nil):
		w.interrupted(fctx, ref, post, out.Turns, log)
	case err != nil:
		// A system error: keep the checkpoint, so a retry resumes.
		w.fail(fctx, ref, post, err.Error(), log)
	case out.Status == task.Done:
		w.done(fctx, ref, log)
	default:
		w.fail(fctx, ref, post, out.Reason, log)
		if err := w.o.Store.ClearCheckpoint(fctx, ref); err != nil {
			log.Error("clearing checkpoint", "error", err)
		}
	}
}

// load reads the task and its comments and checks it is still ours to run.
func (w *Worker) load(ctx context.Context, ref task.Ref, post *report.Poster) (agent.Input, bool, error) {
	t, err := w.o.Forge.Get(ctx, ref)
	if err != nil {
		return agent.Input{}, false, fmt.Errorf("reading %s: %w", ref, err)
	}
	if t.State != "open" {
		w.log(ref).Info("task was closed before work started")
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer cancel()
		w.setStatus(fctx, ref, task.Stopped, "closed before work started")
		w.relabel(fctx, ref, "", w.o.Labels.Processing)
		return agent.Input{}, true, nil
	}
	comments, err := w.o.Forge.Comments(ctx, ref)
	if err != nil {
		return agent.Input{}, false, fmt.Errorf("reading comments of %s: %w", ref, err)
	}
	bot := w.o.BotName
	if bot == "" {
		if bot, err = w.o.Forge.BotUser(ctx); err != nil {
			return agent.Input{}, false, fmt.Errorf("learning the bot's user name: %w", err)
		}
	}
	return agent.Input{Task: t, Comments: comments, BotName: bot, Post: post}, false, nil
}

func (w *Worker) done(ctx context.Context, ref task.Ref, log *slog.Logger) {
	w.relabel(ctx, ref, w.o.Labels.Done, w.o.Labels.Processing)
	w.setStatus(ctx, ref, task.Done, "")
	if err := w.o.Store.ClearCheckpoint(ctx, ref); err != nil {
		log.Error("clearing checkpoint", "error", err)
	}
	log.Info("task done")
}

// fail reports the failure on the task: a comment, then failed_label added
// and processing removed. Never the done label.
func (w *Worker) fail(ctx context.Context, ref task.Ref, post *report.Poster, reason string, log *slog.Logger) {
	log.Error("task failed", "reason", reason)
	w.setStatus(ctx, ref, task.Failed, reason)
	if body, err := report.Failed(reason, w.o.Labels.Failed, w.o.Labels.Bot); err != nil {
		log.Error("rendering failure comment", "error", err)
	} else if err := post.Post(ctx, body); err != nil {
		log.Error("posting failure comment", "error", err)
	}
	w.relabel(ctx, ref, w.o.Labels.Failed, w.o.Labels.Processing)
}

// interrupted leaves the task for the next run: queued in the store with its
// checkpoint and still labelled processing, so the next run (or consumer)
// sharing this state directory resumes it and no other claims it.
func (w *Worker) interrupted(ctx context.Context, ref task.Ref, post *report.Poster, turn int, log *slog.Logger) {
	log.Info("task interrupted at a checkpoint; it resumes on the next run", "turn", turn)
	w.setStatus(ctx, ref, task.Queued, "")
	if body, err := report.Interrupted(turn); err == nil {
		if err := post.Post(ctx, body); err != nil {
			log.Error("posting interruption comment", "error", err)
		}
	}
}

// relabel adds one label, then removes another: a crash in between leaves
// both visible rather than neither.
func (w *Worker) relabel(ctx context.Context, ref task.Ref, add, remove string) {
	if add != "" {
		if err := w.o.Forge.AddLabel(ctx, ref, add); err != nil {
			w.log(ref).Error("adding label", "label", add, "error", err)
		}
	}
	if remove != "" {
		if err := w.o.Forge.RemoveLabel(ctx, ref, remove); err != nil {
			w.log(ref).Error("removing label", "label", remove, "error", err)
		}
	}
}

func (w *Worker) setStatus(ctx context.Context, ref task.Ref, s task.Status, msg string) {
	if err := w.o.Store.SetStatus(ctx, ref, s, msg); err != nil {
		w.log(ref).Error("recording task status", "status", s, "error", err)
	}
}
