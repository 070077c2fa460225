package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Replan decisions.
const (
	decideReplan = "replan"
	decideSkip   = "skip"
	decideAbort  = "abort"
)

// decode reads the current phase's object from a reply's text and checks it
// against the plan, returning it re-encoded (for the checkpoint) with its
// comment. Anything wrong is a *agent.ReplyError for the model.
func (r *run) decode(text string) (json.RawMessage, string, error) {
	switch r.st.Phase {
	case report.PhasePrePlanning:
		return encode(decodePhase(text, "pre_planning", checkPre))
	case report.PhasePlanning:
		return encode(decodePhase(text, "planning", r.checkPlan))
	case report.PhaseExecution:
		return encode(decodePhase(text, "execution", r.checkActionEnd))
	case report.PhaseReflection:
		return encode(decodePhase(text, "reflection", checkReflection))
	case report.PhaseRevision:
		return encode(decodePhase(text, "revision", r.checkRevision))
	case report.PhaseVerification:
		return encode(decodePhase(text, "verification", r.checkVerification))
	case report.PhaseReplan:
		return encode(decodePhase(text, "replan", r.checkReplan))
	}
	return nil, "", fmt.Errorf("planning: unknown phase %q", r.st.Phase)
}

func encode[T phased](v *T, err error) (json.RawMessage, string, error) {
	if err != nil {
		return nil, "", err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, "", fmt.Errorf("encoding phase reply: %w", err)
	}
	return raw, strings.TrimSpace((*v).head().Comment), nil
}

func (r *run) limits() limits {
	return limits{maxSubtasks: r.c.o.Settings.MaxSubtasks, known: r.c.ts.Known}
}

func (r *run) checkPlan(p *planReply) error {
	if err := checkPlanShape(p); err != nil {
		return err
	}
	return validate(&Plan{GoalUnderstanding: *p.GoalUnderstanding, TaskDecomposition: *p.TaskDecomposition,
		ActionPlan: *p.ActionPlan}, r.limits())
}

func (r *run) checkActionEnd(a *actionReply) error {
	if a.ActionID != r.st.Current {
		return fmt.Errorf(`"action_id" is %q, but the action being carried out is %q`, a.ActionID, r.st.Current)
	}
	return oneOf("status", a.Status, "completed", "failed")
}

func (r *run) checkRevision(v *revisionReply) error {
	if err := checkRevisionShape(v); err != nil {
		return err
	}
	_, err := r.revised(v)
	return err
}

func (r *run) checkVerification(v *verificationReply) error {
	if err := checkVerification(v); err != nil {
		return err
	}
	if *v.Verification.Passed {
		for _, c := range v.Verification.Criteria {
			if !c.Met {
				return fmt.Errorf(`"passed" is true but the criterion %q is not met`, c.Criterion)
			}
		}
		if len(v.Verification.Missing) > 0 {
			return fmt.Errorf(`"passed" is true but "missing" lists %q`, v.Verification.Missing[0])
		}
		return nil
	}
	if len(v.AdditionalActions) == 0 {
		return nil
	}
	_, err := r.extended(v.AdditionalActions)
	return err
}

func (r *run) checkReplan(v *replanReply) error {
	options := r.replanOptions()
	if err := oneOf("decision", v.Decision, options...); err != nil {
		return err
	}
	if strings.TrimSpace(v.Reason) == "" {
		return fmt.Errorf(`"reason" is empty`)
	}
	return nil
}

// replanOptions are the decisions open: a fresh plan only while the replan
// budget lasts.
func (r *run) replanOptions() []string {
	if r.st.Replans < r.c.o.Settings.MaxReplans {
		return []string{decideReplan, decideSkip, decideAbort}
	}
	return []string{decideSkip, decideAbort}
}

