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
// never stops the task, so it never fails. With a living comment the call
// is a step of it instead (report.Step): its comment, the tools it called
// with the files and commands they name, and the same comment as the
// step before counted there (×n).
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
	var calls []report.StepCall
	for _, c := range a.Calls {
		calls = append(calls, report.CallOf(c.Tool, c.Args))
	}
	if p.c.o.Separate {
		return p.postSection(ctx, a, comment, calls)
	}
	n := p.r.Counts().Calls
	if last := p.lastStep(); last != nil && comment != "" && last.Phase == string(phase) && last.Comment == strings.TrimSpace(comment) {
		last.Repeats++
		last.Calls = append(last.Calls, calls...)
	} else {
		if comment == "" && len(calls) == 0 {
			def, err := lang.Default(string(phase), action)
			if err != nil {
				p.log.Error("rendering a step", "error", err)
			}
			comment = def
		}
		p.addStep(report.Step{N: n, Phase: string(phase), Comment: strings.TrimSpace(comment), Calls: calls})
	}
	p.progress(ctx, false)
	return nil
}

// lastStep is the living comment's newest step, nil when there is none.
func (p *policy) lastStep() *report.Step {
	if len(p.st.Steps) == 0 {
		return nil
	}
	return &p.st.Steps[len(p.st.Steps)-1]
}

// maxSteps bounds the steps the checkpoint keeps for the living comment:
// older ones are counted (Earlier), and stay in its edit history.
const maxSteps = 300

// addStep adds s to the living comment's steps.
func (p *policy) addStep(s report.Step) {
	p.st.Steps = append(p.st.Steps, s)
	if over := len(p.st.Steps) - maxSteps; over > 0 {
		p.st.Steps = p.st.Steps[over:]
		p.st.Earlier += over
	}
}

// postSection is Post in separate mode: a section of the phase comment.
func (p *policy) postSection(ctx context.Context, a *engine.Act, comment string, calls []report.StepCall) error {
	phase, lang := p.st.At.Phase, p.c.o.Lang
	if comment == "" && len(calls) > 0 {
		comment = lang.ToolStep(calls)
	}
	if p.repeated(ctx, comment) {
		return nil
	}
	body, err := lang.Call(string(phase), p.r.Counts().Calls, comment, p.At().Action, p.c.o.Engine.Now())
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
// server on the LAN). With a living comment it is a step's note.
func (p *policy) Trouble(ctx context.Context, reason string, retrying bool) {
	lang := p.c.o.Lang
	if !p.c.o.Separate {
		p.addStep(report.Step{N: p.r.Counts().Calls + 1, Phase: string(p.st.At.Phase),
			Note: lang.CallTrouble(firstLine(sanitize.Hosts(reason), 300), retrying)})
		p.progress(ctx, false)
		return
	}
	body, err := lang.LLMError(string(p.st.At.Phase), sanitize.Hosts(reason), retrying, p.c.o.Engine.Now())
	p.section(ctx, body, err)
}

// toolError adds the ❌ section for a tool call that ended in an error,
// without the hosts its text may name (the model reads them all). With a
// living comment, the call is marked failed in its step, with the error.
func (p *policy) toolError(ctx context.Context, tc engine.ToolCall, res toolhost.Result) {
	text := firstLine(sanitize.Hosts(res.Text), 500)
	if !p.c.o.Separate {
		if last := p.lastStep(); last != nil {
			want := report.CallOf(tc.Tool, tc.Args)
			for i, c := range last.Calls {
				if !c.Failed && c.Tool == want.Tool && c.Target == want.Target {
					last.Calls[i].Failed = true
					break
				}
			}
			last.Note = p.c.o.Lang.ToolFailed(tc.Tool, firstLine(text, 200))
		}
		return // shown with the next edit
	}
	body, err := p.c.o.Lang.ToolError(tc.Tool, text, p.At().Action, p.c.o.Engine.Now())
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
	p.show(ctx, report.Live{Finished: finished})
}

// Halt makes the living comment's last edit say the run paused, stopped
// or was interrupted (separate comments: the worker's notice says it).
func (p *policy) Halt(ctx context.Context, out engine.Outcome) {
	if !p.c.o.Separate {
		p.show(ctx, report.Live{Halted: out.End})
	}
}

// show posts or edits the progress report, the living comment's state
// as end says (working, finished or halted).
func (p *policy) show(ctx context.Context, end report.Live) {
	st, finished := p.st, end.Finished
	if st.Plan == nil {
		if !p.c.o.Separate {
			p.live(ctx, "", end)
		}
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
	if !p.c.o.Separate {
		pr.Phase, pr.UpdatedAt, pr.Finished = "", time.Time{}, false // the living comment's footer says it
	}
	body, err := p.c.o.Lang.Progress(pr)
	if err != nil {
		p.log.Error("rendering the progress report", "error", err)
		return
	}
	if p.c.o.Separate {
		_ = p.board.SetProgress(ctx, body)
		return
	}
	p.live(ctx, body, end)
}

// live shows the progress and the steps in the living comment, in v's
// state; the round's end (finished or halted) is its last edit, made
// whatever the time.
func (p *policy) live(ctx context.Context, progress string, v report.Live) {
	v.Progress, v.Steps, v.Earlier, v.UpdatedAt = progress, p.st.Steps, p.st.Earlier, p.c.o.Engine.Now()
	if !v.Last() {
		v.Now = string(p.st.At.Phase)
	}
	_ = p.board.Live(ctx, v) // logged by the Board
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
	f.Page = p.r.Input().Page
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
