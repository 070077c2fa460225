package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// someTools are a read-only and a writing tool that are never called.
type someTools struct{}

func (someTools) Tools() []toolhost.Tool {
	return []toolhost.Tool{
		{Server: "fs", Name: "read", ReadOnly: true, InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		{Server: "fs", Name: "write", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
	}
}
func (someTools) Servers() []toolhost.ServerConfig { return nil }
func (someTools) Call(context.Context, string, json.RawMessage) (toolhost.Result, error) {
	return toolhost.Result{}, fmt.Errorf("no calls in this test")
}

// Every reply a phase's reply schema admits is read as that phase's reply:
// in the JSON protocol, the minimal instance of the whole schema and one
// taking each branch, naming each tool and each enumerated value (a
// command where the phase takes calls, the phase's object otherwise); and
// the phase's object alone, as the finish tool's arguments carry it with
// native calls. The plan checks what no schema can say (unique ids,
// dependencies); the schema's own instances pass them.
func TestEverySchemaValidPhaseReplyIsRead(t *testing.T) {
	e, err := engine.New(engine.Options{LLM: &noLLM{}, Tools: someTools{}, State: &memState{cp: map[task.Ref]store.Checkpoint{}},
		Constrained: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := e.Toolset()
	c := &Coordinator{o: Options{Engine: e, Settings: testSettings()}}
	planned := &Plan{
		GoalUnderstanding: Goal{MainObjective: "echo", SuccessCriteria: []string{"echoed"}},
		TaskDecomposition: Decomposition{Subtasks: []Subtask{{ID: "t1", Description: "echo"}, {ID: "t2", Description: "check", Dependencies: []string{"t1"}}}},
		ActionPlan: ActionPlan{Actions: []Action{{ID: "a0", TaskID: "t1", Description: "look", Status: Done},
			{ID: "a1", TaskID: "t1", Description: "echo", Status: Pending}, {ID: "a2", TaskID: "t2", Description: "check", Status: Pending}}},
	}
	for _, at := range []At{
		{Phase: PhasePrePlanning}, {Phase: PhasePlanning}, {Phase: PhaseExecution, Action: "a1"},
		{Phase: PhaseReflection, Trigger: "error", Action: "a1"}, {Phase: PhaseRevision}, {Phase: PhaseVerification},
		{Phase: PhaseReplan, Action: "a1"},
	} {
		t.Run(string(at.Phase), func(t *testing.T) {
			st := &state{At: at}
			if at.Phase != PhasePrePlanning && at.Phase != PhasePlanning {
				st.Plan = clonePlan(planned)
			}
			p := &policy{c: c, st: st}
			exp := p.Expect()
			if exp.Calls != at.Phase.takesCalls() || exp.Object == nil || exp.Done {
				t.Fatalf("expect %+v", exp)
			}
			schema, err := ts.ReplySchema(exp, nil)
			if err != nil {
				t.Fatal(err)
			}
			whole, err := llmtest.Instances(schema)
			if err != nil {
				t.Fatal(err)
			}
			objects, err := llmtest.Instances(exp.Object)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d instances of the reply, %d of the object", len(whole), len(objects))
			calls := 0
			for _, inst := range whole {
				if err := llmtest.Matches(schema, string(inst)); err != nil {
					t.Fatalf("instance %s does not match its schema: %v", inst, err)
				}
				r, err := ts.Decode(llm.Message{Role: llm.Assistant, Content: string(inst)})
				if err != nil {
					t.Fatalf("%s: %v", inst, err)
				}
				if len(r.Calls) > 0 {
					calls++
					if at.Phase != PhaseExecution && !ts.ReadOnly(r.Calls[0].Tool) {
						t.Errorf("%s: a call of %s in %s", inst, r.Calls[0].Tool, at.Phase)
					}
				}
				if _, err := p.Read(r); err != nil {
					t.Errorf("%s: not read: %v", inst, err)
				}
			}
			if (calls > 0) != exp.Calls {
				t.Errorf("%d instances call a tool; the phase takes calls: %v", calls, exp.Calls)
			}
			for _, inst := range objects {
				act, err := p.Read(engine.Reply{Text: string(inst)})
				if err != nil || act.Object == nil {
					t.Errorf("%s as the finish tool's arguments: %+v, %v", inst, act, err)
				}
			}
		})
	}
}

// The schemas carry what the checks read: the action in hand, the
// decisions open, the subtasks a verification may add actions to, the
// limit of subtasks, the tools of the catalog.
func TestPhaseSchemasCarryTheState(t *testing.T) {
	e, err := engine.New(engine.Options{LLM: &noLLM{}, Tools: someTools{}, State: &memState{cp: map[task.Ref]store.Checkpoint{}}})
	if err != nil {
		t.Fatal(err)
	}
	s := testSettings()
	s.MaxSubtasks, s.MaxReplans = 4, 0
	c := &Coordinator{o: Options{Engine: e, Settings: s}}
	planned := &Plan{TaskDecomposition: Decomposition{Subtasks: []Subtask{{ID: "t7"}}}}
	for at, want := range map[At][]string{
		{Phase: PhaseExecution, Action: "a9"}: {`"action_id":{"const":"a9"}`},
		{Phase: PhaseReplan, Action: "a9"}:    {`"decision":{"enum":["skip","abort"]`},
		{Phase: PhaseVerification}:            {`"task_id":{"enum":["t7"]`, `"enum":["fs/read","fs/write"]`},
		{Phase: PhasePlanning}:                {`"maxItems":4`},
	} {
		p := &policy{c: c, st: &state{At: at, Plan: planned}}
		got := string(p.Expect().Object)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s schema lacks %s:\n%s", at.Phase, w, got)
			}
		}
	}
}
