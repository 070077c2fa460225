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
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// mode names the plain loop's checkpoints.
const mode = "plain"

// Loop runs tasks in the plain loop. It is safe for concurrent use.
type Loop struct {
	e      *engine.Engine
	o      Options
	system string
}

// Options say how the plain loop reports on the task.
type Options struct {
	// Forge, when set, is where the round's living comment goes: one
	// comment edited in place with every step (report.Live), then one
	// closing comment. nil, or Separate: each step's comment is a comment
	// of its own, posted through the run's Poster (engine.Input.Post).
	Forge    report.BoardForge
	Separate bool
	// Lang is the language of the comments; "" → English.
	Lang   report.Lang
	Redact func(string) string // nil → identity
}

// New prepares the plain loop's system prompt.
func New(e *engine.Engine, o Options) (*Loop, error) {
	if o.Lang == "" {
		o.Lang = report.English
	}
	sys, err := systemPrompt(e.Toolset(), e.MaxCalls(), e.FinishFn())
	if err != nil {
		return nil, err
	}
	if err := e.Fits(sys); err != nil {
		return nil, err
	}
	return &Loop{e: e, o: o, system: sys}, nil
}

// Run works on the task until the model says done, a limit is hit, the run
// ends at a checkpoint, or a system error occurs (returned).
func (l *Loop) Run(ctx context.Context, in engine.Input) (engine.Outcome, error) {
	return l.e.Run(ctx, in, &plain{l: l})
}

// The plain loop marks the failed calls on its living comment and says
// when it halts; the engine's other optional parts it does without.
var _ interface {
	engine.Policy
	engine.CallWatcher
	engine.Halter
} = (*plain)(nil)

// plain is the policy of one run.
type plain struct {
	l     *Loop
	r     *engine.Run
	st    state
	board *report.Board // the living comment; nil in separate mode
}

// maxSteps bounds the steps the checkpoint keeps for the living comment:
// older ones are counted (Earlier), and stay in its edit history.
const maxSteps = 300

// state is the plain loop's part of the checkpoint.
type state struct {
	// Failed is set when a call of the last step with calls ended in a
	// tool error: a done right after it is questioned once (Asked) before
	// it is accepted; Ask says the question is still to be sent.
	Failed bool `json:"failed,omitempty"`
	Asked  bool `json:"asked,omitempty"`
	Ask    bool `json:"ask,omitempty"`
	// Posted identifies the last step comment posted (a hash of it): the
	// same comment again is not posted twice in a row.
	Posted string `json:"posted,omitempty"`
	// Steps are the living comment's steps (the newest maxSteps), Earlier
	// how many older ones it no longer shows, Board its comment.
	Steps   []report.Step     `json:"steps,omitempty"`
	Earlier int               `json:"earlier,omitempty"`
	Board   report.BoardState `json:"board,omitzero"`
}

func (p *plain) Mode() string   { return mode }
func (p *plain) System() string { return p.l.system }

// Begin takes the saved state of a resumed run (none before this state
// existed: a checkpoint holding null starts from the zero state).
func (p *plain) Begin(_ context.Context, r *engine.Run, saved json.RawMessage) error {
	p.r = r
	if len(saved) > 0 {
		if err := json.Unmarshal(saved, &p.st); err != nil {
			return fmt.Errorf("reading the plain loop's state: %v: %w", err, engine.ErrUnresumable)
		}
	}
	if o := p.l.o; o.Forge != nil && !o.Separate {
		p.board = report.NewBoard(report.BoardOptions{Forge: o.Forge, Ref: r.Input().Task.Ref, Redact: o.Redact, Logger: r.Log(),
			Key: r.Key, EditEvery: report.LiveEditEvery, Lang: o.Lang}, p.st.Board)
	}
	return nil
}

// Next asks whether the task is really done when a done came right after
// failed calls.
func (p *plain) Next(context.Context) (string, *engine.Outcome, error) {
	if !p.st.Ask {
		return "", nil, nil
	}
	p.st.Ask = false
	text, err := prompts.Render("failed_done.tmpl", struct{ Finish string }{p.l.e.FinishFn()})
	return text, nil, err
}

// Read takes tool calls, or the end of the task.
func (p *plain) Read(r engine.Reply) (*engine.Act, error) {
	if len(r.Calls) == 0 && !r.Done {
		return nil, &engine.ReplyError{Reason: r.Problem}
	}
	if len(r.Calls) > 0 {
		p.st.Failed, p.st.Asked = false, false // a new step: its calls decide
	}
	return &engine.Act{Comment: r.Comment, Calls: r.Calls, Done: r.Done}, nil
}

