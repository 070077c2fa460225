package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// Settings are planning mode's limits and switches, as config validated
// them (config's planning section).
type Settings struct {
	MaxSubtasks        int    // most subtasks in a plan
	DecompositionLevel string // minimal, moderate or detailed: how finely to split
	PrePlanning        bool   // state the understanding (and gather information) before planning
	MaxGatherCalls     int    // read-only tool calls in pre-planning, and in each verification round
	MaxCallsPerAction  int    // model calls one action may take before it counts as failed
	MaxAttempts        int    // attempts at one action before a replan decision
	Reflection         bool   // reflect at all
	ReflectOnError     bool   // reflect after a failed action
	ReflectEvery       int    // reflect after this many completed actions; 0: never by count
	MaxRevisions       int    // plan revisions per task
	Verification       bool   // verify the work before finishing
	MaxVerifyRounds    int    // verification rounds, each may add actions
	MaxReplans         int    // fresh plans after repeated failure
	CallComments       bool   // a comment section after every model call
	HistoryDir         string // one JSONL history file per task
}

// repeatFailLimit is how many times one tool call with the same arguments
// may fail; the next identical request is not run and ends the action.
const repeatFailLimit = 2

// mode names planning mode's checkpoints.
const mode = "planning"

// Options configure a Coordinator.
type Options struct {
	Engine *engine.Engine
	// Forge is where the progress report and the per-call comments go.
	Forge    report.BoardForge
	Settings Settings
	// Lang is the language of the comments (and of the model's comments).
	Lang report.Lang
	// Separate: a progress comment, and a comment per phase visit with a
	// section per model call, instead of the round's one living comment
	// (report.Live) with the progress and a step per model call.
	Separate bool
	Redact   func(string) string
}

// Coordinator runs tasks in planning mode. It is safe for concurrent use.
type Coordinator struct {
	o      Options
	system string
}

// New prepares the planning system prompt.
func New(o Options) (*Coordinator, error) {
	if o.Engine == nil || o.Forge == nil {
		return nil, errors.New("plan: Engine and Forge are required")
	}
	if o.Settings.HistoryDir == "" {
		return nil, errors.New("plan: the history directory is required")
	}
	if o.Lang == "" {
		o.Lang = report.English
	}
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	c := &Coordinator{o: o}
	sys, err := c.systemPrompt()
	if err != nil {
		return nil, err
	}
	if err := o.Engine.Fits(sys); err != nil {
		return nil, err
	}
	c.system = sys
	return c, nil
}

// Run works on the task in planning mode until it is verified done, fails,
// ends at a checkpoint, or a system error occurs (returned). It resumes
// from the checkpoint.
func (c *Coordinator) Run(ctx context.Context, in engine.Input) (engine.Outcome, error) {
	return c.o.Engine.Run(ctx, in, &policy{c: c})
}

// state is planning mode's part of the checkpoint.
type state struct {
	At    At  `json:"at"`
	Visit int `json:"visit"` // phase visits: each gets its own comment

	Plan            *Plan `json:"plan,omitempty"`
	Replans         int   `json:"replans"`
	Rounds          int   `json:"rounds"` // verification rounds
	SinceReflection int   `json:"since_reflection"`

	Failures map[string]int `json:"failures,omitempty"` // failing tool call → times it failed

	Changes []string `json:"changes,omitempty"` // one line per completed action, across replans
	// RevisionNotes are the plan's revisions as the progress report lists
	// them, one per revision: their number is the revisions made.
	RevisionNotes []report.ProgressRevision `json:"revision_notes,omitempty"`
	Verification  *Verification             `json:"verification,omitempty"` // the last round's result; nil: none ran
	// Fixes counts the actions added because the repository's checks
	// refused a done (Reopen); Closing is the comment of the done they
	// refused, the round's closing comment once they pass.
	Fixes   int      `json:"check_fixes,omitempty"`
	Closing string   `json:"closing,omitempty"`
	Notes   []string `json:"notes,omitempty"` // progress report lines: comments applied

	// HistoryLen is how many entries the task's history held when this
	// checkpoint was saved, earlier runs' included.
	HistoryLen int               `json:"history_len"`
	Board      report.BoardState `json:"board"`
	// Last is the section of the last step posted in the current phase
	// comment: a step with the same comment updates it instead of adding
	// its own.
	Last *lastSection `json:"last_section,omitempty"`
	// Steps are the living comment's steps (the newest maxSteps), Earlier
	// how many older ones it no longer shows.
	Steps   []report.Step `json:"steps,omitempty"`
	Earlier int           `json:"earlier,omitempty"`
}

