package plan

import (
	"encoding/json"
	"fmt"
	"strings"
)

// decode reads the current phase's object from a reply's text and checks it
// against the plan, returning it re-encoded (for the checkpoint) with its
// comment. Anything wrong is a *engine.ReplyError for the model.
func (p *policy) decode(text string) (json.RawMessage, string, error) {
	switch p.st.At.Phase {
	case PhasePrePlanning:
		return encode(decodePhase(text, "pre_planning", checkPre))
	case PhasePlanning:
		return encode(decodePhase(text, "planning", p.checkPlan))
	case PhaseExecution:
		return encode(decodePhase(text, "execution", p.checkActionEnd))
	case PhaseReflection:
		return encode(decodePhase(text, "reflection", checkReflection))
	case PhaseRevision:
		return encode(decodePhase(text, "revision", p.checkRevision))
	case PhaseVerification:
		return encode(decodePhase(text, "verification", p.checkVerification))
	case PhaseReplan:
		return encode(decodePhase(text, "replan", p.checkReplan))
	}
	return nil, "", fmt.Errorf("planning: unknown phase %q", p.st.At.Phase)
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

func (p *policy) limits() limits {
	return limits{maxSubtasks: p.c.o.Settings.MaxSubtasks, known: p.c.o.Engine.Toolset().Known}
}

func (p *policy) checkPlan(v *planReply) error {
	if err := checkPlanShape(v); err != nil {
		return err
	}
	return validate(v.plan(), p.limits())
}

func (p *policy) checkActionEnd(a *actionReply) error {
	if a.ActionID != p.st.At.Action {
		return fmt.Errorf(`"action_id" is %q, but the action being carried out is %q`, a.ActionID, p.st.At.Action)
	}
	return oneOf("status", a.Status, "completed", "failed")
}

func (p *policy) checkRevision(v *revisionReply) error {
	if err := checkRevisionShape(v); err != nil {
		return err
	}
	_, err := p.revised(v)
	return err
}

func (p *policy) checkVerification(v *verificationReply) error {
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
	_, err := p.extended(v.AdditionalActions)
	return err
}

func (p *policy) checkReplan(v *replanReply) error {
	options := p.replanOptions()
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
func (p *policy) replanOptions() []string {
	if p.st.Replans < p.c.o.Settings.MaxReplans {
		return []string{decideReplan, decideSkip, decideAbort}
	}
	return []string{decideSkip, decideAbort}
}

// revised is the plan after a revision: completed (and skipped) actions stay
// as they were, in their place; the revision's actions replace every
// pending one. A revised action reusing a pending action's id keeps its
// attempts. The result is validated like a new plan.
func (p *policy) revised(v *revisionReply) (*Plan, error) {
	old := p.st.Plan
	np := &Plan{GoalUnderstanding: old.GoalUnderstanding, TaskDecomposition: old.TaskDecomposition}
	if v.TaskDecomposition != nil && len(v.TaskDecomposition.Subtasks) > 0 {
		np.TaskDecomposition = *v.TaskDecomposition
		np.TaskDecomposition.Subtasks = keepFinishedSubtasks(old, np.TaskDecomposition.Subtasks)
	}
	np.ActionPlan.ExecutionOrder = v.ActionPlan.ExecutionOrder
	finished := map[string]bool{}
	for _, a := range old.ActionPlan.Actions {
		if a.Status != Pending {
			np.ActionPlan.Actions = append(np.ActionPlan.Actions, a)
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
		np.ActionPlan.Actions = append(np.ActionPlan.Actions, a)
	}
	if err := validate(np, p.limits()); err != nil {
		return nil, err
	}
	return np, nil
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
func (p *policy) extended(more []Action) (*Plan, error) {
	np := clonePlan(p.st.Plan)
	for _, a := range more {
		a.Status, a.Summary, a.Failure, a.Attempts = Pending, "", "", 0
		np.ActionPlan.Actions = append(np.ActionPlan.Actions, a)
	}
	if err := validate(np, p.limits()); err != nil {
		return nil, err
	}
	return np, nil
}

func clonePlan(p *Plan) *Plan {
	data, _ := json.Marshal(p)
	var out Plan
	_ = json.Unmarshal(data, &out)
	return &out
}
