package workspace

import (
	"context"
	"errors"
	"strconv"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// Delivery is the delivery section as Tasks takes it.
type Delivery struct {
	Enabled      bool
	Draft        bool
	BranchPrefix string // an issue's branch is BranchPrefix + "issue-12"
	// Push, when set, is called instead of pushing the round's commit:
	// a dry run shows what it would push (Workspace.Outgoing).
	Push func(ctx context.Context, ref task.Ref, w *Workspace) error
}

// TasksOptions configure Tasks.
type TasksOptions struct {
	Manager  *Manager
	Host     *toolhost.Host // starts each task's task-scoped servers in its workspace
	Forge    forge.Delivery
	Auth     Credential // the Authorization header git sends to the forge
	Delivery Delivery
	Keep     string // workspace.keep
	Redact   func(string) string
	// Box runs the task's setup, checks and commands in its sandbox; nil:
	// none are run.
	Box *Box
	// Lang is the language of what the pull or merge request says.
	Lang report.Lang
}

// Tasks gives each task its workspace, the task's tools started in it, and
// the delivery of a done round: it is the worker's Workspaces.
type Tasks struct{ o TasksOptions }

// NewTasks returns Tasks.
func NewTasks(o TasksOptions) *Tasks {
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	return &Tasks{o: o}
}

// Keep is workspace.keep.
func (ts *Tasks) Keep() string { return ts.o.Keep }

// Remove deletes a task's workspace.
func (ts *Tasks) Remove(ref task.Ref) error { return ts.o.Manager.Remove(context.Background(), ref) }

// Open prepares t's workspace: an issue's branch (BranchPrefix+"issue-N")
// from the default branch; a pull or merge request's head branch, read-only
// when it comes from a fork. Then it starts the task's servers in it.
func (ts *Tasks) Open(ctx context.Context, t task.Task) (*TaskWorkspace, error) {
	repo, err := ts.o.Forge.Repository(ctx, t.Ref)
	if err != nil {
		return nil, err
	}
	s := Spec{Ref: t.Ref, CloneURL: repo.CloneURL, Auth: ts.o.Auth, Base: repo.DefaultBranch,
		Branch: ts.o.Delivery.BranchPrefix + "issue-" + strconv.Itoa(t.Ref.Number)}
	if t.Ref.Kind != task.Issue {
		s.Base, s.Branch, s.ReadOnly = t.BaseBranch, t.HeadBranch, t.Fork
	}
	w, err := ts.o.Manager.Prepare(ctx, s)
	if err != nil {
		return nil, err
	}
	var setup string
	if ts.o.Box != nil {
		if setup, err = ts.o.Box.Setup(ctx, w.Dir); err != nil {
			return nil, err
		}
	}
	sess, err := ts.o.Host.ForTask(ctx, toolhost.TaskVars{Workspace: w.Dir, TaskRef: t.Ref.String(), Branch: w.Branch})
	if err != nil {
		return nil, err
	}
	return &TaskWorkspace{ts: ts, t: t, w: w, sess: sess, setup: setup}, nil
}

// TaskWorkspace is one task's workspace while a run works in it.
type TaskWorkspace struct {
	ts     *Tasks
	t      task.Task
	w      *Workspace
	sess   *toolhost.Session
	setup  string // what the setup did as the workspace opened, for the first prompt
	closed bool
}

// Setup says what the daemon ran in the workspace as it opened it; "" for
// nothing.
func (o *TaskWorkspace) Setup() string { return o.setup }

// Checker runs workspace.checks in the task's sandbox; nil (untyped) when
// none are configured.
func (o *TaskWorkspace) Checker() engine.Checker {
	if o.ts.o.Box == nil {
		return nil
	}
	return o.ts.o.Box.Checker(o.w.Dir)
}

// Tools are the task's tools: its own servers, started in the workspace,
// and the process's others.
func (o *TaskWorkspace) Tools() engine.Caller { return o.sess }

// Where is the checkout's folder.
func (o *TaskWorkspace) Where() string { return o.w.Dir }

// Close stops the task's servers and removes the workspace unless keep;
// a second Close does nothing.
func (o *TaskWorkspace) Close(keep bool) error {
	if o.closed {
		return nil
	}
	o.closed = true
	err := o.sess.Close()
	if !keep {
		err = errors.Join(err, o.ts.o.Manager.Remove(context.Background(), o.t.Ref))
	}
	return err
}

// kind is what the forge calls a change.
func kind(ref task.Ref) string { return ref.Facts().Change }

// Deliver commits what the round changed, its subject saying what that
// was, pushes it and, for an issue, opens the draft pull or merge request
// that closes it (or finds the one an earlier round opened); a fork's pull
// request gets a patch instead. The change's description is written and
// kept by the daemon (changeBody): each round that pushed commits adds its
// section. Its comment lists the files the commit left out
// (Workspace.LeftOut). A change that holds a secret is neither committed
// nor pushed: a *SecretError.
func (o *TaskWorkspace) Deliver(ctx context.Context, done engine.Outcome) (string, error) {
	d := o.ts.o.Delivery
	if !d.Enabled {
		return "", nil
	}
	if o.w.ReadOnly {
		patch, err := o.w.Patch(ctx)
		if err != nil || patch == "" {
			return "", err
		}
		return o.ts.o.Lang.Patch(kind(o.t.Ref), o.ts.o.Redact(patch))
	}
	pushedBefore, err := o.w.Undescribed(ctx)
	if err != nil {
		return "", err
	}
	sha, err := o.w.CommitWith(ctx, func(staged []report.FileChange) (string, error) { return o.message(staged, done) })
	if err != nil {
		return "", err
	}
	if d.Push != nil {
		err = d.Push(ctx, o.t.Ref, o.w)
	} else {
		_, err = o.w.Push(ctx)
	}
	if err != nil {
		return "", err
	}
	out := report.Delivery{Commit: sha, Branch: o.w.Branch, Kind: kind(o.t.Ref)}
	for _, l := range o.w.LeftOut {
		out.LeftOut = append(out.LeftOut, report.LeftOut{Path: o.ts.o.Redact(l.Path), Reason: l.Reason})
	}
	if o.t.Ref.Kind != task.Issue {
		out.ChangeURL = o.t.URL // the task is the change
		o.describeTask(ctx, pushedBefore, done)
		return o.ts.o.Lang.Delivered(out)
	}
	ch, ok, err := o.ts.o.Forge.FindChange(ctx, o.t.Ref, o.w.Branch)
	if err != nil {
		return "", err
	}
	if !ok {
		ahead, err := o.w.Ahead(ctx)
		if err != nil {
			return "", err
		}
		if !ahead { // nothing was ever changed: no change to open
			return o.ts.o.Lang.Delivered(out)
		}
		body, err := o.changeBody(ctx, "", pushedBefore, done)
		if err != nil {
			return "", err
		}
		ch, err = o.ts.o.Forge.OpenChange(ctx, o.t.Ref, forge.NewChange{Head: o.w.Branch, Base: o.w.Base,
			Title: o.t.Title, Body: body, Draft: d.Draft})
		if err != nil {
			return "", err
		}
		out.Opened, out.Draft = true, ch.Draft
		o.described(ctx)
	} else {
		o.describe(ctx, ch, pushedBefore, done)
	}
	out.ChangeURL = ch.URL
	return o.ts.o.Lang.Delivered(out)
}

// message is a round's commit message: a subject that says what the round
// changed (report.Lang.Subject), what the model said it did, the files and
// where the task is, in the forge's notation.
func (o *TaskWorkspace) message(staged []report.FileChange, done engine.Outcome) (string, error) {
	msg, err := o.ts.o.Lang.CommitMessage(report.Commit{Files: staged, Steps: done.Steps, Summary: done.Comment,
		Title: o.t.Title, Refs: o.t.Ref.Mention(), URL: o.t.URL})
	if err != nil {
		return "", err
	}
	return o.ts.o.Redact(msg), nil
}