// invalid says why a saved state cannot be resumed ("" when it can): a
// known phase, a plan wherever one is needed, and an action that exists.
func (st *state) invalid() string {
	switch st.At.Phase {
	case PhasePrePlanning, PhasePlanning:
	case PhaseExecution, PhaseReflection, PhaseRevision, PhaseVerification, PhaseReplan:
		if st.Plan == nil {
			return fmt.Sprintf("phase %s without a plan", st.At.Phase)
		}
	default:
		return fmt.Sprintf("unknown phase %q", st.At.Phase)
	}
	if st.At.Phase == PhaseReplan && st.At.Action == "" {
		return "a replan decision about no action"
	}
	if a := st.At.Action; a != "" && (st.Plan == nil || st.Plan.action(a) == nil) {
		return fmt.Sprintf("action %q of phase %s is not in the plan", a, st.At.Phase)
	}
	return ""
}

// Planning answers every optional part of the engine's Policy.
var _ interface {
	engine.Policy
	engine.Locator
	engine.Refuser
	engine.CallWatcher
	engine.TroubleReporter
	engine.Hearer
	engine.Finisher
	engine.Halter
	engine.Reopener
	engine.Pinner
} = (*policy)(nil)

// policy is planning mode for one run.
type policy struct {
	c     *Coordinator
	r     *engine.Run
	st    *state
	log   *slog.Logger
	board *report.Board
	hist  *History
	// history is the history file's entries: read once when the run
	// starts, then extended by record, so no append reads the file again.
	history []Entry
}

func (p *policy) Mode() string   { return mode }
func (p *policy) System() string { return p.c.system }

// Begin opens the task's history and takes the saved state, or starts at
// the first phase.
func (p *policy) Begin(_ context.Context, r *engine.Run, saved json.RawMessage) error {
	ref := r.Input().Task.Ref
	p.r, p.log = r, r.Log()
	hist, err := OpenHistory(p.c.o.Settings.HistoryDir, ref)
	if err != nil {
		return err
	}
	p.hist = hist
	if p.history, err = hist.Load(); err != nil {
		p.log.Warn("planning history has unreadable lines", "error", err)
	}
	if saved != nil {
		var st state
		if err := json.Unmarshal(saved, &st); err != nil {
			return fmt.Errorf("%w: unreadable planning state: %v", engine.ErrUnresumable, err)
		}
		if why := st.invalid(); why != "" {
			return fmt.Errorf("%w: %s", engine.ErrUnresumable, why)
		}
		p.st = &st
		p.restorePlan()
	} else {
		p.st = &state{HistoryLen: len(p.history)}
		first := PhasePlanning
		if p.c.o.Settings.PrePlanning {
			first = PhasePrePlanning
		}
		p.enter(At{Phase: first})
	}
	bo := report.BoardOptions{Forge: p.c.o.Forge, Ref: ref, Redact: p.c.o.Redact, Logger: p.log, Key: r.Key, Lang: p.c.o.Lang}
	if !p.c.o.Separate {
		bo.EditEvery = report.LiveEditEvery
	}
	p.board = report.NewBoard(bo, p.st.Board)
	return nil
}

