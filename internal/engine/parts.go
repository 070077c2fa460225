package engine

import (
	"context"

	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// The engine's one way to the optional parts of its policy: each asks the
// policy for the part and does without it as the part's comment says.

func (r *Run) at() Step {
	if l, ok := r.p.(Locator); ok {
		return l.At()
	}
	return Step{}
}

func (r *Run) refuse(c ToolCall, a *Act) (string, bool) {
	if f, ok := r.p.(Refuser); ok {
		return f.Refuse(c, a)
	}
	return "", false
}

func (r *Run) called(ctx context.Context, c ToolCall, res toolhost.Result) {
	if w, ok := r.p.(CallWatcher); ok {
		w.Called(ctx, c, res)
	}
}

func (r *Run) trouble(ctx context.Context, reason string, retrying bool) {
	if t, ok := r.p.(TroubleReporter); ok {
		t.Trouble(ctx, reason, retrying)
	}
}

func (r *Run) heard(ctx context.Context, applied []Applied) {
	if h, ok := r.p.(Hearer); ok {
		h.Heard(ctx, applied)
	}
}

func (r *Run) ending(out *Outcome) {
	if f, ok := r.p.(Finisher); ok {
		f.Ending(out)
	}
}

func (r *Run) halt(ctx context.Context, out Outcome) {
	if h, ok := r.p.(Halter); ok {
		h.Halt(ctx, out)
	}
}

func (r *Run) reopen(ctx context.Context, failing []CheckResult) error {
	if o, ok := r.p.(Reopener); ok {
		return o.Reopen(ctx, failing)
	}
	return nil
}

func (r *Run) pinned() string {
	if p, ok := r.p.(Pinner); ok {
		return p.Pinned()
	}
	return ""
}
