// Package agent is the plain loop: a one-phase policy on the turn engine.
// Each model reply is a step, a tool call or the end of the task; its
// comment is posted on the task, its calls run, and the model finishes by
// saying it is done.
package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// mode names the plain loop's checkpoints.
const mode = "plain"

// Loop runs tasks in the plain loop. It is safe for concurrent use.
type Loop struct {
	e      *engine.Engine
	system string
}

// New prepares the plain loop's system prompt.
func New(e *engine.Engine) (*Loop, error) {
	sys, err := systemPrompt(e.Toolset(), e.MaxCalls())
	if err != nil {
		return nil, err
	}
	return &Loop{e: e, system: sys}, nil
}

// Run works on the task until the model says done, a limit is hit, the run
// ends at a checkpoint, or a system error occurs (returned).
func (l *Loop) Run(ctx context.Context, in engine.Input) (engine.Outcome, error) {
	return l.e.Run(ctx, in, &plain{l: l})
}

// plain is the policy of one run.
type plain struct {
	l *Loop
	r *engine.Run
}

func (p *plain) Mode() string   { return mode }
func (p *plain) System() string { return p.l.system }

func (p *plain) Begin(_ context.Context, r *engine.Run, _ json.RawMessage) error {
	p.r = r
	return nil
}

func (p *plain) Next(context.Context) (string, *engine.Outcome, error) { return "", nil, nil }
func (p *plain) At() engine.Step                                       { return engine.Step{} }

// Read takes tool calls, or the end of the task.
func (p *plain) Read(r engine.Reply) (*engine.Act, error) {
	if len(r.Calls) == 0 && !r.Done {
		return nil, &engine.ReplyError{Reason: r.Problem}
	}
	return &engine.Act{Comment: r.Comment, Calls: r.Calls, Done: r.Done}, nil
}

func (p *plain) Refuse(engine.ToolCall, *engine.Act) (string, bool) { return "", false }

// Post posts the step's comment; the closing one says how many comments
// from people who may not steer the task were left unread.
func (p *plain) Post(ctx context.Context, a *engine.Act) error {
	body := strings.TrimSpace(a.Comment)
	if n := p.r.Counts().Ignored; a.Done && n > 0 {
		body += fmt.Sprintf("\n\n(%d comment(s) from people who may not steer this task were not read.)", n)
	}
	if body == "" {
		return nil
	}
	in := p.r.Input()
	if err := in.Post.Post(ctx, body); err != nil {
		return fmt.Errorf("posting step comment on %s: %w", in.Task.Ref, err)
	}
	return nil
}

func (p *plain) Called(context.Context, engine.ToolCall, toolhost.Result) {}

func (p *plain) Apply(_ context.Context, a *engine.Act) (*engine.Outcome, error) {
	if a.Done {
		return &engine.Outcome{End: engine.Done, Comment: a.Comment}, nil
	}
	return nil, nil
}

func (p *plain) Correction(reason string) (string, error) {
	return prompts.Render("correction.tmpl", struct {
		Reason          string
		FunctionCalling bool
		Count, Max      int
	}{reason, p.l.e.Toolset().Native(), p.r.Counts().Unusable, p.l.e.MaxUnusable()})
}

func (p *plain) Trouble(context.Context, string, bool)    {}
func (p *plain) Heard(context.Context, []engine.Applied)  {}
func (p *plain) Ending(*engine.Outcome)                   {}
func (p *plain) Announce(context.Context, engine.Outcome) {}
func (p *plain) State() any                               { return nil }
func (p *plain) Pinned() string                           { return "" }
