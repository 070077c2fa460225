package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/sanitize"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// ownAccount is logged when a task's author is the account the agent acts
// as (someone trying it with their own token): what they write on the task
// is taken for the agent's own and never heard.
const ownAccount = "the task's author is the account the agent acts as: their comments are taken for the agent's own " +
	"and not heard; give the agent an account of its own (a GitHub App, a GitLab project access token)"

// finishTimeout bounds the last forge calls of a task (final labels and
// comment), which run even when the task's context has ended.
const finishTimeout = 2 * time.Minute

// Process runs the agent on one claimed task and leaves it in a final state.
// Failures are reported on the task and in the store, not returned: one
// task's failure never stops the others. What it returns is a failure of
// the store (store.IsFailure): nothing more is durable, so the worker stops;
// the task, told so in a comment, keeps its last record and checkpoint for
// the next run.
func (w *Worker) Process(ctx context.Context, ref task.Ref) error {
	_, err := w.process(ctx, ref)
	return err
}

// settlement is what becomes of a task's job once process is done with it.
type settlement int

const (
	// ack: the task left the consumer's hands (done, failed, stopped,
	// paused, awaiting a reply, or not ours to run).
	ack settlement = iota
	// leave: the task stays queued for a consumer to resume from its
	// checkpoint (its run was interrupted by the shutdown, or the store
	// failed): the job stays unsettled, delivered again once this
	// consumer goes away.
	leave
	// release: a final label could not be set and the task was left
	// queued for the transition to be tried again: with Redeliver the job
	// is given back at once (and dead-lettered if that keeps happening),
	// else acked for the store backlog to bring the task back.
	release
)

// process is Process, saying what becomes of the task's job.
func (w *Worker) process(ctx context.Context, ref task.Ref) (settlement, error) {
	ctx, drop := context.WithCancelCause(ctx)
	defer drop(nil)
	h := &inHand{cancel: drop}
	if _, busy := w.active.LoadOrStore(ref, h); busy {
		return ack, nil
	}
	w.begun.Add(1)
	defer w.active.Delete(ref)
	log := w.log(ref)
	post := w.poster(ref, log)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	// Only a task still queued (or running under a holder that lost it):
	// another process may have run and finished it since the job was
	// queued (two processes' backlogs queue the same task), and a finished
	// task is claimable again by Claim.
	// Who queued it: with a store shared by hosts of different names, the
	// host that took the task on the forge (and holds it there) may not be
	// the one whose claim the store grants; the hold follows the claim.
	var prev store.Record
	if w.o.ForgeLease > 0 { // no hold on the forge to move otherwise
		prev, _ = w.o.Store.Get(ctx, ref)
	}
	rec, err := w.o.Store.ClaimQueued(ctx, ref, w.o.Owner)
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errHoldLost) {
			// A beat found this host's hold gone and ended the run while
			// it claimed: the task is another host's (as stillOurs says).
			log.Warn("this host no longer holds the task; letting it go", "reason", cause.Error())
			return ack, failure(w.setStatus(context.WithoutCancel(ctx), ref, task.Stopped, "let go: "+cause.Error()))
		}
		if errors.Is(err, store.ErrNotHeld) || errors.Is(err, store.ErrNotFound) {
			log.Info("job is stale; task is no longer queued", "why", err.Error())
			return ack, nil
		}
		if !errors.Is(err, store.ErrClaimed) {
			log.Error("claiming task for work", "error", err)
		}
		if err = failure(err); err != nil {
			w.move(fctx, ending{ref: ref, post: post, log: log, reason: w.o.Redact(err.Error()), lost: errors.Is(err, store.ErrLost)}, storeFailed)
			return leave, err
		}
		return ack, nil
	}
	w.claimed(h) // the heartbeats keep its lease and its hold from now on
	if prev.Host != "" && prev.Host != w.o.Owner.Host {
		w.moveHold(ctx, ref, prev)
	}
	if how, ok, err := w.stillOurs(ctx, ref); !ok {
		return how, failure(err)
	}
	if begun := rec.Attempts - 1; w.exhausted(begun) {
		// Every run the round began ended with the task in hand: this
		// one would too.
		return ack, w.giveUp(ctx, ref, begun)
	}
	in, skip, err := w.load(ctx, ref, post)
	if skip {
		return ack, failure(err)
	}
	var ws Workspace
	if err == nil && w.o.Workspaces != nil {
		if ws, err = w.o.Workspaces.Open(ctx, in.Task); err == nil {
			defer ws.Close(true) // a no-op once the row closed it
			in.Tools, in.Setup = ws.Tools(), ws.Setup()
			if c := ws.Checker(); c != nil {
				in.Checks, in.CheckRounds = c, w.o.CheckRounds
			}
		} else {
			err = fmt.Errorf("preparing the workspace of %s: %w", ref, err)
		}
	}
	var out engine.Outcome
	if err == nil {
		log.Info("working on task", "title", in.Task.Title, "url", in.Task.URL)
		started := w.o.Now()
		out, err = w.o.Agent.Run(ctx, in)
		took := w.o.Now().Sub(started)
		log.Info("task run ended", "end", out.End, "calls", out.Calls, "duration", took.String(), "error", err)
		if w.o.Ran != nil {
			w.o.Ran(endOf(out, err), took)
		}
	}
	h.claimed.Store(0) // the run is over: what follows is its ending
	f := ending{ref: ref, post: post, log: log, labels: in.Task.Labels, reason: w.o.Redact(sanitize.Hosts(out.Reason)), calls: out.Calls,
		reported: out.Reported, mark: max(out.Mark, in.Mark), ws: ws, checks: out.Checks, ran: out.Ran, keys: &out.Keys}
	return w.end(ctx, fctx, f, out, err)
}

