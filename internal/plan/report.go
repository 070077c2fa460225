package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// Reporting never stops a task: a comment that cannot be posted or edited
// is logged by the Board and the work goes on.

// phaseKey names the comment that collects the per-call sections of the
// current phase visit.
func (r *run) phaseKey(p report.Phase) string { return fmt.Sprintf("%s-%d", p, r.st.Visit) }

// callSection adds the section written after one model call: the reply's
// comment, or the phase's default message with the call number.
func (r *run) callSection(ctx context.Context, p *pending) {
	if !r.c.o.Settings.CallComments {
		return
	}
	action := ""
	if p.Phase == report.PhaseExecution {
		action = r.st.Current
	}
	comment := p.Comment
	if comment == "" && p.Phase == report.PhaseExecution && len(p.Calls) == 0 {
		var v actionReply
		if json.Unmarshal(p.Object, &v) == nil && v.Status == "failed" {
			comment = r.c.o.Lang.ActionFailed(action, firstLine(v.Summary, 300))
		}
	}
	if comment == "" && len(p.Calls) > 0 {
		var tools []string
		for _, c := range p.Calls {
			tools = append(tools, c.Tool)
		}
		comment = r.c.o.Lang.ToolStep(tools)
	}
	body, err := r.c.o.Lang.Call(p.Phase, r.st.Calls, comment, action, r.c.o.Now())
	r.section(ctx, p.Phase, body, err)
}

// llmError adds the ⚠️ section for a model call that failed or could not
// be used.
func (r *run) llmError(ctx context.Context, reason string, retrying bool) {
	body, err := r.c.o.Lang.LLMError(r.st.Phase, reason, retrying, r.c.o.Now())
	r.section(ctx, r.st.Phase, body, err)
}

// toolError adds the ❌ section for a tool call that ended in an error.
func (r *run) toolError(ctx context.Context, tool string, res toolhost.Result) {
	body, err := r.c.o.Lang.ToolError(tool, firstLine(res.Text, 500), r.st.Current, r.c.o.Now())
	r.section(ctx, r.st.Phase, body, err)
}

func (r *run) section(ctx context.Context, p report.Phase, body string, err error) {
	if err != nil {
		r.log.Error("rendering a comment section", "error", err)
		return
	}
	_ = r.board.AddSection(ctx, r.phaseKey(p), body)
}

// progress posts or edits the progress report.
func (r *run) progress(ctx context.Context) {
	st := r.st
	if st.Plan == nil {
		return
	}
	p := report.Progress{Goal: st.Plan.GoalUnderstanding.MainObjective, Revisions: st.RevisionNotes, Notes: st.Notes,
		Phase: st.Phase, Finished: st.Final != nil, UpdatedAt: r.c.o.Now()}
	if p.Finished {
		p.Phase = ""
	}
	for _, a := range st.Plan.ActionPlan.Actions {
		pa := report.ProgressAction{ID: a.ID, Description: a.Description, Status: report.ActionPending}
		switch {
		case a.Status == Done:
			pa.Status = report.ActionDone
		case a.Status == Skipped:
			pa.Status, pa.Note = report.ActionSkipped, firstLine(a.Failure, 200)
		case a.Failure != "" && p.Finished:
			pa.Status, pa.Note = report.ActionFailed, firstLine(a.Failure, 200)
		case a.Failure != "" && a.Attempts > 0:
			pa.Note = firstLine(a.Failure, 200) // still pending: it is tried again
		}
		p.Actions = append(p.Actions, pa)
	}
	body, err := r.c.o.Lang.Progress(p)
	if err != nil {
		r.log.Error("rendering the progress report", "error", err)
		return
	}
	_ = r.board.SetProgress(ctx, body)
}

// finish ends the run. The outcome is saved first, so a resume returns it
// without more work; then the progress report shows the end and the
// closing comment gives the outcome, what changed, the verification and a
// receipt. Once the outcome is saved it is returned even if a later save
// fails: a finished task is never reported as a system error.
func (r *run) finish(ctx context.Context, status task.Status, text string) (*agent.Outcome, error) {
	st := r.st
	out := agent.Outcome{Status: status, Turns: st.Calls, Reported: true, Ignored: st.Ignored}
	if status == task.Done {
		out.Comment = text
		out.Summary = strings.TrimSpace(strings.Join(append(slices.Clone(st.Changes), text), "\n"))
	} else {
		out.Reason = text
		if st.Plan != nil && st.Current != "" {
			if a := st.Plan.action(st.Current); a != nil && a.Failure == "" {
				a.Failure = text
			}
		}
	}
	st.Final = &out
	if err := r.save(ctx); err != nil {
		return nil, err
	}
	r.log.Info("planned run ended", "status", status, "calls", st.Calls, "tool_calls", st.ToolCalls,
		"revisions", len(st.RevisionNotes), "replans", st.Replans, "verification_rounds", st.Rounds)
	r.announce(ctx)
	return &out, nil
}

// announce posts the end of a run: the final progress report and the
// closing comment, once.
func (r *run) announce(ctx context.Context) {
	st, out := r.st, r.st.Final
	r.progress(ctx)
	f := report.Final{Succeeded: out.Status == task.Done, Summary: out.Comment, Reason: r.c.o.Redact(out.Reason),
		Changes: slices.Clone(st.Changes), VerificationRan: st.Verification != nil, VerificationRounds: st.Rounds, IgnoredComments: st.Ignored,
		Receipt: report.Receipt{LLMCalls: st.Calls, ToolCalls: st.ToolCalls, TokensIn: int64(st.TokensIn),
			TokensOut: int64(st.TokensOut), Duration: r.c.o.Now().Sub(st.Started).Round(time.Second)}}
	if st.Plan != nil {
		for _, a := range st.Plan.ActionPlan.Actions {
			if a.Status == Skipped {
				f.Changes = append(f.Changes, r.c.o.Lang.SkippedAction(a.ID, firstLine(a.Failure, 200)))
			}
		}
	}
	if v := st.Verification; v != nil {
		f.VerificationPassed, f.VerificationNotes = v.Passed, verificationNotes(*v)
	}
	if body, err := r.c.o.Lang.Final(f); err != nil {
		r.log.Error("rendering the closing comment", "error", err)
	} else {
		_ = r.board.Post(ctx, body)
	}
	st.Announced = true
	if err := r.save(ctx); err != nil {
		r.log.Error("saving checkpoint after the closing comment", "error", err)
	}
}

// verificationNotes lists the criteria checked, for the closing comment.
func verificationNotes(v Verification) string {
	var s string
	for _, c := range v.Criteria {
		mark := "✅"
		if !c.Met {
			mark = "❌"
		}
		s += mark + " " + firstLine(c.Criterion, 200) + "\n"
	}
	for _, m := range v.Missing {
		s += "❌ " + firstLine(m, 200) + "\n"
	}
	return s
}
