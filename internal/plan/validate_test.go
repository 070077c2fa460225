package plan

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testTools are the tools the validation tests treat as existing.
var testTools = []string{"fs/read", "fs/write"}

func testLimits() limits {
	return limits{maxSubtasks: 10, known: func(t string) bool { return slices.Contains(testTools, t) }}
}

// validPlan is a plan that passes validation: t1 ← t2 ← t3, one action each.
func validPlan() *Plan {
	return &Plan{
		GoalUnderstanding: Goal{MainObjective: "add a flag", SuccessCriteria: []string{"the flag works"}},
		TaskDecomposition: Decomposition{Subtasks: []Subtask{
			{ID: "t1", Description: "read the code"},
			{ID: "t2", Description: "change it", Dependencies: []string{"t1"}},
			{ID: "t3", Description: "test it", Dependencies: []string{"t2"}},
		}},
		ActionPlan: ActionPlan{
			ExecutionOrder: []string{"t1", "t2", "t3"},
			Actions: []Action{
				{ID: "a1", TaskID: "t1", Description: "read main.go", Tools: []string{"fs/read"}},
				{ID: "a2", TaskID: "t2", Description: "edit main.go", Tools: []string{"fs/read", "fs/write"}},
				{ID: "a3", TaskID: "t3", Description: "run the tests"},
			},
		},
	}
}

// problems runs validate and returns the problems it listed, failing the
// test when the error is not a *planError.
func problems(t *testing.T, p *Plan, l limits) []string {
	t.Helper()
	err := validate(p, l)
	if err == nil {
		return nil
	}
	var pe *planError
	if !errors.As(err, &pe) {
		t.Fatalf("validate returned %T (%v), want *planError", err, err)
	}
	return pe.problems
}

func TestValidateAcceptsValidPlan(t *testing.T) {
	if err := validate(validPlan(), testLimits()); err != nil {
		t.Fatalf("validate(valid plan) = %v, want nil", err)
	}
}

func TestValidateAcceptsPlanWithoutExecutionOrder(t *testing.T) {
	p := validPlan()
	p.ActionPlan.ExecutionOrder = nil
	if err := validate(p, testLimits()); err != nil {
		t.Fatalf("validate(plan without execution_order) = %v, want nil", err)
	}
}