// end moves the task by how its run ended (out, or err); ctx is the run's,
// fctx the one to finish under. It says what becomes of the task's job (see
// process) and returns a failure of the store.
func (w *Worker) end(ctx, fctx context.Context, f ending, out engine.Outcome, err error) (settlement, error) {
	ev := runFailed
	switch {
	case errors.Is(context.Cause(ctx), errLeaseLost), errors.Is(err, store.ErrClaimed):
		// Released, or taken over: the task and its row (in the shared
		// store) are someone else's now.
		f.log.Warn("run ended: this process lost the task's lease; leaving the task to its new holder", "error", err)
		return ack, nil
	case errors.Is(context.Cause(ctx), errHoldLost):
		// Another host took the task up through the forge: it is theirs
		// to finish, and this host's own row says so.
		return ack, failure(w.setStatus(fctx, f.ref, task.Stopped, "let go: "+context.Cause(ctx).Error()))
	case store.IsFailure(err):
		f.reason, f.lost = w.o.Redact(err.Error()), errors.Is(err, store.ErrLost)
		w.move(fctx, f, storeFailed)
		return leave, err
	case errors.Is(err, forge.ErrAuth):
		w.refuse(f.ref, err)
		f.reason = w.o.Redact(sanitize.Hosts(err.Error()))
		_, err := w.move(fctx, f, authRefused)
		return leave, failure(err)
	case err != nil && (ctx.Err() != nil || isClosed(w.o.Shutdown)):
		// Cut off after the shutdown grace, or failing while the process
		// shuts down: resumed by the next run, not failed.
		f.log.Warn("run ended by an error during shutdown; it resumes on the next run", "error", err)
		ev = runInterrupted
	case err != nil:
		// What failed, without the host it failed at (an internal GitHub
		// Enterprise or model server): the log has the whole error.
		f.reason = w.o.Redact(sanitize.Hosts(err.Error()))
		ev = runBroke
	case out.End == engine.Done:
		if derr := w.deliver(fctx, f, out); derr != nil {
			// Done only once the work exists on the forge.
			f.reason = w.o.Redact(sanitize.Hosts("delivering the work failed: " + derr.Error()))
			f.reported = false
			break
		}
		moved, err := w.finishRound(fctx, f, out)
		return settlementOf(moved), failure(err)
	case out.End == engine.Asked && out.Question != nil:
		f.question = out.Question
		moved, err := w.askOnTask(fctx, f)
		return settlementOf(moved), failure(err)
	case runEnds[out.End] != "":
		ev = runEnds[out.End]
	default:
		f.reason = fmt.Sprintf("the run ended without a known outcome (%q)", out.End)
	}
	moved, err := w.move(fctx, f, ev)
	if ev == runInterrupted {
		return leave, failure(err)
	}
	return settlementOf(moved), failure(err)
}

// endOf names how a run ended: its End, or "error" for a system error.
func endOf(out engine.Outcome, err error) string {
	if err != nil || out.End == "" {
		return "error"
	}
	return string(out.End)
}

// settlementOf is the settlement of a job whose task's final transition was
// made (ack) or left for another try (release).
func settlementOf(moved bool) settlement {
	if moved {
		return ack
	}
	return release
}

// load reads the task and its comments and checks it is still ours to run.
// With skip, the task was closed and moved; err is then the store's.
func (w *Worker) load(ctx context.Context, ref task.Ref, post *report.Poster) (engine.Input, bool, error) {
	t, err := w.o.Forge.Get(ctx, ref)
	if err != nil {
		return engine.Input{}, false, fmt.Errorf("reading %s: %w", ref, err)
	}
	if t.State != "open" {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer cancel()
		_, err := w.move(fctx, ending{ref: ref, log: w.log(ref), labels: t.Labels, reason: "closed before work started"}, closedEarly)
		return engine.Input{}, true, err
	}
	comments, err := w.o.Forge.Comments(ctx, ref)
	if err != nil {
		return engine.Input{}, false, fmt.Errorf("reading comments of %s: %w", ref, err)
	}
	bot, err := w.botName(ctx)
	if err != nil {
		return engine.Input{}, false, err
	}
	if strings.EqualFold(t.Author, bot) {
		// Its comments would all be taken for the agent's own.
		w.log(ref).Warn(ownAccount, "account", bot)
	}
	// One audience rule for the first prompt, the checkpoints and a later
	// round's prompt: what others wrote is counted, never shown.
	who := w.audience(t, bot, true)
	shown, ignored, err := who.Shown(ctx, withoutHolders(comments, bot))
	if err != nil {
		return engine.Input{}, false, fmt.Errorf("sorting the comments of %s: %w", ref, err)
	}
	cv := w.o.Conversation
	in := engine.Input{Task: t, Comments: shown, Mark: engine.MarkOf(comments), Ignored: ignored, BotName: bot, Post: post,
		Questions: cv.Enabled && cv.Questions && w.o.Labels.Awaiting != "", Page: w.page(ref)}
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

// withoutHolders is comments without the bot's holder comments: they are
// the daemon's bookkeeping (the forge lease), not something said on the
// task, and the model is not shown them.
func withoutHolders(comments []task.Comment, bot string) []task.Comment {
	var out []task.Comment
	for _, c := range comments {
		if _, ok := report.HolderOf(c.Body); ok && strings.EqualFold(c.Author, bot) {
			continue
		}
		out = append(out, c)
	}
	return out
}
