package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// twoTools are fs/read (read-only) and fs/write.
type twoTools struct{ noTools }

func (twoTools) Tools() []toolhost.Tool {
	return []toolhost.Tool{{Server: "fs", Name: "read", ReadOnly: true}, {Server: "fs", Name: "write"}}
}

// testRun is planning mode with two tools (fs/read, fs/write), the default
// settings and a state holding p.
func testRun(p *Plan) *policy {
	e, err := engine.New(engine.Options{LLM: &noLLM{}, Tools: twoTools{}, State: &memState{}})
	if err != nil {
		panic(err)
	}
	return &policy{c: &Coordinator{o: Options{Engine: e, Settings: testSettings()}}, st: &state{Plan: p}}
}

// progressPlan is a plan under way: a1 done, a2 failed once and pending, a3
// pending. t2 depends on t1.
func progressPlan() *Plan {
	return &Plan{
		GoalUnderstanding: Goal{MainObjective: "add a flag", SuccessCriteria: []string{"it works"}},
		TaskDecomposition: Decomposition{Subtasks: []Subtask{
			{ID: "t1", Description: "read"},
			{ID: "t2", Description: "change", Dependencies: []string{"t1"}},
		}},
		ActionPlan: ActionPlan{Actions: []Action{
			{ID: "a1", TaskID: "t1", Description: "read main.go", Tools: []string{"fs/read"}, Status: Done, Summary: "read it"},
			{ID: "a2", TaskID: "t2", Description: "edit main.go", Tools: []string{"fs/write"}, Status: Pending, Attempts: 1, Failure: "wrong path"},
			{ID: "a3", TaskID: "t2", Description: "edit docs", Status: Pending},
		}},
	}
}

