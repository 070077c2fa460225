package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/report"
)

// Replan decisions.
const (
	decideReplan = "replan"
	decideSkip   = "skip"
	decideAbort  = "abort"
)

// apply acts on a phase object: it records what the phase decided, then
// the transition function says where the run goes.
func (p *policy) apply(ctx context.Context, a *engine.Act) (*engine.Outcome, error) {
	switch p.st.At.Phase {
	case PhasePrePlanning:
		// The understanding stays in the conversation.
		return p.move(ctx, understood, p.facts(), "", "")
	case PhasePlanning:
		var v planReply
		if err := json.Unmarshal(a.Object, &v); err != nil {
			return nil, err
		}
		return nil, p.adopt(ctx, v.plan())
	case PhaseExecution:
		var v actionReply
		if err := json.Unmarshal(a.Object, &v); err != nil {
			return nil, err
		}
		return p.actionEnded(ctx, &v)
	case PhaseReflection:
		var v reflectionReply
		if err := json.Unmarshal(a.Object, &v); err != nil {
			return nil, err
		}
		return p.reflected(ctx, v.value())
	case PhaseRevision:
		var v revisionReply
		if err := json.Unmarshal(a.Object, &v); err != nil {
			return nil, err
		}
		return nil, p.revise(ctx, &v)
	case PhaseVerification:
		var v verificationReply
		if err := json.Unmarshal(a.Object, &v); err != nil {
			return nil, err
		}
		return p.verified(ctx, &v, a.Comment)
	case PhaseReplan:
		var v replanReply
		if err := json.Unmarshal(a.Object, &v); err != nil {
			return nil, err
		}
		return p.decided(ctx, &v)
	}
	return nil, fmt.Errorf("unknown phase %q", p.st.At.Phase)
}

// facts are what the transition function reads of the state.
func (p *policy) facts() facts {
	st, s := p.st, p.c.o.Settings
	f := facts{since: st.SinceReflection, revisionsLeft: len(st.RevisionNotes) < s.MaxRevisions,
		roundsLeft: st.Rounds < s.MaxVerifyRounds, skipped: len(p.skipped()) > 0, fixing: st.Fixes > 0}
	if st.Plan != nil {
		f.pending = st.Plan.next() != nil
		if a := st.Plan.action(st.At.Action); a != nil {
			f.attempts = a.Attempts
		}
	}
	return f
}

// move takes the transition for e: to the next phase (or action), or to the
// end of the run, done with comment or failed for reason.
func (p *policy) move(_ context.Context, e eventKind, f facts, comment, reason string) (*engine.Outcome, error) {
	m := p.c.o.Settings.next(p.st.At, e, f)
	switch m.End {
	case engine.Done:
		return &engine.Outcome{End: engine.Done, Comment: comment}, nil
	case engine.Failed:
		return &engine.Outcome{End: engine.Failed, Reason: reason}, nil
	}
	if m.Enter {
		p.enter(m.To)
	} else {
		p.st.At = m.To
	}
	return nil, nil
}

// adopt takes a new plan (first plan, or a fresh plan after a replan
// decision) and starts carrying it out.
func (p *policy) adopt(ctx context.Context, plan *Plan) error {
	for i := range plan.ActionPlan.Actions {
		a := &plan.ActionPlan.Actions[i]
		a.Status, a.Summary, a.Failure, a.Attempts = Pending, "", "", 0
	}
	if err := p.record(Entry{Type: EntryPlan, Plan: plan}); err != nil {
		return err
	}
	p.st.Plan, p.st.SinceReflection = plan, 0
	_, err := p.move(ctx, planned, p.facts(), "", "")
	p.progress(ctx, false)
	return err
}

// actionEnded records the end of the action in hand.
func (p *policy) actionEnded(ctx context.Context, v *actionReply) (*engine.Outcome, error) {
	if v.Status == "failed" {
		reason := strings.TrimSpace(v.Summary)
		if reason == "" {
			reason = "the model reported the action as failed"
		}
		return p.actionFailed(ctx, reason)
	}
	st := p.st
	a := st.Plan.action(st.At.Action)
	a.Status, a.Summary, a.Failure = Done, strings.TrimSpace(v.Summary), ""
	st.Changes = append(st.Changes, strings.TrimSpace(a.ID+": "+firstLine(a.Summary, 200)))
	st.SinceReflection++
	st.At.Action = ""
	p.progress(ctx, false)
	return p.move(ctx, actionDone, p.facts(), "", "")
}

