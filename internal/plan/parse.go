package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/coding-agent/coding-agent/internal/engine"
)

// Understanding is the pre-planning statement of what the task asks.
type Understanding struct {
	Goal         string   `json:"goal"`
	Deliverables []string `json:"deliverables"`
	Constraints  []string `json:"constraints,omitempty"`
	Ambiguities  []string `json:"ambiguities,omitempty"`
	Confidence   string   `json:"confidence"` // high, medium or low
}

// Reflection is the evaluation after a failed action or at an interval.
type Reflection struct {
	Status             string   `json:"status"` // success, failure or partial
	Evaluation         string   `json:"evaluation"`
	PlanRevisionNeeded bool     `json:"plan_revision_needed"`
	RevisionReason     string   `json:"revision_reason,omitempty"`
	RevisionChanges    []string `json:"revision_changes,omitempty"`
}

// Verification is one verification round's result.
type Verification struct {
	Passed   bool        `json:"passed"`
	Criteria []Criterion `json:"criteria,omitempty"`
	Missing  []string    `json:"missing,omitempty"`
}

// Criterion is one success criterion checked.
type Criterion struct {
	Criterion string `json:"criterion"`
	Met       bool   `json:"met"`
	Evidence  string `json:"evidence,omitempty"`
}

// header is what every phase reply may carry.
type header struct {
	Phase   string `json:"phase"`
	Comment string `json:"comment"`
}

func (h header) head() header { return h }

type phased interface{ head() header }

type preReply struct {
	header
	Understanding *Understanding `json:"understanding"`
}

type planReply struct {
	header
	GoalUnderstanding *Goal          `json:"goal_understanding"`
	TaskDecomposition *Decomposition `json:"task_decomposition"`
	ActionPlan        *ActionPlan    `json:"action_plan"`
}

// plan is the plan a checked reply holds.
func (r *planReply) plan() *Plan {
	return &Plan{GoalUnderstanding: *r.GoalUnderstanding, TaskDecomposition: *r.TaskDecomposition, ActionPlan: *r.ActionPlan}
}

type actionReply struct {
	header
	ActionID string `json:"action_id"`
	Status   string `json:"status"` // completed or failed
	Summary  string `json:"summary"`
}

type reflectionReply struct {
	header
	Reflection *struct {
		Status             string `json:"status"`
		Evaluation         string `json:"evaluation"`
		PlanRevisionNeeded *bool  `json:"plan_revision_needed"`
	} `json:"reflection"`
	PlanRevision *struct {
		Reason  string   `json:"reason"`
		Changes []string `json:"changes"`
	} `json:"plan_revision"`
}

type revisionReply struct {
	header
	Reason            string         `json:"reason"`
	Changes           []string       `json:"changes"`
	TaskDecomposition *Decomposition `json:"task_decomposition"`
	ActionPlan        *ActionPlan    `json:"action_plan"`
}

type verificationReply struct {
	header
	Verification *struct {
		Passed   *bool       `json:"passed"`
		Criteria []Criterion `json:"criteria"`
		Missing  []string    `json:"missing"`
	} `json:"verification"`
	AdditionalActions []Action `json:"additional_actions"`
}

type replanReply struct {
	header
	Decision string `json:"decision"` // replan, skip or abort
	Reason   string `json:"reason"`
}

// decodePhase finds the phase object in a reply's text: the first JSON
// object that decodes into T, names the expected phase (or none) and passes
// check. When none does, the first object's problem is returned as a
// *engine.ReplyError for the model.
func decodePhase[T phased](text, phase string, check func(*T) error) (*T, error) {
	objs := engine.JSONObjects(text)
	if len(objs) == 0 {
		return nil, &engine.ReplyError{Reason: "the reply contained no JSON object"}
	}
	var first error
	for _, obj := range objs {
		v := new(T)
		err := json.NewDecoder(bytes.NewReader([]byte(obj))).Decode(v)
		switch {
		case err != nil:
			err = fmt.Errorf("the JSON object could not be read: %v", err)
		case (*v).head().Phase != "" && (*v).head().Phase != phase:
			err = fmt.Errorf(`"phase" is %q, but this step is %q`, (*v).head().Phase, phase)
		default:
			err = check(v)
		}
		if err == nil {
			return v, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, &engine.ReplyError{Reason: first.Error()}
}

func oneOf(field, value string, allowed ...string) error {
	if slices.Contains(allowed, value) {
		return nil
	}
	return fmt.Errorf("%q is %q; it must be one of %s", field, value, strings.Join(quoteAll(allowed), ", "))
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

func checkPre(r *preReply) error {
	u := r.Understanding
	if u == nil {
		return fmt.Errorf(`"understanding" is missing`)
	}
	if strings.TrimSpace(u.Goal) == "" {
		return fmt.Errorf(`"understanding.goal" is empty`)
	}
	return oneOf("understanding.confidence", u.Confidence, "high", "medium", "low")
}

func checkPlanShape(r *planReply) error {
	switch {
	case r.GoalUnderstanding == nil:
		return fmt.Errorf(`"goal_understanding" is missing`)
	case r.TaskDecomposition == nil:
		return fmt.Errorf(`"task_decomposition" is missing`)
	case r.ActionPlan == nil:
		return fmt.Errorf(`"action_plan" is missing`)
	}
	return nil
}

func checkReflection(r *reflectionReply) error {
	if r.Reflection == nil {
		return fmt.Errorf(`"reflection" is missing`)
	}
	if r.Reflection.PlanRevisionNeeded == nil {
		return fmt.Errorf(`"reflection.plan_revision_needed" is missing; it must be true or false`)
	}
	return oneOf("reflection.status", r.Reflection.Status, "success", "failure", "partial")
}

func checkRevisionShape(r *revisionReply) error {
	switch {
	case strings.TrimSpace(r.Reason) == "":
		return fmt.Errorf(`"reason" is empty`)
	case r.ActionPlan == nil:
		return fmt.Errorf(`"action_plan" is missing`)
	}
	return nil
}

func checkVerification(r *verificationReply) error {
	if r.Verification == nil {
		return fmt.Errorf(`"verification" is missing`)
	}
	if r.Verification.Passed == nil {
		return fmt.Errorf(`"verification.passed" is missing; it must be true or false`)
	}
	return nil
}

func (r *reflectionReply) value() Reflection {
	v := Reflection{Status: r.Reflection.Status, Evaluation: r.Reflection.Evaluation,
		PlanRevisionNeeded: *r.Reflection.PlanRevisionNeeded}
	if r.PlanRevision != nil {
		v.RevisionReason, v.RevisionChanges = r.PlanRevision.Reason, r.PlanRevision.Changes
	}
	return v
}

func (r *verificationReply) value() Verification {
	return Verification{Passed: *r.Verification.Passed, Criteria: r.Verification.Criteria, Missing: r.Verification.Missing}
}
