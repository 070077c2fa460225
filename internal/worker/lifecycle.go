package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// event is what happens to a task.
type event string

// The events of a task's life.
const (
	claimed           event = "claimed"            // the producer takes a labelled (or unpaused) task
	replied           event = "replied"            // a reply to an awaiting task starts a new round
	reopened          event = "reopened"           // a reply within the window after an announced end starts a new round
	stopAwaiting      event = "stopped awaiting"   // stop (the command, or the stopped label) on a task awaiting a reply
	closedEarly       event = "closed before work" // the item was closed before its run began
	runDone           event = "done"               // the run ended done; no reply is awaited
	roundDone         event = "round done"         // the run ended done; a reply may continue it
	runFailed         event = "failed"             // the run ended failed
	runBroke          event = "system error"       // the run hit a system error; a retry resumes it
	runPaused         event = "paused"             // the run ended at a checkpoint: paused
	runStopped        event = "stopped"            // the run ended at a checkpoint: stopped
	runInterrupted    event = "interrupted"        // the run ended at a checkpoint: the process shuts down
	runAsked          event = "asked"              // the run ended on a server's question: the task awaits an answer
	unanswered        event = "unanswered"         // nobody answered the server's question within the timeout
	conversationEnded event = "conversation ended" // a completion keyword, the timeout or closing ended it
	storeFailed       event = "store failed"       // the state store cannot be written: the worker stops
	authRefused       event = "forge refused"      // the forge refuses the credentials: a later run resumes it
)

// runEnds are the events a run's end causes, but done's: that one
// delivers the work first, and is runDone or roundDone as the
// conversation goes on or not (finishRound).
var runEnds = map[engine.End]event{
	engine.Failed:      runFailed,
	engine.Paused:      runPaused,
	engine.Stopped:     runStopped,
	engine.Interrupted: runInterrupted,
}

// notice is the comment a transition posts: its name (in the comment's
// key) and how it is written, in the comments' language.
type notice struct {
	name   string
	render func(w *Worker, f ending) (string, error)
}

// The notices; a transition without one (nil) posts nothing.
var (
	failureNotice = &notice{"failed", func(w *Worker, f ending) (string, error) {
		evidence, err := f.evidence(w.o.Lang)
		if err != nil {
			return "", err
		}
		return w.o.Lang.Failed(f.reason, w.o.Labels.Failed, w.o.Labels.Bot, f.where, evidence, w.page(f.ref))
	}}
	pausedNotice = &notice{"paused", func(w *Worker, f ending) (string, error) {
		return w.o.Lang.Paused(f.calls, f.reason, w.o.Labels.Paused, w.o.Labels.Bot, w.o.Owner.Host)
	}}
	stoppedNotice = &notice{"stopped", func(w *Worker, f ending) (string, error) {
		return w.o.Lang.Stopped(f.calls, f.reason, w.o.Labels.Bot)
	}}
	interruptedNotice = &notice{"interrupted", func(w *Worker, f ending) (string, error) {
		return w.o.Lang.Interrupted(f.calls)
	}}

	storeNotice = &notice{"store-failed", func(w *Worker, f ending) (string, error) {
		if f.lost {
			return w.o.Lang.StoreLost(f.calls, f.reason)
		}
		return w.o.Lang.StoreFailed(f.calls, f.reason)
	}}
	// keptNotice says where a failed task's workspace is kept, when the
	// run's own closing comment said why it failed.
	keptNotice = &notice{"kept", func(w *Worker, f ending) (string, error) {
		return w.o.Lang.Kept(f.where)
	}}
)

// transition is one row of the life cycle: from which statuses an event
// moves a task to which, and what it does on the way.
type transition struct {
	from []task.Status
	to   task.Status
	// add is added first; remove (and the stale labels the task has) are
	// removed only once the addition worked, so a task always keeps a label
	// saying where it stands.
	add, remove task.Role
	// take: remove is the request this round answers, and removing it is
	// the claim the forge arbitrates (forge.Labeler.TakeLabel): when it
	// was already gone, another process took the task, and the transition
	// stops there, removing nothing else.
	take   bool
	stale  []task.Role
	notice *notice
	clear  bool // the checkpoint is dropped
	// retry is where a failed label change leaves the task, for the next
	// pass to try the transition again: queued with the run's outcome in
	// its checkpoint, or still awaiting with the reply unjudged. "": the
	// transition goes ahead regardless.
	retry task.Status
	// ws is what becomes of the task's workspace.
	ws fate
}