func TestValidateReportsEachProblem(t *testing.T) {
	tests := []struct {
		name   string
		change func(p *Plan)
		limits func(l *limits)
		want   []string
	}{
		{
			name:   "empty main objective",
			change: func(p *Plan) { p.GoalUnderstanding.MainObjective = "  \n " },
			want:   []string{`"goal_understanding.main_objective" is empty`},
		},
		{
			name:   "no subtasks",
			change: func(p *Plan) { p.TaskDecomposition.Subtasks = nil },
			want: []string{
				`"task_decomposition.subtasks" is empty`,
				`execution_order names "t1", which is not a subtask`,
				`execution_order names "t2", which is not a subtask`,
				`execution_order names "t3", which is not a subtask`,
				`action "a1" names task_id "t1", which is not a subtask`,
				`action "a2" names task_id "t2", which is not a subtask`,
				`action "a3" names task_id "t3", which is not a subtask`,
			},
		},
		{
			name:   "more subtasks than allowed",
			limits: func(l *limits) { l.maxSubtasks = 2 },
			want:   []string{"there are 3 subtasks; at most 2 are allowed: merge some"},
		},
		{
			name: "subtask without id",
			change: func(p *Plan) {
				p.TaskDecomposition.Subtasks = append(p.TaskDecomposition.Subtasks, Subtask{ID: " ", Description: "x"})
			},
			want: []string{"subtask 4 has no id"},
		},
		{
			name: "duplicate subtask id",
			change: func(p *Plan) {
				p.TaskDecomposition.Subtasks = append(p.TaskDecomposition.Subtasks, Subtask{ID: "t2", Description: "again"})
			},
			want: []string{`subtask id "t2" is used twice`},
		},
		{
			name:   "dependency on an unknown subtask",
			change: func(p *Plan) { p.TaskDecomposition.Subtasks[2].Dependencies = []string{"t2", "t9"} },
			want:   []string{`subtask "t3" depends on "t9", which is not a subtask`},
		},
		{
			name:   "self-dependency",
			change: func(p *Plan) { p.TaskDecomposition.Subtasks[1].Dependencies = []string{"t1", "t2"} },
			want:   []string{`subtask "t2" depends on itself`},
		},
		{
			name: "cycle",
			change: func(p *Plan) {
				subs := p.TaskDecomposition.Subtasks
				subs[0].Dependencies = []string{"t2"}
				subs[1].Dependencies = []string{"t3"}
				subs[2].Dependencies = []string{"t1"}
				p.ActionPlan.ExecutionOrder = nil
			},
			want: []string{
				"the dependencies form a cycle: t1 → t2 → t3 → t1",
				`action "a1" (of "t1") comes before action "a2" of "t2", which "t1" depends on`,
				`action "a2" (of "t2") comes before action "a3" of "t3", which "t2" depends on`,
			},
		},
		{
			name:   "execution order names an unknown subtask",
			change: func(p *Plan) { p.ActionPlan.ExecutionOrder = []string{"t1", "t2", "t3", "t7"} },
			want:   []string{`execution_order names "t7", which is not a subtask`},
		},
		{
			name:   "execution order puts a subtask before its dependency",
			change: func(p *Plan) { p.ActionPlan.ExecutionOrder = []string{"t2", "t1", "t3"} },
			want:   []string{`execution_order puts "t2" before "t1", which it depends on`},
		},
		{
			name:   "no actions",
			change: func(p *Plan) { p.ActionPlan.Actions = nil },
			want:   []string{`"action_plan.actions" is empty`},
		},
		{
			name:   "action without id",
			change: func(p *Plan) { p.ActionPlan.Actions[1].ID = "" },
			want:   []string{"action 2 has no id"},
		},
		{
			name:   "duplicate action id",
			change: func(p *Plan) { p.ActionPlan.Actions[2].ID = "a2" },
			want:   []string{`action id "a2" is used twice`},
		},
		{
			name:   "action with unknown task_id",
			change: func(p *Plan) { p.ActionPlan.Actions[2].TaskID = "t8" },
			want:   []string{`action "a3" names task_id "t8", which is not a subtask`},
		},
		{
			name:   "action without task_id",
			change: func(p *Plan) { p.ActionPlan.Actions[2].TaskID = "" },
			want:   []string{`action "a3" has no task_id`},
		},
		{
			name:   "action without description",
			change: func(p *Plan) { p.ActionPlan.Actions[1].Description = "\t" },
			want:   []string{`action "a2" has no description`},
		},
		{
			name:   "action naming an unknown tool",
			change: func(p *Plan) { p.ActionPlan.Actions[0].Tools = []string{"fs/read", "fs/delete"} },
			want: []string{
				`action "a1" names the tool "fs/delete", which does not exist; use the server/tool names listed`,
			},
		},
		{
			name: "action of a dependent subtask before its dependency's actions",
			change: func(p *Plan) {
				a := p.ActionPlan.Actions
				p.ActionPlan.Actions = []Action{a[1], a[0], a[2]}
			},
			want: []string{`action "a2" (of "t2") comes before action "a1" of "t1", which "t2" depends on`},
		},
		{
			name: "action of a dependent subtask between its dependency's actions",
			change: func(p *Plan) {
				a := p.ActionPlan.Actions
				later := Action{ID: "a1b", TaskID: "t1", Description: "read more"}
				p.ActionPlan.Actions = []Action{a[0], a[1], later, a[2]}
			},
			want: []string{`action "a2" (of "t2") comes before action "a1b" of "t1", which "t2" depends on`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPlan()
			if tt.change != nil {
				tt.change(p)
			}
			l := testLimits()
			if tt.limits != nil {
				tt.limits(&l)
			}
			got := problems(t, p, l)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateListsEveryProblemAtOnce(t *testing.T) {
	p := validPlan()
	p.GoalUnderstanding.MainObjective = ""
	p.TaskDecomposition.Subtasks = append(p.TaskDecomposition.Subtasks,
		Subtask{ID: "t3", Description: "dup"},
		Subtask{ID: "t4", Description: "self", Dependencies: []string{"t4", "tx"}})
	p.ActionPlan.ExecutionOrder = []string{"t3", "t2", "t1", "nope"}
	p.ActionPlan.Actions = []Action{
		{ID: "a2", TaskID: "t2", Description: "edit", Tools: []string{"git/push"}},
		{ID: "a1", TaskID: "t1", Description: "read"},
		{ID: "a1", TaskID: "t9", Description: ""},
		{ID: "", TaskID: "t3", Description: "test"},
	}
	l := testLimits()
	l.maxSubtasks = 4

	want := []string{
		`"goal_understanding.main_objective" is empty`,
		"there are 5 subtasks; at most 4 are allowed: merge some",
		`subtask id "t3" is used twice`,
		`subtask "t4" depends on itself`,
		`subtask "t4" depends on "tx", which is not a subtask`,
		`execution_order names "nope", which is not a subtask`,
		`execution_order puts "t3" before "t2", which it depends on`,
		`execution_order puts "t2" before "t1", which it depends on`,
		`action "a2" names the tool "git/push", which does not exist; use the server/tool names listed`,
		`action id "a1" is used twice`,
		`action "a1" names task_id "t9", which is not a subtask`,
		`action "a1" has no description`,
		"action 4 has no id",
		`action "a2" (of "t2") comes before action "a1" of "t1", which "t2" depends on`,
	}
	err := validate(p, l)
	if err == nil {
		t.Fatal("validate accepted a plan with many problems")
	}
	if diff := cmp.Diff(want, problems(t, p, l)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "the plan was not accepted:\n- ") {
		t.Errorf("error starts %q, want the plan-not-accepted heading", msg)
	}
	if got := strings.Count(msg, "\n- "); got != len(want) {
		t.Errorf("error has %d listed lines, want %d:\n%s", got, len(want), msg)
	}
}

// TestValidateMessagesAreStable checks that problems gathered through maps
// come out in the same order every time (run with -count=20 as well).
func TestValidateMessagesAreStable(t *testing.T) {
	p := validPlan()
	subs := []Subtask{{ID: "t1", Description: "base"}}
	actions := []Action{}
	for _, id := range []string{"t2", "t3", "t4", "t5", "t6", "t7"} {
		subs = append(subs, Subtask{ID: id, Description: id, Dependencies: []string{"t1"}})
		actions = append(actions, Action{ID: "a" + id, TaskID: id, Description: id})
	}
	p.TaskDecomposition.Subtasks = subs
	p.ActionPlan.ExecutionOrder = nil
	p.ActionPlan.Actions = append(actions, Action{ID: "a1", TaskID: "t1", Description: "base"})

	want := []string{
		`action "at2" (of "t2") comes before action "a1" of "t1", which "t2" depends on`,
		`action "at3" (of "t3") comes before action "a1" of "t1", which "t3" depends on`,
		`action "at4" (of "t4") comes before action "a1" of "t1", which "t4" depends on`,
		`action "at5" (of "t5") comes before action "a1" of "t1", which "t5" depends on`,
		`action "at6" (of "t6") comes before action "a1" of "t1", which "t6" depends on`,
		`action "at7" (of "t7") comes before action "a1" of "t1", which "t7" depends on`,
	}
	for i := range 50 {
		if diff := cmp.Diff(want, problems(t, p, testLimits())); diff != "" {
			t.Fatalf("run %d: problems (-want +got):\n%s", i, diff)
		}
	}
}

func TestFindCycle(t *testing.T) {
	tests := []struct {
		name string
		subs []Subtask
		want []string
	}{
		{
			name: "none",
			subs: []Subtask{{ID: "a"}, {ID: "b", Dependencies: []string{"a"}}, {ID: "c", Dependencies: []string{"a", "b"}}},
		},
		{
			name: "self-dependency is not a cycle here",
			subs: []Subtask{{ID: "a", Dependencies: []string{"a"}}},
		},
		{
			name: "unknown dependency is ignored",
			subs: []Subtask{{ID: "a", Dependencies: []string{"zz"}}},
		},
		{
			name: "two subtasks",
			subs: []Subtask{{ID: "a", Dependencies: []string{"b"}}, {ID: "b", Dependencies: []string{"a"}}},
			want: []string{"a", "b", "a"},
		},
		{
			name: "cycle behind an acyclic prefix",
			subs: []Subtask{
				{ID: "x", Dependencies: []string{"a"}},
				{ID: "a", Dependencies: []string{"b"}},
				{ID: "b", Dependencies: []string{"c"}},
				{ID: "c", Dependencies: []string{"a"}},
			},
			want: []string{"a", "b", "c", "a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ids := map[string]*Subtask{}
			for i := range tt.subs {
				ids[tt.subs[i].ID] = &tt.subs[i]
			}
			if diff := cmp.Diff(tt.want, findCycle(tt.subs, ids)); diff != "" {
				t.Errorf("findCycle (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanNextAndCount(t *testing.T) {
	p := validPlan()
	for i := range p.ActionPlan.Actions {
		p.ActionPlan.Actions[i].Status = Pending
	}
	p.ActionPlan.Actions[0].Status = Done
	if got := p.next(); got == nil || got.ID != "a2" {
		t.Fatalf("next() = %v, want a2", got)
	}
	p.ActionPlan.Actions[1].Status = Skipped
	if n, total := p.count(Done); n != 1 || total != 3 {
		t.Errorf("count(Done) = %d, %d; want 1, 3", n, total)
	}
	p.ActionPlan.Actions[2].Status = Done
	if got := p.next(); got != nil {
		t.Errorf("next() = %q with nothing pending, want nil", got.ID)
	}
	if a := p.action("a3"); a == nil || a.TaskID != "t3" {
		t.Errorf("action(a3) = %v", a)
	}
	if a := p.action("zz"); a != nil {
		t.Errorf("action(zz) = %v, want nil", a)
	}
}
