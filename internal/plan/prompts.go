package plan

import (
	"embed"
	"fmt"
	"strings"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/report"
)

//go:embed prompts/*.tmpl
var promptFS embed.FS

var prompts = engine.ParsePrompts(promptFS, "prompts/*.tmpl")

// languageNames is how the system prompt names the comment language.
var languageNames = map[report.Lang]string{report.Japanese: "Japanese", report.English: "English"}

func (c *Coordinator) systemPrompt() (string, error) {
	e := c.o.Engine
	catalog, err := e.Toolset().Catalog()
	if err != nil {
		return "", err
	}
	lang := languageNames[c.o.Lang]
	if lang == "" {
		lang = "Japanese"
	}
	return prompts.Render("system.tmpl", map[string]any{
		"PrePlanning": c.o.Settings.PrePlanning, "Language": lang, "MaxCalls": e.MaxCalls(),
		"FunctionCalling": e.Toolset().Native(), "Finish": e.FinishFn(), "Catalog": catalog,
	})
}

// phasePrompt is the instruction that opens the current phase (or the
// current action, in execution).
func (p *policy) phasePrompt() (string, error) {
	st, s := p.st, p.c.o.Settings
	data := map[string]any{"MaxGather": s.MaxGatherCalls, "MaxSubtasks": s.MaxSubtasks,
		"Level": s.DecompositionLevel, "Options": p.replanOptions(), "Finish": p.finishFn()}
	if st.Plan != nil {
		data["Plan"] = planText(st.Plan)
	}
	if st.At.Phase != PhaseExecution && st.Plan != nil {
		if a := st.Plan.action(st.At.Action); a != nil {
			data["Failed"], data["Failure"], data["Attempts"] = a.ID, a.Failure, a.Attempts
		}
	}
	switch st.At.Phase {
	case PhasePlanning:
		data["Replanning"] = st.Replans > 0
		data["Done"] = st.Changes
	case PhaseExecution:
		a := st.Plan.action(st.At.Action)
		done, total := st.Plan.count(Done)
		data["Action"], data["Description"], data["Expected"], data["Tools"] = a.ID, a.Description, a.ExpectedOutcome, a.Tools
		data["TaskID"], data["Done"], data["Total"], data["MaxCalls"] = a.TaskID, done, total, s.MaxCallsPerAction
		data["Subtask"] = subtaskText(st.Plan, a.TaskID)
		if a.Attempts > 0 {
			data["Attempt"], data["Failure"] = a.Attempts+1, a.Failure
		}
	case PhaseReflection:
		data["Trigger"], data["Since"] = st.At.Trigger, st.SinceReflection
		data["RevisionsLeft"] = max(s.MaxRevisions-len(st.RevisionNotes), 0)
	case PhaseRevision:
		data["Reason"] = p.lastRevisionReason()
	case PhaseVerification:
		data["Round"], data["MaxRounds"], data["LastRound"] = st.Rounds, s.MaxVerifyRounds, st.Rounds >= s.MaxVerifyRounds
		if st.Plan != nil {
			data["Criteria"] = st.Plan.GoalUnderstanding.SuccessCriteria
		}
	}
	return prompts.Render(string(st.At.Phase), data)
}

// Correction tells the model what was wrong with its reply and what the
// phase expects.
func (p *policy) Correction(reason string) (string, error) {
	st := p.st
	shape, err := prompts.Render("shape_"+string(st.At.Phase), map[string]any{"Action": p.At().Action, "Options": p.replanOptions()})
	if err != nil {
		return "", err
	}
	return prompts.Render("correction", map[string]any{"Reason": strings.TrimSuffix(reason, "."), "Shape": shape,
		"Calls": st.At.Phase.takesCalls(), "Finish": p.finishFn(), "Count": p.r.Counts().Unusable, "Max": p.c.o.Engine.MaxUnusable()})
}

// finishFn is the function name of the tool whose call gives the phase's
// object, in the phases that take calls of a constrained run with native
// calls (engine.FinishTool); "" where the object is replied as text.
func (p *policy) finishFn() string {
	if !p.st.At.Phase.takesCalls() {
		return ""
	}
	return p.c.o.Engine.FinishFn()
}

// lastRevisionReason is the reason the latest reflection gave for revising.
func (p *policy) lastRevisionReason() string {
	for i := len(p.history) - 1; i >= 0; i-- {
		if e := p.history[i]; e.Type == EntryReflection && e.Evaluation != nil {
			if e.Evaluation.RevisionReason != "" {
				return e.Evaluation.RevisionReason
			}
			return e.Evaluation.Evaluation
		}
	}
	return ""
}

// planText lists the actions with their status, for the model.
func planText(p *Plan) string {
	var b strings.Builder
	for _, a := range p.ActionPlan.Actions {
		status := string(a.Status)
		if a.Status == Pending && a.Attempts > 0 {
			status = fmt.Sprintf("pending, failed %d times: %s", a.Attempts, firstLine(a.Failure, 200))
		}
		fmt.Fprintf(&b, "- %s (%s) [%s]: %s", a.ID, a.TaskID, status, firstLine(a.Description, 300))
		if a.Status == Done && a.Summary != "" {
			fmt.Fprintf(&b, " → %s", firstLine(a.Summary, 300))
		}
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

func subtaskText(p *Plan, id string) string {
	for _, s := range p.TaskDecomposition.Subtasks {
		if s.ID == id {
			return firstLine(s.Description, 300)
		}
	}
	return ""
}

// Pinned is what a compacted conversation keeps in view: the goal, the
// plan with each action's status, and the phase with the action in hand.
func (p *policy) Pinned() string {
	st := p.st
	if st.Plan == nil {
		return fmt.Sprintf("You are in the %s phase.", st.At.Phase)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Goal: %s\nThe plan now:\n%s\nYou are in the %s phase.", firstLine(st.Plan.GoalUnderstanding.MainObjective, 300),
		planText(st.Plan), st.At.Phase)
	if a := st.Plan.action(p.At().Action); a != nil {
		fmt.Fprintf(&b, " The action in hand is %s: %s", a.ID, firstLine(a.Description, 300))
		if a.ExpectedOutcome != "" {
			fmt.Fprintf(&b, " (expected: %s)", firstLine(a.ExpectedOutcome, 300))
		}
	}
	return b.String()
}