// unclaimed are the statuses from which the producer claims a task; "" is a
// task the store has never seen.
var unclaimed = []task.Status{"", task.Done, task.Failed, task.Paused, task.Stopped, task.Awaiting}

// lifecycle is the whole life of a task, one row per event.
var lifecycle = map[event]transition{
	claimed: {from: unclaimed, to: task.Queued, add: task.RoleProcessing, remove: task.RoleBot, take: true,
		stale: []task.Role{task.RoleDone, task.RoleFailed, task.RolePaused, task.RoleStopped, task.RoleAwaiting}},
	replied:  {from: []task.Status{task.Awaiting}, to: task.Queued, add: task.RoleProcessing, remove: task.RoleAwaiting, take: true},
	reopened: {from: []task.Status{task.Done}, to: task.Queued, add: task.RoleProcessing, remove: task.RoleDone, take: true},
	// The stopped label stays: it says why the task rests; the bot label
	// starts it again (claimed).
	stopAwaiting: {from: []task.Status{task.Awaiting}, to: task.Stopped, add: task.RoleStopped, remove: task.RoleAwaiting, take: true,
		stale: []task.Role{task.RoleBot}, ws: wsFailed},
	closedEarly: {from: []task.Status{task.Running}, to: task.Stopped, remove: task.RoleProcessing, ws: wsDone},
	runDone: {from: []task.Status{task.Running}, to: task.Done, add: task.RoleDone, remove: task.RoleProcessing,
		stale: []task.Role{task.RoleBot, task.RoleFailed, task.RoleAwaiting}, clear: true, retry: task.Queued, ws: wsDone},
	roundDone: {from: []task.Status{task.Running}, to: task.Awaiting, add: task.RoleAwaiting, remove: task.RoleProcessing,
		stale: []task.Role{task.RoleBot, task.RoleDone}, clear: true, retry: task.Queued},
	runFailed: {from: []task.Status{task.Running}, to: task.Failed, add: task.RoleFailed, remove: task.RoleProcessing,
		stale: []task.Role{task.RoleBot, task.RoleDone, task.RoleAwaiting}, notice: failureNotice, clear: true, retry: task.Queued, ws: wsFailed},
	runBroke: {from: []task.Status{task.Running}, to: task.Failed, add: task.RoleFailed, remove: task.RoleProcessing,
		stale: []task.Role{task.RoleBot, task.RoleDone, task.RoleAwaiting}, notice: failureNotice, retry: task.Queued, ws: wsFailed},
	runPaused:      {from: []task.Status{task.Running}, to: task.Paused, remove: task.RoleProcessing, notice: pausedNotice},
	runStopped:     {from: []task.Status{task.Running}, to: task.Stopped, remove: task.RoleProcessing, notice: stoppedNotice, clear: true, ws: wsFailed},
	runInterrupted: {from: []task.Status{task.Running}, to: task.Queued, notice: interruptedNotice},
	// The checkpoint stays: the answer's round resumes the call in hand.
	// Its question is posted before the row (askOnTask).
	runAsked: {from: []task.Status{task.Running}, to: task.Awaiting, add: task.RoleAwaiting, remove: task.RoleProcessing,
		stale: []task.Role{task.RoleBot, task.RoleDone}, retry: task.Queued},
	unanswered: {from: []task.Status{task.Awaiting}, to: task.Failed, add: task.RoleFailed, remove: task.RoleAwaiting,
		stale: []task.Role{task.RoleBot, task.RoleDone}, notice: failureNotice, clear: true, retry: task.Awaiting, ws: wsFailed},
	conversationEnded: {from: []task.Status{task.Awaiting}, to: task.Done, add: task.RoleDone, remove: task.RoleAwaiting,
		stale: []task.Role{task.RoleBot, task.RoleFailed}, retry: task.Awaiting, ws: wsDone},
	// The store is asked once more to say queued; its last record stands
	// when it cannot (running under a process that ends), and either way
	// the next run resumes the task from its last checkpoint.
	storeFailed: {from: []task.Status{task.Queued, task.Running}, to: task.Queued, notice: storeNotice},
	// Nothing can be said or labelled on a forge that refuses the
	// credentials, and the task did not fail: it waits, queued, for a run
	// whose credentials the forge takes, which resumes it from its last
	// checkpoint.
	authRefused: {from: []task.Status{task.Running}, to: task.Queued},
}

