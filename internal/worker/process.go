package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/sanitize"
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
	post := report.NewPoster(report.PosterOptions{Commenter: w.o.Forge, Ref: ref, Redact: w.o.Redact, Logger: log})
	in, skip, err := w.load(ctx, ref, post)
	if skip {
		return
	}
	var out engine.Outcome
	if err == nil {
		log.Info("working on task", "title", in.Task.Title)
		started := w.o.Now()
		out, err = w.o.Agent.Run(ctx, in)
		log.Info("task run ended", "end", out.End, "calls", out.Calls, "duration", w.o.Now().Sub(started).String(), "error", err)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	f := ending{ref: ref, post: post, log: log, labels: in.Task.Labels, reason: w.o.Redact(sanitize.Hosts(out.Reason)), calls: out.Calls,
		reported: out.Reported, mark: max(out.Mark, in.Mark)}
	switch {
	case err != nil && (ctx.Err() != nil || isClosed(w.o.Shutdown)):
		// Cut off after the shutdown grace, or failing while the process
		// shuts down: resumed by the next run, not failed.
		log.Warn("run ended by an error during shutdown; it resumes on the next run", "error", err)
		w.move(fctx, f, runInterrupted)
	case err != nil:
		// What failed, without the host it failed at (an internal GitHub
		// Enterprise or model server): the log has the whole error.
		f.reason = w.o.Redact(sanitize.Hosts(err.Error()))
		w.move(fctx, f, runBroke)
	case out.End == engine.Done:
		w.finishRound(fctx, f, out)
	case out.End == engine.Failed:
		w.move(fctx, f, runFailed)
	case out.End == engine.Paused:
		w.move(fctx, f, runPaused)
	case out.End == engine.Stopped:
		w.move(fctx, f, runStopped)
	case out.End == engine.Interrupted:
		w.move(fctx, f, runInterrupted)
	default:
		f.reason = fmt.Sprintf("the run ended without a known outcome (%q)", out.End)
		w.move(fctx, f, runFailed)
	}
}

// load reads the task and its comments and checks it is still ours to run.
func (w *Worker) load(ctx context.Context, ref task.Ref, post *report.Poster) (engine.Input, bool, error) {
	t, err := w.o.Forge.Get(ctx, ref)
	if err != nil {
		return engine.Input{}, false, fmt.Errorf("reading %s: %w", ref, err)
	}
	if t.State != "open" {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer cancel()
		w.move(fctx, ending{ref: ref, log: w.log(ref), labels: t.Labels, reason: "closed before work started"}, closedEarly)
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
	// One audience rule for the first prompt, the checkpoints and a later
	// round's prompt: what others wrote is counted, never shown.
	who := w.audience(t, bot, true)
	shown, ignored, err := who.Shown(ctx, comments)
	if err != nil {
		return engine.Input{}, false, fmt.Errorf("sorting the comments of %s: %w", ref, err)
	}
	in := engine.Input{Task: t, Comments: shown, Mark: engine.MarkOf(comments), Ignored: ignored, BotName: bot, Post: post}
	if conv, ok, err := w.o.Store.LoadConversation(ctx, ref); err != nil {
		return engine.Input{}, false, fmt.Errorf("loading the conversation of %s: %w", ref, err)
	} else if ok {
		in.Rounds = conv.Summaries
	}
	if w.o.NewWatch != nil {
		in.Watch = w.o.NewWatch(who, comments)
	}
	return in, false, nil
}
