package worker

import (
	"context"
	"errors"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Workspaces gives each task the checkout it is worked in (workspace.root)
// with the tools that work there, and delivers what a done round changed.
// A nil Workspaces gives tasks none.
type Workspaces interface {
	// Open prepares t's workspace, reusing the one a crash, a pause or an
	// earlier round left, and starts the task's tools in it.
	Open(ctx context.Context, t task.Task) (Workspace, error)
	// Remove deletes the workspace of a task no run has open (a
	// conversation that ended while awaiting a reply).
	Remove(ref task.Ref) error
	// Keep says which ended tasks' workspaces stay: "never", "failed" or
	// "always" (workspace.keep).
	Keep() string
}

// Workspace is one task's checkout while a run works in it.
type Workspace interface {
	// Tools are the task's tools: its task-scoped servers, started in the
	// workspace, and the process's others.
	Tools() engine.Caller
	// Deliver makes a done round's work exist on the forge: its changes
	// committed (what the round did: out's comment, else its summary;
	// how it was checked: out's checks and the commands the model ran)
	// and pushed with a pull or merge request, or offered as a patch for a
	// fork. It returns the comment that says what was delivered; "" when
	// delivery is off.
	Deliver(ctx context.Context, out engine.Outcome) (string, error)
	// Setup says what the daemon ran in the workspace as it opened it
	// (the repository's setup commands and how each ended), for the
	// model's first prompt; "" for nothing.
	Setup() string
	// Checker runs the repository's checks (workspace.checks) in the
	// task's sandbox when a round is about to end done; it returns nil (an
	// untyped nil) when none are configured. A failing check goes back to
	// the model up to Options.CheckRounds times; its error is a system
	// failure (the sandbox could not start). See engine.Checker.
	Checker() engine.Checker
	// Where is the workspace's folder, for a comment on a failed task.
	Where() string
	// Close stops the task's tools and, unless keep, removes the
	// workspace.
	Close(keep bool) error
}

// fate is what becomes of an open workspace when its run ends: a column of
// the life-cycle table.
type fate int

const (
	wsKeep   fate = iota // the task goes on: a resume or the next round reuses it
	wsDone               // the task is done: removed unless keep is always
	wsFailed             // the task failed or stopped: kept for inspection unless keep is never
)

// keeps reports whether a workspace of that fate stays under keep.
func (f fate) keeps(keep string) bool {
	switch f {
	case wsDone:
		return keep == "always"
	case wsFailed:
		return keep != "never"
	}
	return true
}

// settle does with the run's workspace what the row says: it closes an
// open one (kept or removed), or removes the workspace of a task no run
// has open when the row ends it.
func (w *Worker) settle(f ending, tr transition) {
	if w.o.Workspaces == nil {
		return
	}
	keep := tr.ws.keeps(w.o.Workspaces.Keep())
	var err error
	switch {
	case f.ws != nil:
		err = f.ws.Close(keep)
	case !keep:
		err = w.o.Workspaces.Remove(f.ref)
	}
	if err != nil {
		f.log.Error("closing the workspace", "error", err)
	}
}

// deliver makes a done round's work exist on the forge before the task is
// called done, and says what was delivered: at the end of the round's
// closing comment (report.Poster.Amend), or in a comment of its own when
// that comment is not there (its post failed, or someone deleted it) or
// would not hold it. A failure is the round's: it
// fails the task rather than calling done what nothing holds.
func (w *Worker) deliver(ctx context.Context, f ending, out engine.Outcome) error {
	if f.ws == nil {
		return nil
	}
	comment, err := f.ws.Deliver(ctx, out)
	if err != nil {
		return err
	}
	if comment != "" {
		w.record(ctx, f.ref, store.Event{Kind: store.EventDelivery, Title: "the work was delivered", Text: comment})
	}
	if comment != "" && f.post != nil {
		// The closing comment says what was delivered, where it is there
		// (its pull request link); a comment of its own otherwise.
		if f.keys != nil {
			err := f.post.Amend(ctx, *f.keys, "closing", comment)
			if err == nil {
				return nil
			}
			if !errors.Is(err, report.ErrNotAmended) {
				f.log.Warn("adding what was delivered to the closing comment; posting it on its own", "error", err)
			}
		}
		if err := f.post.PostAll(ctx, f.key("delivery"), comment); err != nil {
			f.log.Error("posting what was delivered", "error", err)
		}
	}
	return nil
}