// ending is what a transition of one task needs.
type ending struct {
	ref    task.Ref
	post   *report.Poster // nil: the transition posts nothing
	log    *slog.Logger
	labels []string // the task's labels when the transition was decided
	reason string   // why it failed, paused or stopped
	calls  int      // model requests the run made
	// lost: the store failed because its database is gone (store.ErrLost),
	// and what it recorded with it.
	lost bool
	// reported: the run already posted its closing comment (planning mode).
	reported bool
	// mark is the newest comment id the run's context held.
	mark int64
	// ws is the run's workspace, nil when it has none open; where is its
	// folder when a failure keeps it, for the failure comment.
	ws    Workspace
	where string
	// checks and ran are what the run ran (engine.Outcome): the failure
	// comment shows them, with the output of the checks that failed.
	checks []engine.CheckResult
	ran    []toolhost.CommandRun
	// question is the server's question the run ended on (engine.Asked).
	question *engine.Question
	// keys name the comments posted after the run (the delivery, the
	// notice), continuing the run's (engine.Outcome.Keys); nil: no run
	// numbered any, each is a comment of its own.
	keys *engine.Keys
}

// key names the next comment posted for the task's round (engine.Keys).
func (f ending) key(what string) engine.Key {
	if f.keys == nil {
		return engine.Key{}
	}
	return f.keys.Next(what)
}

// move applies ev's row to the task: its labels, its status, its notice,
// its checkpoint, when the task's status is one the row moves from (the
// table's from column, checked here at run time; the rows that take a
// request go through take instead, where the forge's take and the
// store's claim decide). It reports false when
// a label change failed and the row says to retry (the task was left for
// the next pass), or when the status did not allow the row. Its error is the
// first store write that failed (each is logged where it failed).
func (w *Worker) move(ctx context.Context, f ending, ev event) (bool, error) {
	tr := lifecycle[ev]
	if rec, err := w.o.Store.Get(ctx, f.ref); err == nil && !slices.Contains(tr.from, rec.Status) {
		// The row is not where the event comes from: a path that reached
		// here by mistake acts on nothing. A row that cannot be read is
		// moved: the store's failure is the transition's own then.
		f.log.Error("a transition the task's status does not allow; nothing done", "event", ev,
			"status", rec.Status, "from", tr.from)
		return false, nil
	}
	if all, err := w.relabel(ctx, f, tr); (err != nil || !all) && tr.retry != "" {
		w.refuse(f.ref, err)
		f.log.Error("could not set the labels; the next pass tries again", "event", ev, "status", tr.retry)
		w.settle(f, transition{ws: wsKeep}) // the next pass comes back to it
		return false, w.setStatus(ctx, f.ref, tr.retry, "")
	}
	if f.ws != nil && tr.ws == wsFailed && tr.ws.keeps(w.o.Workspaces.Keep()) {
		f.where = f.ws.Where()
	}
	w.settle(f, tr)
	if tr.remove == task.RoleProcessing {
		w.unhold(ctx, f.ref)
	}
	why := ""
	if tr.to == task.Failed || tr.to == task.Stopped {
		why = f.reason
	}
	serr := w.setStatus(ctx, f.ref, tr.to, why)
	w.record(ctx, f.ref, store.Event{Kind: store.EventStatus, Title: fmt.Sprintf("%s: the task is %s", ev, tr.to), Text: f.reason})
	w.notify(ctx, f, tr.notice)
	if tr.clear {
		if err := w.o.Store.ClearCheckpoint(ctx, f.ref); err != nil {
			f.log.Error("clearing checkpoint", "error", err)
			serr = cmp.Or(serr, fmt.Errorf("clearing the checkpoint of %s: %w", f.ref, err))
		}
	}
	level := slog.LevelInfo
	if tr.to == task.Failed || ev == storeFailed || ev == authRefused {
		level = slog.LevelError
	}
	f.log.Log(ctx, level, "task "+string(ev), "status", tr.to, "reason", f.reason)
	return true, serr
}