// revised is the plan after a revision: completed (and skipped) actions stay
// as they were, in their place; the revision's actions replace every
// pending one. A revised action reusing a pending action's id keeps its
// attempts. The result is validated like a new plan.
func (r *run) revised(v *revisionReply) (*Plan, error) {
	old := r.st.Plan
	p := &Plan{GoalUnderstanding: old.GoalUnderstanding, TaskDecomposition: old.TaskDecomposition}
	if v.TaskDecomposition != nil && len(v.TaskDecomposition.Subtasks) > 0 {
		p.TaskDecomposition = *v.TaskDecomposition
		p.TaskDecomposition.Subtasks = keepFinishedSubtasks(old, p.TaskDecomposition.Subtasks)
	}
	p.ActionPlan.ExecutionOrder = v.ActionPlan.ExecutionOrder
	finished := map[string]bool{}
	for _, a := range old.ActionPlan.Actions {
		if a.Status != Pending {
			p.ActionPlan.Actions = append(p.ActionPlan.Actions, a)
			finished[a.ID] = true
		}
	}
	for _, a := range v.ActionPlan.Actions {
		if finished[a.ID] {
			continue // already done: stays done
		}
		a.Status, a.Summary, a.Failure, a.Attempts = Pending, "", "", 0
		if prev := old.action(a.ID); prev != nil {
			a.Attempts, a.Failure = prev.Attempts, prev.Failure
		}
		p.ActionPlan.Actions = append(p.ActionPlan.Actions, a)
	}
	if err := validate(p, r.limits()); err != nil {
		return nil, err
	}
	return p, nil
}

// keepFinishedSubtasks adds to a revision's subtasks those of the old plan
// that finished actions belong to and the revision left out: finished work
// keeps its place in the plan.
func keepFinishedSubtasks(old *Plan, subs []Subtask) []Subtask {
	have := map[string]bool{}
	for _, s := range subs {
		have[s.ID] = true
	}
	var kept []Subtask
	for _, a := range old.ActionPlan.Actions {
		if a.Status == Pending || have[a.TaskID] {
			continue
		}
		for _, s := range old.TaskDecomposition.Subtasks {
			if s.ID == a.TaskID {
				kept = append(kept, Subtask{ID: s.ID, Description: s.Description, Complexity: s.Complexity})
				have[s.ID] = true
			}
		}
	}
	return append(kept, subs...)
}

// extended is the plan with the actions a failed verification asked for.
func (r *run) extended(more []Action) (*Plan, error) {
	p := clonePlan(r.st.Plan)
	for _, a := range more {
		a.Status, a.Summary, a.Failure, a.Attempts = Pending, "", "", 0
		p.ActionPlan.Actions = append(p.ActionPlan.Actions, a)
	}
	if err := validate(p, r.limits()); err != nil {
		return nil, err
	}
	return p, nil
}

func clonePlan(p *Plan) *Plan {
	data, _ := json.Marshal(p)
	var out Plan
	_ = json.Unmarshal(data, &out)
	return &out
}

// apply acts on a phase reply.
func (r *run) apply(ctx context.Context, p *pending) (*agent.Outcome, error) {
	var err error
	var out *agent.Outcome
	switch p.Phase {
	case report.PhasePrePlanning:
		r.enter(report.PhasePlanning) // the understanding stays in the conversation
	case report.PhasePlanning:
		var v planReply
		if err = json.Unmarshal(p.Object, &v); err == nil {
			err = r.adopt(ctx, &v)
		}
	case report.PhaseExecution:
		var v actionReply
		if err = json.Unmarshal(p.Object, &v); err == nil {
			out, err = r.actionEnded(ctx, &v)
		}
	case report.PhaseReflection:
		var v reflectionReply
		if err = json.Unmarshal(p.Object, &v); err == nil {
			out, err = r.reflected(ctx, v.value())
		}
	case report.PhaseRevision:
		var v revisionReply
		if err = json.Unmarshal(p.Object, &v); err == nil {
			err = r.revise(ctx, &v)
		}
	case report.PhaseVerification:
		var v verificationReply
		if err = json.Unmarshal(p.Object, &v); err == nil {
			out, err = r.verified(ctx, &v, p.Comment)
		}
	case report.PhaseReplan:
		var v replanReply
		if err = json.Unmarshal(p.Object, &v); err == nil {
			out, err = r.decided(ctx, &v)
		}
	default:
		err = fmt.Errorf("unknown phase %q", p.Phase)
	}
	if err != nil {
		return nil, fmt.Errorf("applying the %s reply of %s: %w", p.Phase, r.ref, err)
	}
	if out != nil {
		return out, nil
	}
	return nil, r.save(ctx)
}

