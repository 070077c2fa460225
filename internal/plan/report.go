package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/sanitize"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// Reporting never stops a task: a comment that cannot be posted or edited
// is logged by the Board and the work goes on.

// phaseKey names the comment that collects the per-call sections of the
// current phase visit.
func (p *policy) phaseKey() string { return fmt.Sprintf("%s-%d", p.st.At.Phase, p.st.Visit) }

// Post adds the section written after one model call: the reply's
// comment, or the phase's default message with the call number. Reporting
// never stops the task, so it never fails.
func (p *policy) Post(ctx context.Context, a *engine.Act) error {
	if !p.c.o.Settings.CallComments {
		return nil
	}
	phase, lang := p.st.At.Phase, p.c.o.Lang
	action := p.At().Action
	comment := a.Comment
	if comment == "" && phase == PhaseExecution && len(a.Calls) == 0 {
		var v actionReply
		if json.Unmarshal(a.Object, &v) == nil && v.Status == "failed" {
			comment = lang.ActionFailed(action, firstLine(v.Summary, 300))
		}
	}
	if comment == "" && len(a.Calls) > 0 {
		var tools []string
		for _, c := range a.Calls {
			tools = append(tools, c.Tool)
		}
		comment = lang.ToolStep(tools)
	}
	if p.repeated(ctx, comment) {
		return nil
	}
	body, err := lang.Call(string(phase), p.r.Counts().Calls, comment, action, p.c.o.Engine.Now())
	p.section(ctx, body, err)
	p.st.Last = nil
	if err == nil && comment != "" {
		p.st.Last = &lastSection{Key: p.phaseKey(), Comment: engine.Digest(comment), Section: body}
	}
	return nil
}

// lastSection is a step's section in a phase comment, and how many steps
// after it wrote the same comment.
type lastSection struct {
	Key     string `json:"key"`
	Comment string `json:"comment"` // a digest of the step's comment
	Section string `json:"section"` // as first posted
	Repeats int    `json:"repeats,omitempty"`
}

// shown is the section as the comment shows it now.
func (s lastSection) shown(lang report.Lang) string {
	if s.Repeats == 0 {
		return s.Section
	}
	return s.Section + "\n\n" + lang.SameAsPrevious(s.Repeats+1)
}

// repeated reports whether a step whose comment is the same as the
// previous step's in this phase comment was noted there, "(same as the
// previous step, ×N)", instead of getting a section of its own.
func (p *policy) repeated(ctx context.Context, comment string) bool {
	last, lang := p.st.Last, p.c.o.Lang
	if last == nil || comment == "" || last.Key != p.phaseKey() || last.Comment != engine.Digest(comment) {
		return false
	}
	next := *last
	next.Repeats++
	if ok, _ := p.board.ReplaceSection(ctx, last.Key, last.shown(lang), next.shown(lang)); !ok {
		return false
	}
	*last = next
	return true
}

// Trouble adds the ⚠️ section for a model call that failed or could not be
// used. The reason says what failed, not the host it failed at (a model
// server on the LAN).
func (p *policy) Trouble(ctx context.Context, reason string, retrying bool) {
	body, err := p.c.o.Lang.LLMError(string(p.st.At.Phase), sanitize.Hosts(reason), retrying, p.c.o.Engine.Now())
	p.section(ctx, body, err)
}

// toolError adds the ❌ section for a tool call that ended in an error,
// without the hosts its text may name (the model reads them all).
func (p *policy) toolError(ctx context.Context, tool string, res toolhost.Result) {
	body, err := p.c.o.Lang.ToolError(tool, firstLine(sanitize.Hosts(res.Text), 500), p.At().Action, p.c.o.Engine.Now())
	p.section(ctx, body, err)
}

func (p *policy) section(ctx context.Context, body string, err error) {
	if err != nil {
		p.log.Error("rendering a comment section", "error", err)
		return
	}
	_ = p.board.AddSection(ctx, p.phaseKey(), body)
}