func TestRevisedKeepsCompletedActionsAndAttempts(t *testing.T) {
	old := progressPlan()
	r := testRun(old)
	before := clonePlan(old)
	v := &revisionReply{Reason: "a2 edits the wrong file", ActionPlan: &ActionPlan{Actions: []Action{
		{ID: "a1", TaskID: "t1", Description: "read main.go again", Status: Pending},
		{ID: "a2", TaskID: "t2", Description: "edit cmd/main.go", Tools: []string{"fs/write"}},
		{ID: "a5", TaskID: "t2", Description: "update the README", Status: Done, Summary: "claimed", Attempts: 4},
	}}}

	got, err := r.revised(v)
	if err != nil {
		t.Fatalf("revised: %v", err)
	}
	want := []Action{
		{ID: "a1", TaskID: "t1", Description: "read main.go", Tools: []string{"fs/read"}, Status: Done, Summary: "read it"},
		{ID: "a2", TaskID: "t2", Description: "edit cmd/main.go", Tools: []string{"fs/write"}, Status: Pending, Attempts: 1, Failure: "wrong path"},
		{ID: "a5", TaskID: "t2", Description: "update the README", Status: Pending},
	}
	if diff := cmp.Diff(want, got.ActionPlan.Actions); diff != "" {
		t.Errorf("revised actions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(old.GoalUnderstanding, got.GoalUnderstanding); diff != "" {
		t.Errorf("goal changed (-old +new):\n%s", diff)
	}
	if diff := cmp.Diff(old.TaskDecomposition, got.TaskDecomposition); diff != "" {
		t.Errorf("decomposition changed without a new one (-old +new):\n%s", diff)
	}
	if diff := cmp.Diff(before, r.st.Plan); diff != "" {
		t.Errorf("revised changed the current plan (-before +after):\n%s", diff)
	}
}

func TestRevisedKeepsSkippedActionsAndTakesNewDecomposition(t *testing.T) {
	old := progressPlan()
	old.ActionPlan.Actions[1].Status = Skipped
	r := testRun(old)
	subs := []Subtask{
		{ID: "t1", Description: "read"},
		{ID: "t2", Description: "change", Dependencies: []string{"t1"}},
		{ID: "t3", Description: "document", Dependencies: []string{"t2"}},
	}
	v := &revisionReply{Reason: "docs are their own subtask",
		TaskDecomposition: &Decomposition{Subtasks: subs},
		ActionPlan: &ActionPlan{ExecutionOrder: []string{"t1", "t2", "t3"}, Actions: []Action{
			{ID: "a2", TaskID: "t2", Description: "retry"}, // skipped: stays skipped
			{ID: "a6", TaskID: "t3", Description: "write docs"},
		}}}

	got, err := r.revised(v)
	if err != nil {
		t.Fatalf("revised: %v", err)
	}
	var ids []string
	for _, a := range got.ActionPlan.Actions {
		ids = append(ids, a.ID+":"+string(a.Status))
	}
	if diff := cmp.Diff([]string{"a1:done", "a2:skipped", "a6:pending"}, ids); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(subs, got.TaskDecomposition.Subtasks); diff != "" {
		t.Errorf("subtasks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"t1", "t2", "t3"}, got.ActionPlan.ExecutionOrder); diff != "" {
		t.Errorf("execution order (-want +got):\n%s", diff)
	}
}

func TestRevisedRefusals(t *testing.T) {
	tests := []struct {
		name    string
		actions []Action
		want    string
	}{
		{
			name:    "unknown task_id",
			actions: []Action{{ID: "a5", TaskID: "t9", Description: "something"}},
			want:    `action "a5" names task_id "t9", which is not a subtask`,
		},
		{
			name:    "unknown tool",
			actions: []Action{{ID: "a5", TaskID: "t2", Description: "push", Tools: []string{"git/push"}}},
			want:    `action "a5" names the tool "git/push", which does not exist; use the server/tool names listed`,
		},
		{
			name: "duplicate new action ids",
			actions: []Action{
				{ID: "a5", TaskID: "t2", Description: "one"},
				{ID: "a5", TaskID: "t2", Description: "two"},
			},
			want: `action id "a5" is used twice`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testRun(progressPlan())
			p, err := r.revised(&revisionReply{Reason: "r", ActionPlan: &ActionPlan{Actions: tt.actions}})
			if err == nil {
				t.Fatalf("revised accepted it: %+v", p.ActionPlan.Actions)
			}
			var pe *planError
			if !errors.As(err, &pe) {
				t.Fatalf("error is %T (%v), want *planError", err, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestExtendedAppendsPendingActions(t *testing.T) {
	old := progressPlan()
	old.ActionPlan.Actions[1].Status, old.ActionPlan.Actions[2].Status = Done, Done
	r := testRun(old)
	before := clonePlan(old)

	got, err := r.extended([]Action{{ID: "a7", TaskID: "t2", Description: "add a test", Status: Done, Attempts: 3}})
	if err != nil {
		t.Fatalf("extended: %v", err)
	}
	if n, total := got.count(Pending); n != 1 || total != 4 {
		t.Errorf("pending %d of %d, want 1 of 4", n, total)
	}
	if a := got.next(); a == nil || a.ID != "a7" || a.Attempts != 0 {
		t.Errorf("next action = %+v, want a7 pending with no attempts", a)
	}
	if diff := cmp.Diff(before, r.st.Plan); diff != "" {
		t.Errorf("extended changed the current plan (-before +after):\n%s", diff)
	}

	if _, err := r.extended([]Action{{ID: "a1", TaskID: "t1", Description: "again"}}); err == nil ||
		!strings.Contains(err.Error(), `action id "a1" is used twice`) {
		t.Errorf("extended with a reused id: error = %v, want the duplicate reported", err)
	}
}

func TestDecodeRevisionSendsPlanProblemsToTheModel(t *testing.T) {
	r := testRun(progressPlan())
	r.st.At = At{Phase: PhaseRevision}
	text := "```json\n" + `{"phase":"revision","reason":"r","action_plan":{"actions":[{"id":"a5","task_id":"t9","description":"x"}]}}` + "\n```"
	_, _, err := r.decode(text)
	reason := replyReason(t, err)
	if !strings.Contains(reason, "the plan was not accepted") || !strings.Contains(reason, `task_id "t9"`) {
		t.Errorf("reason = %q, want the plan's problems", reason)
	}

	text = `{"phase":"revision","comment":" fixed ","reason":"r","action_plan":{"actions":[{"id":"a5","task_id":"t2","description":"x"}]}}`
	raw, comment, err := r.decode(text)
	if err != nil {
		t.Fatalf("decode of a good revision: %v", err)
	}
	if comment != "fixed" || !strings.Contains(string(raw), `"a5"`) {
		t.Errorf("decode = %s, %q", raw, comment)
	}
}

func TestDecodePlanningValidatesThePlan(t *testing.T) {
	r := testRun(nil)
	r.st.At = At{Phase: PhasePlanning}
	r.c.o.Settings.MaxSubtasks = 1
	text := `{"phase":"planning","goal_understanding":{"main_objective":"m"},
		"task_decomposition":{"subtasks":[{"id":"t1","description":"a"},{"id":"t2","description":"b"}]},
		"action_plan":{"actions":[{"id":"a1","task_id":"t1","description":"x","tools":["fs/nope"]}]}}`
	_, _, err := r.decode(text)
	reason := replyReason(t, err)
	for _, want := range []string{"at most 1 are allowed", `"fs/nope"`} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason = %q, want it to contain %q", reason, want)
		}
	}
}

func TestCheckActionEndAndReplan(t *testing.T) {
	r := testRun(progressPlan())
	r.st.At = At{Phase: PhaseExecution, Action: "a2"}
	if err := r.checkActionEnd(&actionReply{ActionID: "a3", Status: "completed"}); err == nil ||
		err.Error() != `"action_id" is "a3", but the action being carried out is "a2"` {
		t.Errorf("wrong action id: %v", err)
	}
	if err := r.checkActionEnd(&actionReply{ActionID: "a2", Status: "done"}); err == nil ||
		!strings.Contains(err.Error(), `"status" is "done"`) {
		t.Errorf("wrong status: %v", err)
	}
	if err := r.checkActionEnd(&actionReply{ActionID: "a2", Status: "failed"}); err != nil {
		t.Errorf("failed action end: %v", err)
	}

	r.c.o.Settings.MaxReplans = 1
	if err := r.checkReplan(&replanReply{Decision: decideReplan, Reason: "new approach"}); err != nil {
		t.Errorf("replan within budget: %v", err)
	}
	if err := r.checkReplan(&replanReply{Decision: decideSkip}); err == nil || err.Error() != `"reason" is empty` {
		t.Errorf("replan without reason: %v", err)
	}
	r.st.Replans = 1
	if err := r.checkReplan(&replanReply{Decision: decideReplan, Reason: "again"}); err == nil ||
		err.Error() != `"decision" is "replan"; it must be one of "skip", "abort"` {
		t.Errorf("replan past budget: %v", err)
	}
}

func TestCheckVerificationValidatesAdditionalActions(t *testing.T) {
	r := testRun(progressPlan())
	passed, failed := true, false
	bad := []Action{{ID: "a8", TaskID: "t2", Description: "push", Tools: []string{"git/push"}}}
	type verification = struct {
		Passed   *bool       `json:"passed"`
		Criteria []Criterion `json:"criteria"`
		Missing  []string    `json:"missing"`
	}
	if err := r.checkVerification(&verificationReply{Verification: &verification{Passed: &passed}, AdditionalActions: bad}); err != nil {
		t.Errorf("a passed verification is refused over its additional actions: %v", err)
	}
	err := r.checkVerification(&verificationReply{Verification: &verification{Passed: &failed}, AdditionalActions: bad})
	if err == nil || !strings.Contains(err.Error(), `"git/push"`) {
		t.Errorf("failed verification with an unknown tool: error = %v, want the tool reported", err)
	}
	if err := r.checkVerification(&verificationReply{Verification: &verification{Passed: &failed}}); err != nil {
		t.Errorf("failed verification without additional actions: %v", err)
	}
	if err := r.checkVerification(&verificationReply{}); err == nil {
		t.Error("a reply without verification was accepted")
	}
}

// Work added for an earlier subtask after a later one's action is done is
// accepted: finished actions are not ordered.
func TestAddedWorkForAnEarlierSubtaskIsAccepted(t *testing.T) {
	p := progressPlan()
	p.ActionPlan.Actions[1].Status = Done
	p.ActionPlan.Actions[2].Status = Done
	r := testRun(p)
	if _, err := r.extended([]Action{{ID: "a7", TaskID: "t1", Description: "read main.go once more"}}); err != nil {
		t.Errorf("extended: %v", err)
	}
	v := &revisionReply{Reason: "more reading", ActionPlan: &ActionPlan{Actions: []Action{
		{ID: "a8", TaskID: "t1", Description: "read the tests"}}}}
	if _, err := r.revised(v); err != nil {
		t.Errorf("revised: %v", err)
	}
}

// A revision with a new decomposition keeps the subtasks finished actions
// belong to.
func TestRevisionWithNewSubtasksKeepsFinishedOnes(t *testing.T) {
	r := testRun(progressPlan())
	v := &revisionReply{Reason: "split differently",
		TaskDecomposition: &Decomposition{Subtasks: []Subtask{{ID: "u1", Description: "edit"}}},
		ActionPlan:        &ActionPlan{Actions: []Action{{ID: "b1", TaskID: "u1", Description: "edit main.go"}}}}
	got, err := r.revised(v)
	if err != nil {
		t.Fatalf("revised: %v", err)
	}
	var ids []string
	for _, s := range got.TaskDecomposition.Subtasks {
		ids = append(ids, s.ID)
	}
	if diff := cmp.Diff([]string{"t1", "u1"}, ids); diff != "" {
		t.Errorf("subtasks (-want +got):\n%s", diff)
	}
}

// A revision may say nothing is left to do: the pending actions are
// dropped and the run goes on to verification.
func TestRevisionWithNothingLeft(t *testing.T) {
	for _, actions := range [][]Action{nil, {{ID: "a1", TaskID: "t1", Description: "read main.go"}}} {
		r := testRun(progressPlan())
		p, err := r.revised(&revisionReply{Reason: "a2 and a3 are not needed", ActionPlan: &ActionPlan{Actions: actions}})
		if err != nil {
			t.Fatalf("revised(%v): %v", actions, err)
		}
		if p.next() != nil || len(p.ActionPlan.Actions) != 1 || p.ActionPlan.Actions[0].Status != Done {
			t.Errorf("revised(%v) = %+v, want only a1, done", actions, p.ActionPlan.Actions)
		}
	}
}
