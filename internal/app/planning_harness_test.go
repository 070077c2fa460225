package app_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
)

// planTime is the clock of planned runs in tests, so rendered comments and
// history lines are stable.
var planTime = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// at says where a planned run is, as the model sees it in the request.
type at struct {
	Phase  string // pre-planning, planning, execution, reflection, revision, verification, replan decision
	Action string // in execution
	Tools  int    // tool results since the phase (or action) instruction
	Retry  bool   // the last message is a correction
	Instr  string // the instruction text
}

var (
	phaseLine  = regexp.MustCompile(`Phase: ([a-z -]+)[.,]`)
	actionLine = regexp.MustCompile(`Phase: execution\. Action (\S+) `)
)

// where reads a request: the last phase instruction and what followed it.
func where(r llmtest.Received) at {
	var w at
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == llm.User && strings.Contains(r.Messages[n-1].Content, "could not be used") {
		w.Retry = true
	}
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role != llm.User && m.Role != llm.System {
			if m.Role == llm.ToolRole {
				w.Tools++
			}
			continue
		}
		k := strings.LastIndex(m.Content, "Phase: ")
		if k < 0 || m.Role == llm.System {
			if strings.HasPrefix(m.Content, engine.ResultPrefix) {
				w.Tools++
			}
			continue
		}
		instr := m.Content[k:]
		w.Instr = instr
		if p := phaseLine.FindStringSubmatch(instr); p != nil {
			w.Phase = p[1]
		}
		if a := actionLine.FindStringSubmatch(instr); a != nil {
			w.Action = a[1]
		}
		return w
	}
	return w
}

// object is a phase reply: the JSON object as text.
func object(v map[string]any) llmtest.Step {
	b, _ := json.Marshal(v)
	return llmtest.Reply{Content: string(b), Usage: llmtest.Usage{In: 200, Out: 40}}
}

func understanding(comment string) llmtest.Step {
	return object(map[string]any{"phase": "pre_planning", "comment": comment, "understanding": map[string]any{
		"goal": "add greeting files", "deliverables": []string{"hello.txt", "NOTES.md", "CHANGELOG.md"},
		"constraints": []string{"keep it short"}, "ambiguities": []string{}, "confidence": "high"}})
}

// fourActions is the plan of the scripted tasks: two subtasks, four actions.
func fourActions(comment string) llmtest.Step {
	return object(map[string]any{"phase": "planning", "comment": comment,
		"goal_understanding": map[string]any{"main_objective": "Add a greeting and its notes",
			"success_criteria": []string{"hello.txt says hello", "NOTES.md and CHANGELOG.md exist"}},
		"task_decomposition": map[string]any{"reasoning": "greeting first, then the notes about it",
			"subtasks": []map[string]any{
				{"id": "t1", "description": "the greeting", "dependencies": []string{}},
				{"id": "t2", "description": "notes", "dependencies": []string{"t1"}}}},
		"action_plan": map[string]any{"execution_order": []string{"t1", "t2"}, "actions": []map[string]any{
			{"id": "a1", "task_id": "t1", "description": "Write hello.txt", "tools": []string{"fs/write_file"}},
			{"id": "a2", "task_id": "t1", "description": "Check hello.txt", "tools": []string{"fs/read_text_file"}},
			{"id": "a3", "task_id": "t2", "description": "Write NOTES.md", "tools": []string{"fs/write_file"}},
			{"id": "a4", "task_id": "t2", "description": "Write CHANGELOG.md", "tools": []string{"fs/write_file"}}}}})
}

func actionEnd(id, status, summary, comment string) llmtest.Step {
	v := map[string]any{"phase": "execution", "action_id": id, "status": status, "summary": summary}
	if comment != "" {
		v["comment"] = comment
	}
	return object(v)
}

func reflection(revise bool, evaluation, reason string) llmtest.Step {
	v := map[string]any{"phase": "reflection", "reflection": map[string]any{"status": "partial",
		"evaluation": evaluation, "plan_revision_needed": revise}}
	if revise {
		v["plan_revision"] = map[string]any{"reason": reason, "changes": []string{"write NOTES.md inside the workspace"}}
	} else {
		v["reflection"].(map[string]any)["status"] = "success"
	}
	return object(v)
}

func verification(passed bool, comment string) llmtest.Step {
	return object(map[string]any{"phase": "verification", "comment": comment, "verification": map[string]any{
		"passed": passed, "criteria": []map[string]any{
			{"criterion": "hello.txt says hello", "met": true, "evidence": "read it"},
			{"criterion": "NOTES.md and CHANGELOG.md exist", "met": passed}}},
		"additional_actions": []any{}})
}

// write asks for fs/write_file of name in the workspace.
func (e *env) write(r llmtest.Received, comment, name, content string) llmtest.Step {
	return e.call(r, comment, "fs/write_file", map[string]any{"path": filepath.Join(e.workspace, name), "content": content})
}

func (e *env) read(r llmtest.Received, comment, name string) llmtest.Step {
	return e.call(r, comment, "fs/read_text_file", map[string]any{"path": filepath.Join(e.workspace, name)})
}

// onePlan is a plan with one action, a1, writing hello.txt.
func onePlan() llmtest.Step {
	return object(map[string]any{"phase": "planning",
		"goal_understanding": map[string]any{"main_objective": "Add hello.txt", "success_criteria": []string{"hello.txt exists"}},
		"task_decomposition": map[string]any{"subtasks": []map[string]any{{"id": "t1", "description": "greeting"}}},
		"action_plan": map[string]any{"actions": []map[string]any{
			{"id": "a1", "task_id": "t1", "description": "Write hello.txt", "tools": []string{"fs/write_file"}}}}})
}

// shortPlan scripts a one-action task; phases not given by over follow the
// happy path.
func shortPlan(over func(e *env, r llmtest.Received, w at) llmtest.Step) func(*env, llmtest.Received) llmtest.Step {
	return func(e *env, r llmtest.Received) llmtest.Step {
		w := where(r)
		if over != nil {
			if s := over(e, r, w); s != nil {
				return s
			}
		}
		switch w.Phase {
		case "pre-planning":
			return understanding("")
		case "planning":
			return onePlan()
		case "execution":
			if w.Tools == 0 {
				return e.write(r, "", "hello.txt", "hello\n")
			}
			return actionEnd(w.Action, "completed", "written", "")
		case "verification":
			return verification(true, "ok")
		}
		e.t.Errorf("request %d: unexpected phase %q", r.N, w.Phase)
		return llmtest.Fault{Status: 400, Body: "unexpected"}
	}
}

func (e *env) runOK(t *testing.T) {
	t.Helper()
	if err := e.run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (e *env) wantLabels(t *testing.T, want ...string) {
	t.Helper()
	if l := e.labels(); !slices.Equal(l, want) {
		t.Errorf("labels %v, want %v; the log's last lines:\n%s", l, want, logTail(e, 30))
	}
}

// logTail is the last n lines of e's log, to say why a test's task ended
// where it did.
func logTail(e *env, n int) string {
	b, err := os.ReadFile(e.cfg.Logging.File)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
