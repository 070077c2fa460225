package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// repeatFailLimit is how many times one tool call with the same arguments
// may fail; the next identical request is not run and ends the action.
const repeatFailLimit = 2

// run is one Run's mutable state.
type run struct {
	c     *Coordinator
	in    agent.Input
	ref   task.Ref
	st    *state
	log   *slog.Logger
	board *report.Board
	hist  *History
	// history is the history file's entries: read once when the run
	// starts, then extended by record, so no append reads the file again.
	// Its plans may be the state's own, changed as actions finish: after
	// start only the entries' types and reflections are read from it.
	history []Entry
}

// start loads the checkpoint, or begins a new run.
func (c *Coordinator) start(ctx context.Context, in agent.Input) (*run, error) {
	ref := in.Task.Ref
	hist, err := OpenHistory(c.o.HistoryDir, ref)
	if err != nil {
		return nil, err
	}
	r := &run{c: c, in: in, ref: ref, hist: hist, log: c.o.Logger.With("task", ref.String(), "mode", "planning")}
	if r.history, err = hist.Load(); err != nil {
		r.log.Warn("planning history has unreadable lines", "error", err)
	}
	cp, ok, err := c.o.State.LoadCheckpoint(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("loading checkpoint of %s: %w", ref, err)
	}
	if ok {
		var st state
		if err := json.Unmarshal(cp.Data, &st); err != nil || st.Version != stateVersion || st.Mode != modePlanning || !st.valid() {
			r.log.Warn("ignoring a checkpoint planning mode cannot resume (unreadable, or written by the plain loop); starting over",
				"error", err, "mode", st.Mode, "phase", st.Phase)
		} else {
			r.st = &st
			r.restorePlan()
			r.log.Info("resuming from checkpoint", "phase", st.Phase, "calls", st.Calls, "action", st.Current)
		}
	}
	if r.st == nil {
		if r.st, err = r.fresh(); err != nil {
			return nil, err
		}
	}
	r.board = report.NewBoard(report.BoardOptions{Forge: c.o.Forge, Ref: ref, Redact: c.o.Redact, Logger: r.log}, r.st.Board)
	return r, nil
}

// fresh is the state of a new run: the system prompt and the task.
func (r *run) fresh() (*state, error) {
	first, err := agent.TaskPrompt(r.in.Task, r.in.Comments, r.in.BotName, r.in.Rounds)
	if err != nil {
		return nil, err
	}
	st := &state{Version: stateVersion, Mode: modePlanning, Started: r.c.o.Now(), HistoryLen: len(r.history),
		Mark:     agent.MarkOf(r.in.Comments),
		Messages: []llm.Message{{Role: llm.System, Content: r.c.system}, {Role: llm.User, Content: first}}}
	r.st = st
	if r.c.o.Settings.PrePlanning {
		r.enter(report.PhasePrePlanning)
	} else {
		r.enter(report.PhasePlanning)
	}
	return st, nil
}

// valid reports whether a loaded state can be resumed: a known phase, a
// plan wherever one is needed, and an action in progress that exists.
func (st *state) valid() bool {
	if len(st.Messages) == 0 {
		return false
	}
	switch st.Phase {
	case report.PhasePrePlanning, report.PhasePlanning:
		return true
	case report.PhaseExecution, report.PhaseReflection, report.PhaseRevision, report.PhaseVerification, report.PhaseReplan:
		return st.Plan != nil && (st.Current == "" || st.Plan.action(st.Current) != nil) &&
			(st.Failed == "" || st.Plan.action(st.Failed) != nil)
	}
	return false
}

// restorePlan takes the plan from the history when the history holds a
// newer one than the checkpoint (the process stopped between writing the
// history line and saving the checkpoint); action progress recorded in the
// checkpoint is kept by action id.
func (r *run) restorePlan() {
	latest, idx := LatestPlan(r.history)
	if latest == nil || idx < r.st.HistoryLen {
		return
	}
	if r.st.Plan != nil {
		for i := range latest.ActionPlan.Actions {
			a := &latest.ActionPlan.Actions[i]
			if old := r.st.Plan.action(a.ID); old != nil && old.Status != Pending {
				*a = *old
			}
		}
	}
	r.log.Info("plan restored from the planning history", "entry", idx+1)
	r.st.Plan = latest
}