// restorePlan takes the plan from the history when the history holds a
// newer one than the checkpoint (the process stopped between writing the
// history line and saving the checkpoint); action progress recorded in the
// checkpoint is kept by action id.
func (p *policy) restorePlan() {
	latest, idx := LatestPlan(p.history)
	if latest == nil || idx < p.st.HistoryLen {
		return
	}
	if p.st.Plan != nil {
		for i := range latest.ActionPlan.Actions {
			a := &latest.ActionPlan.Actions[i]
			if old := p.st.Plan.action(a.ID); old != nil && old.Status != Pending {
				*a = *old
			}
		}
	}
	p.log.Info("plan restored from the planning history", "entry", idx+1)
	p.st.Plan = latest
}

// enter starts a phase visit: its instruction is added before the next
// model call, and its per-call comments go into a new comment.
func (p *policy) enter(at At) {
	p.st.At = at
	p.st.Visit++
	if at.Phase == PhaseVerification {
		p.st.Rounds++
	}
}

// Next takes the next pending action in execution (or moves on when none
// is left, or when the action in hand used up its model calls), and returns
// the instruction of a phase or action not yet given.
func (p *policy) Next(ctx context.Context) (string, *engine.Outcome, error) {
	for p.st.At.Phase == PhaseExecution && !p.inHand() {
		if out, err := p.advance(ctx); out != nil || err != nil {
			return "", out, err
		}
	}
	if p.st.At.Prompted {
		return "", nil, nil
	}
	text, err := p.phasePrompt()
	if err != nil {
		return "", nil, err
	}
	p.st.At.Prompted = true
	return text, nil, nil
}

// inHand reports whether execution has an action with model calls left.
func (p *policy) inHand() bool {
	at := p.st.At
	return at.Action != "" && p.r.Counts().Calls-at.From < p.c.o.Settings.MaxCallsPerAction
}

// advance takes the next pending action, or moves on when none is left, or
// fails the action in hand that used up its model calls.
func (p *policy) advance(ctx context.Context) (*engine.Outcome, error) {
	st := p.st
	if st.At.Action != "" {
		return p.actionFailed(ctx, fmt.Sprintf("the action did not finish within %d model calls", p.c.o.Settings.MaxCallsPerAction))
	}
	if next := st.Plan.next(); next != nil {
		st.At = At{Phase: PhaseExecution, Action: next.ID, From: p.r.Counts().Calls}
		return nil, nil
	}
	out, err := p.move(ctx, planFinished, p.facts(), st.Closing, "actions were skipped and verification is off: "+strings.Join(p.skipped(), ", "))
	if out == nil && err == nil {
		p.progress(ctx, false)
	}
	return out, err
}

// At is the phase, and the action in hand in execution.
func (p *policy) At() engine.Step {
	at := engine.Step{Phase: string(p.st.At.Phase)}
	if p.st.At.Phase == PhaseExecution {
		at.Action = p.st.At.Action
	}
	return at
}

// Read takes tool calls where the phase allows them, else the phase's
// object.
func (p *policy) Read(r engine.Reply) (*engine.Act, error) {
	if len(r.Calls) > 0 {
		if !p.st.At.Phase.takesCalls() {
			return nil, &engine.ReplyError{Reason: "this step takes no tool calls: reply with the JSON object described"}
		}
		return &engine.Act{Comment: r.Comment, Calls: r.Calls}, nil
	}
	obj, comment, err := p.decode(r.Text)
	if err != nil {
		return nil, err
	}
	return &engine.Act{Comment: comment, Object: obj}, nil
}