// actionFailed records a failed attempt at the action in hand, then
// reflects, retries it, or asks for a replan decision.
func (p *policy) actionFailed(ctx context.Context, reason string) (*engine.Outcome, error) {
	a := p.st.Plan.action(p.st.At.Action)
	a.Attempts++
	a.Failure = reason
	p.log.Warn("action failed", "action", a.ID, "attempt", a.Attempts, "reason", reason)
	p.progress(ctx, false)
	return p.move(ctx, actionFailed, p.facts(), "", "")
}

// reflected records a reflection; the transition revises the plan while
// revisions remain, or carries on.
func (p *policy) reflected(ctx context.Context, v Reflection) (*engine.Outcome, error) {
	st := p.st
	if err := p.record(Entry{Type: EntryReflection, Trigger: st.At.Trigger, Action: st.At.Action, Evaluation: &v}); err != nil {
		return nil, err
	}
	st.SinceReflection = 0
	f := p.facts()
	f.revise = v.PlanRevisionNeeded
	return p.move(ctx, reflected, f, "", "")
}

// revise adopts a revised plan and says on the progress report what changed.
func (p *policy) revise(ctx context.Context, v *revisionReply) error {
	plan, err := p.revised(v)
	if err != nil {
		return err
	}
	st := p.st
	if err := p.record(Entry{Type: EntryRevision, Plan: plan, Reason: v.Reason, Changes: v.Changes}); err != nil {
		return err
	}
	st.Plan = plan
	st.RevisionNotes = append(st.RevisionNotes, report.ProgressRevision{N: len(st.RevisionNotes) + 1, Reason: v.Reason,
		Changes: slices.Clone(v.Changes), At: p.c.o.Engine.Now().UTC()})
	_, err = p.move(ctx, revised, p.facts(), "", "")
	p.progress(ctx, false)
	return err
}

// skipped lists the ids of skipped actions.
func (p *policy) skipped() []string {
	var ids []string
	if p.st.Plan == nil {
		return nil
	}
	for _, a := range p.st.Plan.ActionPlan.Actions {
		if a.Status == Skipped {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// verified records a verification round: finish when it passed; add the
// missing actions while rounds remain; fail otherwise.
func (p *policy) verified(ctx context.Context, v *verificationReply, comment string) (*engine.Outcome, error) {
	st := p.st
	res := v.value()
	if err := p.record(Entry{Type: EntryVerification, Round: st.Rounds, Verification: &res}); err != nil {
		return nil, err
	}
	st.Verification = &res
	f := p.facts()
	f.passed, f.additions = res.Passed, len(v.AdditionalActions) > 0
	if !res.Passed && f.additions && f.roundsLeft {
		plan, err := p.extended(v.AdditionalActions)
		if err != nil {
			return nil, err
		}
		st.Plan = plan
	}
	if res.Passed {
		st.Closing = comment
	}
	out, err := p.move(ctx, verified, f, comment, "verification failed: "+verificationGaps(res))
	if out == nil && err == nil {
		p.progress(ctx, false)
	}
	return out, err
}

// verificationGaps says what verification found missing.
func verificationGaps(v Verification) string {
	var gaps []string
	for _, c := range v.Criteria {
		if !c.Met {
			gaps = append(gaps, c.Criterion)
		}
	}
	gaps = append(gaps, v.Missing...)
	if len(gaps) == 0 {
		return "the model judged the work incomplete"
	}
	return strings.Join(gaps, "; ")
}

// decided records a replan decision about the failed action.
func (p *policy) decided(ctx context.Context, v *replanReply) (*engine.Outcome, error) {
	st := p.st
	failed := st.Plan.action(st.At.Action)
	if err := p.record(Entry{Type: EntryReplan, Action: failed.ID, Decision: v.Decision, Reason: v.Reason}); err != nil {
		return nil, err
	}
	e := abortDecided
	switch v.Decision {
	case decideReplan:
		e = replanDecided
		st.Replans++
	case decideSkip:
		e = skipDecided
		failed.Status = Skipped
	}
	out, err := p.move(ctx, e, p.facts(), "", fmt.Sprintf("gave up after action %s failed %d times: %s",
		failed.ID, failed.Attempts, v.Reason))
	if e == skipDecided {
		p.progress(ctx, false)
	}
	return out, err
}
