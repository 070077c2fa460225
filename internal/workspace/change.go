package workspace

import (
	"context"
	"fmt"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/task"
)

// changeBody is the change's description as this round leaves it, from
// prev, its description now: why (the issue it closes, quoted), what the
// change does from where the branch left Base, and this round's section
// when it pushed commits. The round's commits are those after
// pushedBefore (where the forge's branch was before the first push no
// description covers yet: this delivery's, or one a stop or a failed
// description left, Workspace.Undescribed); when
// this delivery pushed none, after the head of the description's newest
// round (a delivery repeated after a crash, the push done), so a round's
// commits get their section once; else, for an issue, from where the
// branch left Base.
func (o *TaskWorkspace) changeBody(ctx context.Context, prev, pushedBefore string, done engine.Outcome) (string, error) {
	head, err := o.w.Head(ctx)
	if err != nil {
		return "", err
	}
	fork, err := o.w.ForkPoint(ctx)
	if err != nil {
		return "", err
	}
	all, err := o.w.Files(ctx, fork, head)
	if err != nil {
		return "", err
	}
	b := report.ChangeBody{Kind: kind(o.t.Ref), Files: all}
	if o.t.Ref.Kind == task.Issue {
		b.Why = report.Why{Closes: o.t.Ref.Mention(), Title: o.t.Title, Body: o.t.Body}
	}
	start := ""
	switch last := report.LastRoundHead(prev); {
	case last == head: // this head has its section
	case pushedBefore != "" && pushedBefore != head:
		start = pushedBefore
	case o.w.IsAncestor(ctx, last, head):
		start = last
	case pushedBefore == "" || o.t.Ref.Kind == task.Issue:
		start = fork // the issue's branch is all the issue's work
	}
	if start != "" && start != head {
		if b.Round, err = o.round(ctx, start, head, done); err != nil {
			return "", err
		}
	}
	body, err := o.ts.o.Lang.ChangeBody(prev, b)
	if err != nil {
		return "", fmt.Errorf("writing the %s's description: %w", kind(o.t.Ref), err)
	}
	return o.ts.o.Redact(body), nil
}

// round is what the commits from start to head did this round.
func (o *TaskWorkspace) round(ctx context.Context, start, head string, done engine.Outcome) (*report.Round, error) {
	files, err := o.w.Files(ctx, start, head)
	if err != nil {
		return nil, err
	}
	commits, err := o.w.Commits(ctx, start, head)
	if err != nil {
		return nil, err
	}
	subject, err := o.w.Subject(ctx, head)
	if err != nil {
		return nil, err
	}
	checks, ran := report.Commands(done.Checks, done.Ran)
	return &report.Round{Head: head, Commits: commits, Subject: subject, Steps: done.Steps, Summary: done.Comment,
		Files: files, Checks: checks, Ran: ran}, nil
}

// describe rewrites the description of ch, the change the round's commits
// went to, when this round changes it. The work is pushed by then: a
// description that cannot be written is logged, not the round's failure.
func (o *TaskWorkspace) describe(ctx context.Context, ch forge.Change, pushedBefore string, done engine.Outcome) {
	body, err := o.changeBody(ctx, ch.Body, pushedBefore, done)
	if err == nil && body != ch.Body {
		err = o.ts.o.Forge.EditChange(ctx, o.t.Ref, ch.Number, body)
	}
	if err != nil {
		// The next delivery describes this round's commits with its own.
		o.ts.o.Manager.log.Error("updating the description of the change", "task", o.t.Ref.String(), "change", ch.Number, "error", err)
		return
	}
	o.described(ctx)
}

// described forgets where the undescribed pushes began: the description
// covers them now. A failure is logged; the next round's section then
// starts there again, and covers this round's commits a second time.
func (o *TaskWorkspace) described(ctx context.Context) {
	if err := o.w.Described(ctx); err != nil {
		o.ts.o.Manager.log.Warn("forgetting the pushes the description now covers", "task", o.t.Ref.String(), "error", err)
	}
}

// describeTask is describe for a pull or merge request task: its
// description as the forge has it now is the one kept around the daemon's
// part.
func (o *TaskWorkspace) describeTask(ctx context.Context, pushedBefore string, done engine.Outcome) {
	ch, ok, err := o.ts.o.Forge.FindChange(ctx, o.t.Ref, o.w.Branch)
	if err != nil || !ok || ch.Number != o.t.Ref.Number {
		if err != nil {
			o.ts.o.Manager.log.Error("reading the change's description", "task", o.t.Ref.String(), "error", err)
		}
		return
	}
	o.describe(ctx, ch, pushedBefore, done)
}