// Refuse keeps execution from repeating a call that failed too often (the
// action then fails), and the other phases to the read-only tools within
// their budget; a refusal outside execution counts as an unusable reply.
func (p *policy) Refuse(tc engine.ToolCall, a *engine.Act) (string, bool) {
	st, s, ts := p.st, p.c.o.Settings, p.c.o.Engine.Toolset()
	if st.At.Phase == PhaseExecution {
		if why := engine.RepeatedFailure(st.Failures, tc, repeatFailLimit); why != "" {
			a.Abort = why
			return why + ", and the action ends as failed", false
		}
		if a.Abort != "" {
			return "the action already ended as failed", false
		}
		return "", false
	}
	switch {
	case !ts.Known(tc.Tool):
		return fmt.Sprintf("there is no tool %q", tc.Tool), true
	case !ts.ReadOnly(tc.Tool):
		return "only read-only tools may be used in this phase; changes are made while carrying out the plan", true
	case st.At.Gathered >= s.MaxGatherCalls:
		return fmt.Sprintf("the %d read-only calls of this phase are used up; reply with the JSON object now", s.MaxGatherCalls), true
	}
	return "", false
}

// Called counts read-only calls, and failing calls in execution (cleared
// once something changed), reporting each tool error.
func (p *policy) Called(ctx context.Context, tc engine.ToolCall, res toolhost.Result) {
	st := p.st
	if st.At.Phase != PhaseExecution {
		st.At.Gathered++
	}
	switch {
	case res.IsError && st.At.Phase == PhaseExecution:
		if st.Failures == nil {
			st.Failures = map[string]int{}
		}
		st.Failures[tc.Key()]++
		p.toolError(ctx, tc, res)
	case res.IsError:
		p.toolError(ctx, tc, res)
	case !p.c.o.Engine.Toolset().ReadOnly(tc.Tool):
		st.Failures = nil // something changed: calls that failed before may work now
	}
}

// Apply ends the action after a refused call, or acts on a phase object.
func (p *policy) Apply(ctx context.Context, a *engine.Act) (*engine.Outcome, error) {
	if p.st.At.Phase == PhaseExecution && p.st.Plan.action(p.st.At.Action) == nil {
		return nil, fmt.Errorf("an execution step of %s with no action in hand", p.r.Input().Task.Ref)
	}
	if len(a.Calls) > 0 {
		if a.Abort != "" {
			return p.actionFailed(ctx, a.Abort)
		}
		return nil, nil
	}
	out, err := p.apply(ctx, a)
	if err != nil {
		return nil, fmt.Errorf("applying the %s reply of %s: %w", p.st.At.Phase, p.r.Input().Task.Ref, err)
	}
	return out, nil
}

// Heard notes on the progress report where new comments were applied.
func (p *policy) Heard(ctx context.Context, applied []engine.Applied) {
	where := p.c.o.Lang.PhaseName(string(p.st.At.Phase))
	if a := p.At().Action; a != "" {
		where += " " + a
	}
	for _, a := range applied {
		p.st.Notes = append(p.st.Notes, p.c.o.Lang.CommentApplied(a.Author, where, p.c.o.Engine.Now()))
	}
	p.progress(ctx, false)
}

// State is the state to checkpoint, with the board's.
func (p *policy) State() any {
	p.st.Board = p.board.State()
	return p.st
}

// record appends a history entry exactly once: when the history holds more
// entries than the checkpoint knows of and the newest is of e's type, the
// last apply got as far as writing its line before the process stopped,
// and it is not written again.
func (p *policy) record(e Entry) error {
	if n := len(p.history); n > p.st.HistoryLen && p.history[n-1].Type == e.Type {
		p.st.HistoryLen = n
		return nil
	}
	e.Timestamp = p.c.o.Engine.Now().UTC()
	if err := p.hist.Append(e); err != nil {
		return fmt.Errorf("planning history of %s: %w", p.r.Input().Task.Ref, err)
	}
	p.history = append(p.history, e)
	p.st.HistoryLen = len(p.history)
	return nil
}

// firstLine is the first non-empty line of s, cut to n runes.
func firstLine(s string, n int) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if rs := []rune(l); len(rs) > n {
				return string(rs[:n]) + "…"
			}
			return l
		}
	}
	return ""
}
