package plan

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/golden"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

var started = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// announced is the closing comment of a planned run that ended as out,
// its verification having judged v, announced in lang.
func announced(t *testing.T, lang report.Lang, v Verification, out engine.Outcome) string {
	t.Helper()
	plan := &Plan{GoalUnderstanding: Goal{MainObjective: "Say hello"},
		ActionPlan: ActionPlan{Actions: []Action{{ID: "a1", TaskID: "t1", Description: "write hello.py", Status: Done}}}}
	pol, _ := json.Marshal(state{At: At{Phase: PhaseVerification}, Plan: plan, Rounds: 1, Verification: &v, Changes: []string{"a1: wrote hello.py"}})
	data, _ := json.Marshal(map[string]any{"version": 2, "mode": mode, "messages": []llm.Message{{Role: llm.System, Content: "x"}},
		"calls": 5, "started": started, "final": out, "policy": json.RawMessage(pol)})
	st := &memState{cp: map[task.Ref]store.Checkpoint{testRef: {Data: data}}}
	e, err := engine.New(engine.Options{LLM: &noLLM{}, Tools: noTools{}, State: st, Now: func() time.Time { return started.Add(90 * time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	s := testSettings()
	s.HistoryDir = t.TempDir()
	f := &memForge{}
	c, err := New(Options{Engine: e, Forge: f, Settings: s, Lang: lang})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(context.Background(), engine.Input{Task: task.Task{Ref: testRef}}); err != nil {
		t.Fatal(err)
	}
	for i := len(f.posts) - 1; i >= 0; i-- { // the last: the living comment comes before it
		if p := f.posts[i]; strings.Contains(p, "### ") && strings.Contains(p, "hello.py") {
			return postonce.Unmark(p) // the key's hidden line is the run's own
		}
	}
	t.Fatalf("no closing comment among %q", f.posts)
	return ""
}

// The verification report says what ran, or that the work was checked by
// reading and nothing was run; ✅ marks a command that ran and exited 0,
// never the model's own judgement.
func TestVerificationSaysWhatRan(t *testing.T) {
	v := Verification{Passed: true, Criteria: []Criterion{{Criterion: "hello.py prints hello", Met: true, Evidence: "read it"}}}
	done := engine.Outcome{End: engine.Done, Comment: "hello.py prints hello.", Calls: 5, Reported: true}
	ran := done
	ran.Checks = []engine.CheckResult{{Command: "python3 -m unittest", ExitCode: 0, Output: "OK"}}
	ran.Ran = []toolhost.CommandRun{{Command: "pytest -q", ExitCode: 1}, {Command: "python3 hello.py", ExitCode: 0}}
	for _, lang := range []report.Lang{report.English, report.Japanese} {
		read := announced(t, lang, v, done)
		golden.Check(t, "verification_read_"+string(lang), read)
		if strings.Count(read, "✅") != 1 { // the heading's: nothing ran
			t.Errorf("%s: ✅ beside something that did not run:\n%s", lang, read)
		}
		withRuns := announced(t, lang, v, ran)
		golden.Check(t, "verification_ran_"+string(lang), withRuns)
		for _, want := range []string{"✅ `python3 -m unittest`", "❌ `pytest -q`", "✅ `python3 hello.py`"} {
			if !strings.Contains(withRuns, want) {
				t.Errorf("%s: the verification report lacks %q:\n%s", lang, want, withRuns)
			}
		}
	}
}

// Checks that refuse a planned done add an action to fix them and go back
// to execution in a new visit; once it is done the round ends done for the
// checks to judge, without another verification round.
func TestFailedChecksAddAnAction(t *testing.T) {
	plan := &Plan{GoalUnderstanding: Goal{MainObjective: "g"}, TaskDecomposition: Decomposition{Subtasks: []Subtask{{ID: "t1"}}},
		ActionPlan: ActionPlan{Actions: []Action{{ID: "a1", TaskID: "t1", Description: "d", Status: Done}}}}
	p, _ := startWith(t, state{At: At{Phase: PhaseVerification, Prompted: true}, Visit: 4, Plan: plan, Rounds: 1})
	failing := []engine.CheckResult{{Command: "make test", ExitCode: 2}}
	if err := p.Reopen(context.Background(), failing); err != nil {
		t.Fatal(err)
	}
	a := p.st.Plan.action("checks-1")
	if a == nil || a.Status != Pending || a.TaskID != "t1" || !strings.Contains(a.Description, "`make test` (exit 2)") {
		t.Fatalf("added action %+v", a)
	}
	if p.st.At != (At{Phase: PhaseExecution}) || p.st.Visit != 5 {
		t.Errorf("at %+v visit %d, want a new execution visit", p.st.At, p.st.Visit)
	}
	if len(plan.ActionPlan.Actions) != 1 {
		t.Errorf("the plan before the checks was changed in place")
	}
	if err := p.Reopen(context.Background(), failing); err != nil || p.st.Plan.action("checks-2") == nil {
		t.Errorf("a second refusal adds checks-2: %v", err)
	}
}

// A done outcome lists the completed actions as the round's steps (what a
// pull request's body and commit say the round did), apart from the
// verification note, its comment.
func TestDoneOutcomeListsTheCompletedActions(t *testing.T) {
	plan := &Plan{GoalUnderstanding: Goal{MainObjective: "g"}, TaskDecomposition: Decomposition{Subtasks: []Subtask{{ID: "t1"}}},
		ActionPlan: ActionPlan{Actions: []Action{{ID: "a1", TaskID: "t1", Description: "d", Status: Done}}}}
	changes := []string{"a1: wrote hello.py", "a2: made it print hello"}
	p, _ := startWith(t, state{At: At{Phase: PhaseVerification, Prompted: true}, Plan: plan, Rounds: 1, Changes: changes})
	out := engine.Outcome{End: engine.Done, Comment: "All criteria are met."}
	p.Ending(&out)
	if !slices.Equal(out.Steps, changes) || out.Comment != "All criteria are met." {
		t.Errorf("steps %q, comment %q; want the completed actions and the verification note", out.Steps, out.Comment)
	}
	failed := engine.Outcome{End: engine.Failed, Reason: "r"}
	p.Ending(&failed)
	if failed.Steps != nil {
		t.Errorf("a failed round's steps: %q", failed.Steps)
	}
}