// errTake marks relabel's error when taking the request label failed: who
// took it is then unknown (forge.ErrLabelAbsent: another process did).
var errTake = errors.New("taking the request label")

// relabel adds the row's label, then removes its remove label and the stale
// labels the task has, each once. It removes nothing when the addition
// failed (its error), and reports whether every removal was made. With
// tr.take, the remove label is taken first (forge.Labeler.TakeLabel): when
// that fails, nothing else is removed and its error (forge.ErrLabelAbsent
// when another process took it) is returned.
func (w *Worker) relabel(ctx context.Context, f ending, tr transition) (bool, error) {
	ls := w.o.Labels
	add := ls.Of(tr.add)
	if add != "" {
		if err := w.o.Forge.AddLabel(ctx, f.ref, add); err != nil {
			logFailure(ctx, f.log, "adding label", "label", add, "error", err)
			return false, err
		}
	}
	var remove []string
	if l := ls.Of(tr.remove); l != "" && tr.take {
		if err := w.o.Forge.TakeLabel(ctx, f.ref, l); err != nil {
			if !errors.Is(err, forge.ErrLabelAbsent) {
				logFailure(ctx, f.log, "taking label", "label", l, "error", err)
			}
			return false, fmt.Errorf("%w: %w", errTake, err)
		}
	} else if l != "" {
		remove = append(remove, l)
	}
	for _, s := range tr.stale {
		if l := ls.Of(s); l != "" && l != add && l != ls.Of(tr.remove) && !slices.Contains(remove, l) && slices.Contains(f.labels, l) {
			remove = append(remove, l)
		}
	}
	all := true
	for _, l := range remove {
		if err := w.o.Forge.RemoveLabel(ctx, f.ref, l); err != nil {
			f.log.Error("removing label", "label", l, "error", err)
			all = false
		}
	}
	return all, nil
}

// notify posts the transition's notice, if any; a notice that cannot be
// posted is logged.
func (w *Worker) notify(ctx context.Context, f ending, n *notice) {
	if f.post == nil || n == nil {
		return
	}
	if n == failureNotice && f.reported {
		// The run's own closing comment said why; only where its
		// workspace is kept is left to say.
		if f.where == "" {
			return
		}
		n = keptNotice
	}
	body, err := n.render(w, f)
	if err != nil {
		f.log.Error("rendering a notice", "error", err)
		return
	}
	if err := f.post.PostAll(ctx, f.key(n.name), body); err != nil {
		f.log.Error("posting a notice", "error", err)
	}
}

// setStatus records the task's status; a failure is logged and returned.
func (w *Worker) setStatus(ctx context.Context, ref task.Ref, s task.Status, msg string) error {
	if err := w.o.Store.SetStatus(ctx, ref, s, msg); err != nil {
		w.log(ref).Error("recording task status", "status", s, "error", err)
		return fmt.Errorf("recording %s as %s: %w", ref, s, err)
	}
	return nil
}

// evidence is what the failed run ran, for its failure comment, in the
// comments' language; "" when it ran nothing.
func (f ending) evidence(l report.Lang) (string, error) {
	if len(f.checks)+len(f.ran) == 0 {
		return "", nil
	}
	checks, ran := report.Commands(f.checks, f.ran)
	return report.Evidence(l, checks, ran)
}