// Post posts the step's comment, unless it is the same as the last one
// posted, or it ends the task: the closing comment waits for the outcome
// (Announce), which the repository's checks may still refuse. With a
// living comment, the step joins it instead (its comment, the same as the
// last one left out, and its tool calls with the files and commands they
// name), and the comment is edited at most every report.LiveEditEvery.
func (p *plain) Post(ctx context.Context, a *engine.Act) error {
	if p.board != nil {
		p.step(a)
		if err := p.live(ctx, false); err != nil { // a task that cannot report stops, as with separate comments
			return fmt.Errorf("posting step comment on %s: %w", p.r.Input().Task.Ref, err)
		}
		return nil
	}
	if a.Done {
		return nil
	}
	body := strings.TrimSpace(a.Comment)
	if body == "" {
		return nil
	}
	id := engine.Digest(body)
	if id == p.st.Posted {
		p.r.Log().Info("step comment not posted: the same as the last one")
		return nil
	}
	if err := p.r.Post(ctx, "step", body); err != nil {
		return fmt.Errorf("posting step comment on %s: %w", p.r.Input().Task.Ref, err)
	}
	p.st.Posted = id
	return nil
}

// step adds a's step to the living comment's steps.
func (p *plain) step(a *engine.Act) {
	s := report.Step{N: p.r.Counts().Calls, Done: a.Done}
	if body := strings.TrimSpace(a.Comment); body != "" && !a.Done { // a done's comment is the closing one
		if id := engine.Digest(body); id != p.st.Posted {
			s.Comment, p.st.Posted = body, id
		}
	}
	for _, c := range a.Calls {
		s.Calls = append(s.Calls, report.CallOf(c.Tool, c.Args))
	}
	p.st.Steps = append(p.st.Steps, s)
	if over := len(p.st.Steps) - maxSteps; over > 0 {
		p.st.Steps = p.st.Steps[over:]
		p.st.Earlier += over
	}
}

// live shows the steps in the living comment; final is its last edit.
// A failure is logged by the Board, and returned.
func (p *plain) live(ctx context.Context, final bool) error {
	return p.show(ctx, report.Live{Finished: final})
}

// show edits the living comment to v with the run's steps: at once when
// v is the round's end (finished or halted), otherwise at the Board's pace.
func (p *plain) show(ctx context.Context, v report.Live) error {
	v.Steps, v.Earlier, v.UpdatedAt = p.st.Steps, p.st.Earlier, p.l.e.Now()
	return p.board.Live(ctx, v)
}

// Halt makes the living comment's last edit say the run paused, stopped
// or was interrupted.
func (p *plain) Halt(ctx context.Context, out engine.Outcome) {
	if p.board != nil {
		_ = p.show(ctx, report.Live{Halted: out.End}) // logged by the Board
	}
}

// questioned reports whether a is an end that comes right after failed
// calls and has not been questioned yet.
func (p *plain) questioned(a *engine.Act) bool { return a.Done && p.st.Failed && !p.st.Asked }

// Called notes a call that ended in a tool error (on the living
// comment's step too).
func (p *plain) Called(_ context.Context, c engine.ToolCall, res toolhost.Result) {
	if !res.IsError {
		return
	}
	p.st.Failed = true
	if n := len(p.st.Steps); n > 0 {
		want := report.CallOf(c.Tool, c.Args)
		for i, sc := range p.st.Steps[n-1].Calls {
			if !sc.Failed && sc.Tool == want.Tool && sc.Target == want.Target {
				p.st.Steps[n-1].Calls[i].Failed = true
				break
			}
		}
	}
}

// Apply ends the task on done, except a done right after failed calls,
// which is questioned once (Next asks) before it is accepted.
func (p *plain) Apply(_ context.Context, a *engine.Act) (*engine.Outcome, error) {
	switch {
	case p.questioned(a):
		p.st.Asked, p.st.Ask = true, true
		return nil, nil
	case a.Done:
		return &engine.Outcome{End: engine.Done, Comment: a.Comment}, nil
	}
	return nil, nil
}

func (p *plain) Correction(reason string) (string, error) {
	return prompts.Render("correction.tmpl", struct {
		Reason          string
		FunctionCalling bool
		Finish          string
		Count, Max      int
	}{reason, p.l.e.Toolset().Native(), p.l.e.FinishFn(), p.r.Counts().Unusable, p.l.e.MaxUnusable()})
}

// Announce posts the closing comment of a round that ended done: the
// model's comment, how many comments from people who may not steer the
// task were left unread, and what was run (report.Evidence). A failed
// round's comment is the worker's. The living comment, if any, is edited
// one last time first, whatever the end.
func (p *plain) Announce(ctx context.Context, out engine.Outcome) {
	if p.board != nil {
		_ = p.live(ctx, true) // logged by the Board
	}
	if out.End != engine.Done {
		return
	}
	log := p.r.Log()
	checks, ran := report.Commands(out.Checks, out.Ran)
	body, err := p.l.o.Lang.Closing(report.Closing{Comment: out.Comment, Checks: checks, Ran: ran, Ignored: out.Ignored,
		Page: p.r.Input().Page})
	if err != nil {
		log.Error("rendering the closing comment", "error", err)
		return
	}
	if err := p.r.Post(ctx, "closing", body); err != nil { // one comment, cut to fit: a 2 MB reply is not 33
		log.Error("posting the closing comment", "error", err)
	}
}

// Expect is a tool call or the end of the task, at every step.
func (p *plain) Expect() engine.Expect { return engine.Expect{Calls: true, Done: true} }

// State is the plain loop's part of the checkpoint, the living comment's
// included.
func (p *plain) State() any {
	if p.board != nil {
		p.st.Board = p.board.State()
	}
	return p.st
}