// adopt takes a new plan (first plan, or a fresh plan after a replan
// decision) and starts carrying it out.
func (r *run) adopt(ctx context.Context, v *planReply) error {
	p := &Plan{GoalUnderstanding: *v.GoalUnderstanding, TaskDecomposition: *v.TaskDecomposition, ActionPlan: *v.ActionPlan}
	for i := range p.ActionPlan.Actions {
		a := &p.ActionPlan.Actions[i]
		a.Status, a.Summary, a.Failure, a.Attempts = Pending, "", "", 0
	}
	if err := r.record(Entry{Type: EntryPlan, Plan: p}); err != nil {
		return err
	}
	r.st.Plan, r.st.Current, r.st.SinceReflection, r.st.Failed = p, "", 0, ""
	r.enter(report.PhaseExecution)
	r.progress(ctx)
	return nil
}

// actionEnded records the end of the current action.
func (r *run) actionEnded(ctx context.Context, v *actionReply) (*agent.Outcome, error) {
	if v.Status == "failed" {
		reason := strings.TrimSpace(v.Summary)
		if reason == "" {
			reason = "the model reported the action as failed"
		}
		return r.actionFailed(ctx, reason)
	}
	st, s := r.st, r.c.o.Settings
	a := st.Plan.action(st.Current)
	a.Status, a.Summary, a.Failure = Done, strings.TrimSpace(v.Summary), ""
	st.Changes = append(st.Changes, strings.TrimSpace(a.ID+": "+firstLine(a.Summary, 200)))
	st.Current = ""
	st.SinceReflection++
	r.progress(ctx)
	if s.Reflection && s.ReflectEvery > 0 && st.SinceReflection >= s.ReflectEvery && st.Plan.next() != nil {
		st.Trigger, st.Failed = "interval", ""
		r.enter(report.PhaseReflection)
	}
	return nil, nil
}

// actionFailed records a failed attempt at the current action, then
// reflects, retries it, or asks for a replan decision.
func (r *run) actionFailed(ctx context.Context, reason string) (*agent.Outcome, error) {
	st, s := r.st, r.c.o.Settings
	a := st.Plan.action(st.Current)
	a.Attempts++
	a.Failure = reason
	r.log.Warn("action failed", "action", a.ID, "attempt", a.Attempts, "reason", reason)
	st.Failed, st.Current = a.ID, ""
	r.progress(ctx)
	if s.Reflection && s.ReflectOnError {
		st.Trigger = "error"
		r.enter(report.PhaseReflection)
		return nil, r.save(ctx)
	}
	r.retryOrDecide()
	return nil, r.save(ctx)
}

// retryOrDecide tries the failed action again while attempts remain, and
// asks for a replan decision after that.
func (r *run) retryOrDecide() {
	a := r.st.Plan.action(r.st.Failed)
	if a != nil && a.Status == Pending && a.Attempts >= r.c.o.Settings.MaxAttempts {
		r.enter(report.PhaseReplan)
		return
	}
	r.enter(report.PhaseExecution)
}