// progress posts or edits the progress report; finished shows the end.
func (p *policy) progress(ctx context.Context, finished bool) {
	st := p.st
	if st.Plan == nil {
		return
	}
	pr := report.Progress{Goal: st.Plan.GoalUnderstanding.MainObjective, Revisions: st.RevisionNotes, Notes: st.Notes,
		Finished: finished, UpdatedAt: p.c.o.Engine.Now()}
	if !finished {
		pr.Phase = string(st.At.Phase)
	}
	for _, a := range st.Plan.ActionPlan.Actions {
		pa := report.ProgressAction{ID: a.ID, Description: a.Description, Status: report.ActionPending}
		switch {
		case a.Status == Done:
			pa.Status = report.ActionDone
		case a.Status == Skipped:
			pa.Status, pa.Note = report.ActionSkipped, firstLine(a.Failure, 200)
		case a.Failure != "" && finished:
			pa.Status, pa.Note = report.ActionFailed, firstLine(a.Failure, 200)
		case a.Failure != "" && a.Attempts > 0:
			pa.Note = firstLine(a.Failure, 200) // still pending: it is tried again
		}
		pr.Actions = append(pr.Actions, pa)
	}
	body, err := p.c.o.Lang.Progress(pr)
	if err != nil {
		p.log.Error("rendering the progress report", "error", err)
		return
	}
	_ = p.board.SetProgress(ctx, body)
}

// Ending completes the outcome: what the round did (done), or the failure
// recorded on the action in hand; the closing comment is planning mode's.
func (p *policy) Ending(out *engine.Outcome) {
	st := p.st
	out.Reported = true
	if out.End == engine.Done {
		out.Summary = strings.TrimSpace(strings.Join(append(slices.Clone(st.Changes), out.Comment), "\n"))
		out.Steps = slices.Clone(st.Changes)
	} else if st.Plan != nil && st.At.Phase == PhaseExecution {
		if a := st.Plan.action(st.At.Action); a != nil && a.Failure == "" {
			a.Failure = out.Reason
		}
	}
	p.log.Info("planned run ended", "end", out.End, "revisions", len(st.RevisionNotes), "replans", st.Replans,
		"verification_rounds", st.Rounds)
}

// Announce posts the end of a run: the final progress report and the
// closing comment with the outcome, what changed, the verification and a
// receipt.
func (p *policy) Announce(ctx context.Context, out engine.Outcome) {
	st, n := p.st, p.r.Counts()
	p.progress(ctx, true)
	f := report.Final{Succeeded: out.End == engine.Done, Summary: out.Comment, Reason: p.c.o.Redact(out.Reason),
		Changes: slices.Clone(st.Changes), VerificationRan: st.Verification != nil, VerificationRounds: st.Rounds, IgnoredComments: out.Ignored,
		Receipt: report.Receipt{LLMCalls: n.Calls + n.Summaries, ToolCalls: n.ToolCalls, TokensIn: int64(n.TokensIn),
			TokensOut: int64(n.TokensOut), Duration: p.c.o.Engine.Now().Sub(n.Started).Round(time.Second),
			Compactions: n.Compactions, Summaries: n.Summaries}}
	if st.Plan != nil {
		for _, a := range st.Plan.ActionPlan.Actions {
			if a.Status == Skipped {
				f.Changes = append(f.Changes, p.c.o.Lang.SkippedAction(a.ID, firstLine(a.Failure, 200)))
			}
		}
	}
	if v := st.Verification; v != nil {
		f.VerificationPassed, f.Criteria = v.Passed, criteria(*v)
	}
	f.Checks, f.Ran = report.Commands(out.Checks, out.Ran)
	if body, err := p.c.o.Lang.Final(f); err != nil {
		p.log.Error("rendering the closing comment", "error", err)
	} else {
		_ = p.board.Post(ctx, body)
	}
}

// criteria are the criteria the model checked and what it found missing,
// for the closing comment: its judgement, never marked ✅.
func criteria(v Verification) []report.Criterion {
	var out []report.Criterion
	for _, c := range v.Criteria {
		out = append(out, report.Criterion{Text: firstLine(c.Criterion, 200), Met: c.Met})
	}
	for _, m := range v.Missing {
		out = append(out, report.Criterion{Text: firstLine(m, 200)})
	}
	return out
}
