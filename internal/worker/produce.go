package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/queue"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Produce discovers tasks carrying the bot label, claims each one (the
// labels first: processing added, the bot label taken, the forge deciding
// between hosts; then the store) and queues it, after the new rounds of
// conversations (Replies). It returns how many it queued. A task that
// fails to be claimed is logged and left for the next pass; only a failed
// discovery or queueing, or a failure of the store, is an error. Tasks
// left in processing by a holder that is gone are put up again (reclaim)
// and claimed with them.
func (w *Worker) Produce(ctx context.Context) (int, error) {
	p, err := w.Pass(ctx)
	return p.Queued, err
}

// PassResult is what one discovery pass did.
type PassResult struct {
	// Queued is how many tasks it claimed and queued (new rounds of
	// conversations included).
	Queued int
	// Left is how many tasks it found and did not try to claim because
	// every worker of the process was taken (FairClaim): they stay
	// labelled for the next pass or another host.
	Left int
}

// Pass is Produce, saying also how many tasks it left for want of a free
// worker.
func (w *Worker) Pass(ctx context.Context) (PassResult, error) {
	var p PassResult
	found, err := w.o.Forge.Discover(ctx, w.o.Labels.Bot)
	if err != nil {
		return p, fmt.Errorf("discovering tasks labelled %q: %w", w.o.Labels.Bot, err)
	}
	refs := make([]task.Ref, 0, len(found))
	for _, t := range found {
		refs = append(refs, t.Ref)
	}
	// Tasks left in processing come back with the bot label: claimed in
	// this pass, after those found asking.
	for _, ref := range w.reclaim(ctx) {
		if !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	refs = append(refs, w.unpaused(ctx)...)
	if p.Queued, err = w.Replies(ctx); err != nil {
		return p, err
	}
	for i, ref := range refs {
		if ctx.Err() != nil {
			return p, ctx.Err()
		}
		if w.o.FairClaim && w.held() >= w.o.Workers {
			p.Left = len(refs) - i
			w.o.Logger.Debug("every worker is taken; leaving the other tasks for the next pass", "left", p.Left)
			break
		}
		ok, err := w.claim(ctx, ref)
		if store.IsFailure(err) {
			return p, err
		}
		if err != nil {
			logFailure(ctx, w.log(ref), "claiming task", "error", err)
			continue
		}
		if !ok {
			continue
		}
		p.Queued++
		if err := w.enqueue(ctx, ref); err != nil {
			return p, err
		}
	}
	return p, nil
}

// Drain makes discovery passes until one leaves no task for want of a
// free worker, waiting for a worker to finish a job between passes: with
// FairClaim this is how `run` still processes every labelled task it
// finds, a few at a time. The consumers must be running. It returns how
// many tasks it queued.
func (w *Worker) Drain(ctx context.Context) (int, error) {
	n := 0
	for {
		p, err := w.Pass(ctx)
		n += p.Queued
		if err != nil || p.Left == 0 {
			return n, err
		}
		select {
		case <-w.freed:
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
}

// Freed gets a signal when one of this process's consumers finishes a job
// the process queued (FairClaim): a pass that left tasks may claim again.
// Signals do not pile up: one waits at most.
func (w *Worker) Freed() <-chan struct{} { return w.freed }

// held is how many tasks this process queued (FairClaim) that its
// consumers have not finished.
func (w *Worker) held() int {
	n := 0
	w.queued.Range(func(any, any) bool { n++; return true })
	return n
}

// finished counts off ref's job, which the consumers are done with
// (FairClaim), and signals a free worker.
func (w *Worker) finished(ref task.Ref) {
	if !w.o.FairClaim {
		return
	}
	w.queued.Delete(ref)
	select {
	case w.freed <- struct{}{}:
	default:
	}
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
	if w.o.FairClaim {
		w.queued.Store(ref, struct{}{})
	}
	return nil
}

// claim takes the task for this process. It reports false when someone else
// holds it or it no longer asks for the agent.
func (w *Worker) claim(ctx context.Context, ref task.Ref) (bool, error) {
	log := w.log(ref)
	// The discovery may be stale: another process may have claimed and even
	// finished the task since. Only a task that still carries the bot label
	// is asked for; taking that label (take) decides who works on it.
	t, err := w.o.Forge.Get(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("re-reading %s before claiming it: %w", ref, err)
	}
	rec, recErr := w.o.Store.Get(ctx, ref)
	if err := failure(recErr); err != nil {
		return false, fmt.Errorf("reading %s in the store: %w", ref, err)
	}
	// A paused task whose paused label is gone resumes without the bot
	// label, unless the forge shows it moved on since: another host's
	// store may be the one that knows (its processing or a final label).
	resuming := recErr == nil && rec.Status == task.Paused && w.o.Labels.Paused != "" && !t.HasLabel(w.o.Labels.Paused) &&
		!w.movedOn(t)
	if resuming && !t.HasLabel(w.o.Labels.Bot) {
		if resuming, err = w.pausedHere(ctx, ref); err != nil {
			return false, err
		}
	} else if resuming {
		// The bot label the bot itself added is a host asking again to
		// resume (below): read as a request, it would let a host whose
		// store says paused from an earlier pause win the take from the
		// one that paused it last and holds its checkpoint.
		if ok, err := w.askedAgainElsewhere(ctx, ref); err != nil || ok {
			return false, err
		}
	}
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
	} else if !t.HasLabel(w.o.Labels.Bot) {
		// Resuming is asking again: the bot label, added by the bot,
		// puts the task up for the forge to arbitrate like any request,
		// since another host's store may say paused too.
		if err := w.o.Forge.AddLabel(ctx, ref, w.o.Labels.Bot); err != nil {
			return false, fmt.Errorf("asking again to resume %s: %w", ref, err)
		}
		t.Labels = append(slices.Clone(t.Labels), w.o.Labels.Bot)
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

// take holds t for a round of work (event claimed or replied). The forge
// arbitrates between every process on every host, whatever store each
// uses: the processing label is added, then the request label (bot, or
// awaiting) is taken (forge.Labeler.TakeLabel), and only the process whose
// removal took it goes on; then the store claims the task and says
// queued. A process that finds the request gone (another took it) or
// loses the race returns false having written nothing else: not the
// processing label (the winner's), no comment, no row. So a task always
// carries a label saying where it stands, and a row in a store says the
// task was won: a crash before the take leaves nothing to resume, one
// after it a row its host resumes as its own.
// When the processing label cannot be added, a claimed task records why as
// failed (an awaiting one stays awaiting) and the error is returned; the
// request label is still there, so the next pass tries again. When the
// take fails for another reason than ErrLabelAbsent, nothing is recorded
// and the error is returned: the label is still there, or someone took it
// (the task then waits in processing for the vanished-holder rule). When the store refuses the claim after the take,
// the task is given back (giveBack).
func (w *Worker) take(ctx context.Context, t task.Task, ev event, undo task.Status) (bool, error) {
	ref, log := t.Ref, w.log(t.Ref)
	tr := lifecycle[ev]
	if l := w.o.Labels.Of(tr.remove); !t.HasLabel(l) {
		log.Info("task no longer carries its request label; skipping", "label", l)
		return false, nil
	}
	all, err := w.relabel(ctx, ending{ref: ref, log: log, labels: t.Labels}, tr)
	if errors.Is(err, forge.ErrLabelAbsent) {
		log.Info("another process took the task first; leaving it to it", "label", w.o.Labels.Of(tr.remove))
		w.unlabelLost(ctx, ref, tr)
		return false, nil
	}
	if err != nil {
		err = fmt.Errorf("claiming %s: %w", ref, err)
		if undo == task.Failed && !errors.Is(err, errTake) {
			// The processing label was refused: a row that says why. A
			// take that failed may have been another host's win: no row.
			if _, cerr := w.o.Store.Claim(ctx, ref, w.o.Owner); cerr == nil {
				w.setStatus(ctx, ref, undo, err.Error())
			}
		}
		return false, err
	}
	if !all {
		// Keep going: the task is ours (processing, and the request
		// taken); its finish removes what is left.
		log.Warn("could not remove every label while claiming")
	}
	if _, err := w.o.Store.Claim(ctx, ref, w.o.Owner); err != nil {
		if errors.Is(err, store.ErrClaimed) {
			// The request was made again while a process sharing this
			// store works on the task: that run answers it.
			log.Info("task is held by another process of this store; it keeps it")
			return false, nil
		}
		err = fmt.Errorf("claiming %s in the store: %w", ref, err)
		w.giveBack(ctx, ref, tr)
		return false, err
	}
	// The holder comment comes before the row says queued: a process of
	// this host that shares the store may claim a queued row (Backlog)
	// and then asks the forge who holds it (stillOurs), which, with no
	// holder comment yet, would say nobody.
	w.postHolder(ctx, ref)
	if err := w.o.Store.SetStatus(ctx, ref, tr.to, ""); err != nil {
		return false, fmt.Errorf("marking %s queued: %w", ref, err)
	}
	return true, nil
}

// pausedHere reports whether this host paused ref last (the newest pause
// comment names it): only that host resumes it by asking again, since
// another host's store may say paused too, from an earlier pause.
func (w *Worker) pausedHere(ctx context.Context, ref task.Ref) (bool, error) {
	comments, err := w.o.Forge.Comments(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("reading who paused %s: %w", ref, err)
	}
	bot, err := w.botName(ctx)
	if err != nil {
		return false, err
	}
	for i := len(comments) - 1; i >= 0; i-- {
		if c := comments[i]; c.Author == bot {
			if host, ok := report.PausedOn(c.Body); ok {
				if host != w.o.Owner.Host {
					w.log(ref).Info("another host paused the task last; it resumes it", "host", host)
				}
				return host == w.o.Owner.Host, nil
			}
		}
	}
	// Paused by a version that did not name the host: this store's word.
	return true, nil
}

// askedAgainElsewhere reports whether the bot label on a paused task is
// the bot's own (a host asking again to resume it) and another host paused
// it last: that host resumes it. A bot label a person added is theirs to
// ask with, and any host may take it up.
func (w *Worker) askedAgainElsewhere(ctx context.Context, ref task.Ref) (bool, error) {
	labeler, err := w.o.Forge.LabeledBy(ctx, ref, w.o.Labels.Bot)
	if err != nil {
		return false, fmt.Errorf("reading who labelled %s: %w", ref, err)
	}
	bot, err := w.botName(ctx)
	if err != nil || !strings.EqualFold(labeler, bot) {
		return false, err
	}
	here, err := w.pausedHere(ctx, ref)
	return !here, err
}

// movedOn reports whether t carries a label a later round set: processing
// (someone works on it) or a final one. A store whose row says paused is
// then behind: another host took the task up again since.
func (w *Worker) movedOn(t task.Task) bool {
	ls := w.o.Labels
	for _, l := range []string{ls.Processing, ls.Done, ls.Failed, ls.Stopped, ls.Awaiting} {
		if l != "" && t.HasLabel(l) {
			return true
		}
	}
	return false
}

// unlabelLost undoes the processing label a lost take added when the
// winner's round has already ended: t read before the winner took it, the
// winner ran and finished meanwhile (its final label is on the task), and
// the label added since says "processing" of a task no one works on. While
// the winner works the label is its own and stays. Failures are logged.
func (w *Worker) unlabelLost(ctx context.Context, ref task.Ref, tr transition) {
	processing := w.o.Labels.Of(tr.add)
	if processing == "" {
		return
	}
	t, err := w.o.Forge.Get(ctx, ref)
	if err != nil {
		w.log(ref).Warn("reading a task lost to another process", "error", err)
		return
	}
	ls := w.o.Labels
	ended := false
	for _, l := range []string{ls.Done, ls.Failed, ls.Stopped, ls.Awaiting} {
		ended = ended || l != "" && t.HasLabel(l)
	}
	if !ended || !t.HasLabel(processing) {
		return
	}
	if err := w.o.Forge.RemoveLabel(ctx, ref, processing); err != nil {
		w.log(ref).Warn("removing the processing label a lost take left on a finished task", "error", err)
		return
	}
	w.log(ref).Info("the task was finished by the process that took it; removed the processing label this one added")
}

// giveBack puts a task taken on the forge, which the store then refused,
// back up for any process to take: the processing label goes first (once
// the request is back, another process may add its own), then the
// request label comes back. Failures are logged: a task left in processing
// waits for the vanished-holder rule.
func (w *Worker) giveBack(ctx context.Context, ref task.Ref, tr transition) {
	log := w.log(ref)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if err := w.o.Forge.RemoveLabel(ctx, ref, w.o.Labels.Of(tr.add)); err != nil {
		log.Error("giving the task back: removing the processing label", "error", err)
		return
	}
	if err := w.o.Forge.AddLabel(ctx, ref, w.o.Labels.Of(tr.remove)); err != nil {
		log.Error("giving the task back: adding its request label again", "error", err)
		return
	}
	log.Warn("the store refused the claim; the task is given back to be taken again")
}

// unpaused lists paused tasks in the store whose paused label may have been
// removed; claim checks each on the forge.
func (w *Worker) unpaused(ctx context.Context) []task.Ref {
	if w.o.Labels.Paused == "" {
		return nil
	}
	recs, err := w.o.Store.List(ctx)
	if err != nil {
		logFailure(ctx, w.o.Logger, "listing paused tasks", "error", err)
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

// ours reports whether this process already holds the task: it claimed
// it last, and the row says queued or running.
func (w *Worker) ours(rec store.Record) bool {
	return (rec.Status == task.Queued || rec.Status == task.Running) &&
		rec.Host == w.o.Owner.Host && rec.PID == w.o.Owner.PID && rec.Instance == w.o.Owner.Instance
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
	body, err := w.o.Lang.Refused(labeler, w.o.Labels.Bot)
	if err == nil {
		post := w.poster(t.Ref, log)
		err = post.PostAll(ctx, engine.Key{}, body)
	}
	if err != nil {
		log.Error("posting why the task was refused", "error", err)
	}
	return false, nil
}