// reflected acts on a reflection: revise the plan while revisions remain,
// otherwise carry on (retrying a failed action, or deciding about it).
func (r *run) reflected(ctx context.Context, v Reflection) (*agent.Outcome, error) {
	st := r.st
	if err := r.record(Entry{Type: EntryReflection, Trigger: st.Trigger, Action: st.Failed, Evaluation: &v}); err != nil {
		return nil, err
	}
	st.SinceReflection = 0
	switch {
	case v.PlanRevisionNeeded && len(st.RevisionNotes) < r.c.o.Settings.MaxRevisions:
		r.enter(report.PhaseRevision)
	case st.Trigger == "error":
		r.retryOrDecide()
	default:
		r.enter(report.PhaseExecution)
	}
	return nil, nil
}

// revise adopts a revised plan and says on the progress report what changed.
func (r *run) revise(ctx context.Context, v *revisionReply) error {
	p, err := r.revised(v)
	if err != nil {
		return err
	}
	st := r.st
	if err := r.record(Entry{Type: EntryRevision, Plan: p, Reason: v.Reason, Changes: v.Changes}); err != nil {
		return err
	}
	st.Plan, st.Current = p, ""
	st.RevisionNotes = append(st.RevisionNotes, report.ProgressRevision{N: len(st.RevisionNotes) + 1, Reason: v.Reason,
		Changes: slices.Clone(v.Changes), At: r.c.o.Now().UTC()})
	r.enter(report.PhaseExecution)
	r.progress(ctx)
	return nil
}

// planDone is reached when no action is pending: verify, or finish.
func (r *run) planDone(ctx context.Context) (*agent.Outcome, error) {
	if !r.c.o.Settings.Verification {
		if skipped := r.skipped(); len(skipped) > 0 {
			// Nothing checks that the work is complete without them.
			return r.finish(ctx, task.Failed, "actions were skipped and verification is off: "+strings.Join(skipped, ", "))
		}
		return r.finish(ctx, task.Done, "")
	}
	r.enter(report.PhaseVerification)
	r.progress(ctx)
	return nil, r.save(ctx)
}

// skipped lists the ids of skipped actions.
func (r *run) skipped() []string {
	var ids []string
	for _, a := range r.st.Plan.ActionPlan.Actions {
		if a.Status == Skipped {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// verified acts on a verification round: finish when it passed; add the
// missing actions while rounds remain; fail otherwise.
func (r *run) verified(ctx context.Context, v *verificationReply, comment string) (*agent.Outcome, error) {
	st := r.st
	res := v.value()
	if err := r.record(Entry{Type: EntryVerification, Round: st.Rounds, Verification: &res}); err != nil {
		return nil, err
	}
	st.Verification = &res
	if res.Passed {
		return r.finish(ctx, task.Done, comment)
	}
	if st.Rounds < r.c.o.Settings.MaxVerifyRounds && len(v.AdditionalActions) > 0 {
		p, err := r.extended(v.AdditionalActions)
		if err != nil {
			return nil, err
		}
		st.Plan, st.Current = p, ""
		r.enter(report.PhaseExecution)
		r.progress(ctx)
		return nil, nil
	}
	return r.finish(ctx, task.Failed, "verification failed: "+verificationGaps(res))
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

// decided acts on a replan decision.
func (r *run) decided(ctx context.Context, v *replanReply) (*agent.Outcome, error) {
	st := r.st
	if err := r.record(Entry{Type: EntryReplan, Action: st.Failed, Decision: v.Decision, Reason: v.Reason}); err != nil {
		return nil, err
	}
	switch v.Decision {
	case decideReplan:
		st.Replans++
		r.enter(report.PhasePlanning)
	case decideSkip:
		a := st.Plan.action(st.Failed)
		a.Status = Skipped
		r.enter(report.PhaseExecution)
		r.progress(ctx)
	default:
		return r.finish(ctx, task.Failed, fmt.Sprintf("gave up after action %s failed %d times: %s",
			st.Failed, st.Plan.action(st.Failed).Attempts, v.Reason))
	}
	return nil, nil
}
