package plan

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/coding-agent/coding-agent/internal/report"
)

//go:embed prompts/*.tmpl
var promptFS embed.FS

var prompts = template.Must(template.New("").Funcs(template.FuncMap{"join": strings.Join}).
	ParseFS(promptFS, "prompts/*.tmpl"))

func render(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := prompts.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("rendering prompt %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()), nil
}

// languageNames is how the system prompt names the comment language.
var languageNames = map[report.Lang]string{report.Japanese: "Japanese", report.English: "English"}

func (c *Coordinator) systemPrompt() (string, error) {
	catalog, err := c.ts.Catalog()
	if err != nil {
		return "", err
	}
	lang := languageNames[c.o.Lang]
	if lang == "" {
		lang = "Japanese"
	}
	return render("system.tmpl", map[string]any{
		"PrePlanning": c.o.Settings.PrePlanning, "Language": lang, "MaxCalls": c.o.MaxCalls,
		"FunctionCalling": c.o.FunctionCalling, "Catalog": catalog,
	})
}

// phasePrompt is the instruction that opens the current phase (or the
// current action, in execution).
func (r *run) phasePrompt() (string, error) {
	st, s := r.st, r.c.o.Settings
	data := map[string]any{"MaxGather": s.MaxGatherCalls, "MaxSubtasks": s.MaxSubtasks,
		"Level": s.DecompositionLevel, "Options": r.replanOptions()}
	if st.Plan != nil {
		data["Plan"] = planText(st.Plan)
	}
	if st.Failed != "" && st.Plan != nil {
		if a := st.Plan.action(st.Failed); a != nil {
			data["Failed"], data["Failure"], data["Attempts"] = a.ID, a.Failure, a.Attempts
		}
	}
	switch st.Phase {
	case report.PhasePlanning:
		data["Replanning"] = st.Replans > 0
		data["Done"] = st.Changes
	case report.PhaseExecution:
		a := st.Plan.action(st.Current)
		done, total := st.Plan.count(Done)
		data["Action"], data["Description"], data["Expected"], data["Tools"] = a.ID, a.Description, a.ExpectedOutcome, a.Tools
		data["TaskID"], data["Done"], data["Total"], data["MaxCalls"] = a.TaskID, done, total, s.MaxCallsPerAction
		data["Subtask"] = subtaskText(st.Plan, a.TaskID)
		if a.Attempts > 0 {
			data["Attempt"], data["Failure"] = a.Attempts+1, a.Failure
		}
	case report.PhaseReflection:
		data["Trigger"], data["Since"] = st.Trigger, st.SinceReflection
		data["RevisionsLeft"] = max(s.MaxRevisions-len(st.RevisionNotes), 0)
	case report.PhaseRevision:
		data["Reason"] = r.lastRevisionReason()
	case report.PhaseVerification:
		data["Round"], data["MaxRounds"], data["LastRound"] = st.Rounds, s.MaxVerifyRounds, st.Rounds >= s.MaxVerifyRounds
		if st.Plan != nil {
			data["Criteria"] = st.Plan.GoalUnderstanding.SuccessCriteria
		}
	}
	return render(string(st.Phase), data)
}

// correction tells the model what was wrong with its reply and what the
// phase expects.
func (r *run) correction(reason string) (string, error) {
	st := r.st
	shape, err := render("shape_"+string(st.Phase), map[string]any{"Action": st.Current, "Options": r.replanOptions()})
	if err != nil {
		return "", err
	}
	return render("correction", map[string]any{"Reason": strings.TrimSuffix(reason, "."), "Shape": shape,
		"Calls": takesCalls(st.Phase), "Count": st.Unusable, "Max": r.c.o.MaxUnusable})
}

// lastRevisionReason is the reason the latest reflection gave for revising.
func (r *run) lastRevisionReason() string {
	for i := len(r.history) - 1; i >= 0; i-- {
		if e := r.history[i]; e.Type == EntryReflection && e.Evaluation != nil {
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