// enter starts a phase: its instruction is added before the next model
// call, and its per-call comments go into a new comment.
func (r *run) enter(p report.Phase) {
	st := r.st
	st.Phase, st.Prompted = p, false
	st.Visit++
	st.Gathered = 0
	if p == report.PhaseVerification {
		st.Rounds++
	}
}

// step makes one model call and acts on it, or finishes a pending reply.
// A non-nil Outcome ends the run.
func (r *run) step(ctx context.Context) (*agent.Outcome, error) {
	st, s := r.st, r.c.o.Settings
	if st.Pending != nil {
		return r.act(ctx)
	}
	if st.Calls >= r.c.o.MaxCalls {
		return r.finish(ctx, task.Failed, fmt.Sprintf("stopped after %d model calls without finishing (max_llm_process_num)", st.Calls))
	}
	if st.Phase == report.PhaseExecution {
		if st.Current == "" {
			next := st.Plan.next()
			if next == nil {
				return r.planDone(ctx)
			}
			st.Current, st.ActionCalls, st.Prompted = next.ID, 0, false
		}
		if st.ActionCalls >= s.MaxCallsPerAction {
			return r.actionFailed(ctx, fmt.Sprintf("the action did not finish within %d model calls", s.MaxCallsPerAction))
		}
	}
	if !st.Prompted {
		text, err := r.phasePrompt()
		if err != nil {
			return nil, err
		}
		r.instruct(text)
		st.Prompted = true
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.c.o.BeforeCall(ctx, r.ref, Step{Phase: st.Phase, Call: st.Calls + 1, Action: st.Current}); err != nil {
		return nil, err
	}
	if err := r.steer(ctx); err != nil {
		return nil, err
	}
	return r.ask(ctx)
}

// steer asks the task's Watch what changed: new comments join the
// conversation and the progress report says where they were applied; a
// pause or stop ends the run here, its state saved.
func (r *run) steer(ctx context.Context) error {
	if r.in.Watch == nil {
		return nil
	}
	st := r.st
	s, err := r.in.Watch.At(ctx, agent.Step{Phase: string(st.Phase), Turn: st.Calls + 1, Action: st.Current}, st.Mark)
	if err != nil {
		return err
	}
	changed := s.Message != "" || s.Mark != st.Mark || s.Ignored != st.Ignored
	st.Mark, st.Ignored = s.Mark, s.Ignored
	if s.Message != "" {
		r.instruct(s.Message)
		where := r.c.o.Lang.PhaseName(st.Phase)
		if st.Current != "" {
			where += " " + st.Current
		}
		for _, a := range s.Applied {
			st.Notes = append(st.Notes, r.c.o.Lang.CommentApplied(a.Author, where, r.c.o.Now()))
		}
		r.progress(ctx)
	}
	if changed {
		if err := r.save(ctx); err != nil {
			return err
		}
	}
	switch {
	case s.Stop:
		return fmt.Errorf("%w: %s", agent.ErrStopped, s.Reason)
	case s.Pause:
		return fmt.Errorf("%w: %s", agent.ErrPaused, s.Reason)
	}
	return nil
}

// instruct adds a user message, joined to the last one when that is a
// user message too (some chat templates want roles to alternate).
func (r *run) instruct(text string) {
	msgs := r.st.Messages
	if last := &msgs[len(msgs)-1]; last.Role == llm.User && len(last.ToolCalls) == 0 {
		last.Content += "\n\n" + text
		return
	}
	r.st.Messages = append(msgs, llm.Message{Role: llm.User, Content: text})
}

// ask makes one model request and records its reply as pending.
func (r *run) ask(ctx context.Context) (*agent.Outcome, error) {
	st, c := r.st, r.c
	resp, err := c.o.LLM.Chat(ctx, llm.Request{Messages: st.Messages, Tools: c.ts.Defs()})
	if err != nil && !errors.Is(err, llm.ErrEmptyReply) {
		r.llmError(ctx, err.Error(), false)
		if serr := r.save(ctx); serr != nil {
			r.log.Error("saving checkpoint after a model error", "error", serr)
		}
		return nil, fmt.Errorf("model call %d (%s) for %s: %w", st.Calls+1, st.Phase, r.ref, err)
	}
	st.Calls++
	if st.Phase == report.PhaseExecution {
		st.ActionCalls++
	}
	st.TokensIn += resp.Usage.InputTokens
	st.TokensOut += resp.Usage.OutputTokens
	if err := c.o.State.AddCounters(ctx, r.ref, store.Counters{LLMCalls: 1,
		TokensIn: resp.Usage.InputTokens, TokensOut: resp.Usage.OutputTokens}); err != nil {
		return nil, fmt.Errorf("recording model usage of %s: %w", r.ref, err)
	}
	if err != nil {
		return r.unusable(ctx, llm.Message{Role: llm.Assistant}, "the reply was empty")
	}
	msg := resp.Message
	msg.Role = llm.Assistant
	msg.Content = agent.StripThink(msg.Content)
	calls, comment, err := c.ts.Calls(resp.Message)
	if re, ok := errors.AsType[*agent.ReplyError](err); ok {
		return r.unusable(ctx, msg, re.Reason)
	}
	if err != nil {
		return nil, err
	}
	p := &pending{Phase: st.Phase, Comment: comment, Calls: calls}
	if len(calls) == 0 {
		obj, comment, err := r.decode(msg.Content)
		if re, ok := errors.AsType[*agent.ReplyError](err); ok {
			return r.unusable(ctx, msg, re.Reason)
		}
		if err != nil {
			return nil, err
		}
		p.Object, p.Comment = obj, comment
	} else if !takesCalls(st.Phase) {
		return r.unusable(ctx, msg, "this step takes no tool calls: reply with the JSON object described")
	}
	if len(calls) == 0 || st.Phase == report.PhaseExecution {
		st.Unusable = 0 // gathering calls count as usable once one is allowed to run
	}
	st.Messages = append(st.Messages, msg)
	st.Pending = p
	if err := r.save(ctx); err != nil {
		return nil, err
	}
	return r.act(ctx)
}

// takesCalls reports whether tool calls are allowed in a phase.
func takesCalls(p report.Phase) bool {
	return p == report.PhasePrePlanning || p == report.PhaseExecution || p == report.PhaseVerification
}

// unusable answers a reply that cannot be used with a correction naming what
// was wrong, or ends the task after MaxUnusable in a row.
func (r *run) unusable(ctx context.Context, msg llm.Message, reason string) (*agent.Outcome, error) {
	st, max := r.st, r.c.o.MaxUnusable
	st.Unusable++
	r.log.Warn("unusable model reply", "phase", st.Phase, "call", st.Calls, "count", st.Unusable, "reason", reason)
	msg.ToolCalls = nil // unanswered native calls would make the next request invalid
	if strings.TrimSpace(msg.Content) != "" {
		st.Messages = append(st.Messages, msg)
	}
	r.llmError(ctx, reason, st.Unusable < max)
	if st.Unusable >= max {
		return r.finish(ctx, task.Failed, fmt.Sprintf("the model sent %d unusable replies in a row (%s); the last: %s",
			st.Unusable, st.Phase, reason))
	}
	text, err := r.correction(reason)
	if err != nil {
		return nil, err
	}
	r.instruct(text)
	return nil, r.save(ctx)
}

// act carries out the pending reply: its comment section once, its tool
// calls one by one, or its phase object; checkpointing after each.
func (r *run) act(ctx context.Context) (*agent.Outcome, error) {
	st, p := r.st, r.st.Pending
	if !p.Posted {
		r.callSection(ctx, p)
		p.Posted = true
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	for p.Executed < len(p.Calls) {
		if err := r.call(ctx, p, p.Calls[p.Executed]); err != nil {
			return nil, err
		}
		p.Executed++
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	st.Pending = nil
	if len(p.Calls) > 0 {
		if st.Unusable >= r.c.o.MaxUnusable {
			return r.finish(ctx, task.Failed, fmt.Sprintf("tool calls were refused %d times in a row in %s (write tools before the plan exists, or past the read-only budget)",
				st.Unusable, p.Phase))
		}
		if p.Abort != "" {
			return r.actionFailed(ctx, p.Abort)
		}
		return nil, r.save(ctx)
	}
	return r.apply(ctx, p)
}

// call runs one tool call, or refuses it: a write before the plan exists, a
// call past the gathering budget, or a call that already failed too often.
func (r *run) call(ctx context.Context, p *pending, tc agent.ToolCall) error {
	st, ts := r.st, r.c.ts
	if reason := r.refusal(p, tc); reason != "" {
		r.log.Info("tool call refused", "tool", tc.Tool, "reason", reason)
		st.Messages = append(st.Messages, ts.Refusal(tc, reason))
		return nil
	}
	if p.Phase != report.PhaseExecution {
		st.Gathered++
		st.Unusable = 0
	}
	res, err := r.c.o.Tools.Call(ctx, tc.Tool, tc.Args)
	if err != nil {
		return fmt.Errorf("calling %s for %s: %w", tc.Tool, r.ref, err)
	}
	st.ToolCalls++
	if err := r.c.o.State.AddCounters(ctx, r.ref, store.Counters{ToolCalls: 1}); err != nil {
		return fmt.Errorf("recording tool call of %s: %w", r.ref, err)
	}
	key := tc.Key()
	switch {
	case res.IsError && p.Phase == report.PhaseExecution:
		if st.Failures == nil {
			st.Failures = map[string]int{}
		}
		st.Failures[key]++
		r.toolError(ctx, tc.Tool, res)
	case res.IsError:
		r.toolError(ctx, tc.Tool, res)
	case !ts.ReadOnly(tc.Tool):
		st.Failures = nil // something changed: calls that failed before may work now
	}
	warn := st.Repeats.Note(key)
	r.log.Info("tool call", "phase", p.Phase, "tool", tc.Tool, "is_error", res.IsError, "bytes", res.Bytes, "truncated", res.Truncated)
	msg, err := ts.ResultMessage(tc, res, warn)
	if err != nil {
		return err
	}
	st.Messages = append(st.Messages, msg)
	return nil
}

// refusal says why a call must not run, or "".
func (r *run) refusal(p *pending, tc agent.ToolCall) string {
	st, s, ts := r.st, r.c.o.Settings, r.c.ts
	switch p.Phase {
	case report.PhaseExecution:
		if n := st.Failures[tc.Key()]; n >= repeatFailLimit {
			p.Abort = fmt.Sprintf("the call %s with the same arguments failed %d times; it was not run again", tc.Tool, n)
			return p.Abort + ", and the action ends as failed"
		}
		if p.Abort != "" {
			return "the action already ended as failed"
		}
	default:
		if !ts.Known(tc.Tool) {
			st.Unusable++
			return fmt.Sprintf("there is no tool %q", tc.Tool)
		}
		if !ts.ReadOnly(tc.Tool) {
			st.Unusable++
			return "only read-only tools may be used in this phase; changes are made while carrying out the plan"
		}
		if st.Gathered >= s.MaxGatherCalls {
			st.Unusable++
			return fmt.Sprintf("the %d read-only calls of this phase are used up; reply with the JSON object now", s.MaxGatherCalls)
		}
	}
	return ""
}

// save writes the checkpoint.
func (r *run) save(ctx context.Context) error {
	r.st.Board = r.board.State()
	data, err := json.Marshal(r.st)
	if err != nil {
		return fmt.Errorf("encoding checkpoint of %s: %w", r.ref, err)
	}
	if err := r.c.o.State.SaveCheckpoint(ctx, r.ref, store.Checkpoint{Step: r.st.Calls, Data: data}); err != nil {
		return fmt.Errorf("saving checkpoint of %s: %w", r.ref, err)
	}
	return nil
}

// record appends a history entry exactly once: when the history holds more
// entries than the checkpoint knows of and the newest is of e's type, the
// last apply got as far as writing its line before the process stopped,
// and it is not written again.
func (r *run) record(e Entry) error {
	if n := len(r.history); n > r.st.HistoryLen && r.history[n-1].Type == e.Type {
		r.st.HistoryLen = n
		return nil
	}
	e.Timestamp = r.c.o.Now().UTC()
	if err := r.hist.Append(e); err != nil {
		return fmt.Errorf("planning history of %s: %w", r.ref, err)
	}
	r.history = append(r.history, e)
	r.st.HistoryLen = len(r.history)
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
