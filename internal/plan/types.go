// Package plan is planning mode: the agent states its understanding, makes a
// plan, carries it out one action at a time, reflects on failures and at
// intervals, revises the plan, and verifies the work before it says done.
// Every phase reply is parsed strictly; every plan, revision, reflection,
// verification and replan decision is appended to a JSONL history per task;
// the whole state is checkpointed so a task resumes where it stopped.
package plan

import (
	"fmt"
	"slices"
	"strings"
)

// Status of an action.
type Status string

// Action statuses. An action is pending until it is done, failed for good
// (skipped after a replan decision) or replaced by a revision.
const (
	Pending Status = "pending"
	Done    Status = "done"
	Skipped Status = "skipped"
)

// Plan is the model's plan in the spec's shape, with the coordinator's
// bookkeeping on each action.
type Plan struct {
	GoalUnderstanding Goal          `json:"goal_understanding"`
	TaskDecomposition Decomposition `json:"task_decomposition"`
	ActionPlan        ActionPlan    `json:"action_plan"`
}

// Goal is what the model understood the task to be.
type Goal struct {
	MainObjective   string   `json:"main_objective"`
	SuccessCriteria []string `json:"success_criteria"`
	Constraints     []string `json:"constraints,omitempty"`
}

// Decomposition splits the task into subtasks with dependencies.
type Decomposition struct {
	Reasoning string    `json:"reasoning,omitempty"`
	Subtasks  []Subtask `json:"subtasks"`
}

// Subtask is one part of the work.
type Subtask struct {
	ID           string   `json:"id"`
	Description  string   `json:"description"`
	Dependencies []string `json:"dependencies,omitempty"`
	Complexity   string   `json:"complexity,omitempty"`
}

// ActionPlan is the ordered list of actions.
type ActionPlan struct {
	ExecutionOrder []string `json:"execution_order,omitempty"`
	Actions        []Action `json:"actions"`
}

// Action is one step of the plan: what to achieve, not the exact tool
// arguments. Status, Summary, Attempts and Failure are kept by the
// coordinator.
type Action struct {
	ID              string   `json:"id"`
	TaskID          string   `json:"task_id"`
	Description     string   `json:"description"`
	Tools           []string `json:"tools,omitempty"` // tools it expects to use, as server/tool
	ExpectedOutcome string   `json:"expected_outcome,omitempty"`

	Status   Status `json:"status,omitempty"`
	Summary  string `json:"summary,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
	Failure  string `json:"failure,omitempty"` // why its last attempt failed
}

// action returns the action with id, or nil.
func (p *Plan) action(id string) *Action {
	for i := range p.ActionPlan.Actions {
		if p.ActionPlan.Actions[i].ID == id {
			return &p.ActionPlan.Actions[i]
		}
	}
	return nil
}

// next returns the first pending action, or nil when none is left.
func (p *Plan) next() *Action {
	for i := range p.ActionPlan.Actions {
		if p.ActionPlan.Actions[i].Status == Pending {
			return &p.ActionPlan.Actions[i]
		}
	}
	return nil
}

// count returns how many actions have status s, and how many there are.
func (p *Plan) count(s Status) (n, total int) {
	for _, a := range p.ActionPlan.Actions {
		if a.Status == s {
			n++
		}
	}
	return n, len(p.ActionPlan.Actions)
}

// limits are what a plan is checked against.
type limits struct {
	maxSubtasks int
	known       func(tool string) bool
}

// validate checks a plan the model sent: subtask ids present and unique, no
// more than maxSubtasks, dependencies that exist and form no cycle, an
// execution order naming known subtasks in an order that respects the
// dependencies, and actions with unique ids, a known subtask and known
// tools, ordered so that no action comes before the actions of a subtask it
// depends on. Every problem is listed, so the model can fix them at once.
func validate(p *Plan, l limits) error {
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if strings.TrimSpace(p.GoalUnderstanding.MainObjective) == "" {
		add(`"goal_understanding.main_objective" is empty`)
	}
	subs := p.TaskDecomposition.Subtasks
	if len(subs) == 0 {
		add(`"task_decomposition.subtasks" is empty`)
	}
	if len(subs) > l.maxSubtasks {
		add("there are %d subtasks; at most %d are allowed: merge some", len(subs), l.maxSubtasks)
	}
	ids := map[string]*Subtask{}
	for i := range subs {
		s := &subs[i]
		switch {
		case strings.TrimSpace(s.ID) == "":
			add("subtask %d has no id", i+1)
		case ids[s.ID] != nil:
			add("subtask id %q is used twice", s.ID)
		default:
			ids[s.ID] = s
		}
	}
	for _, s := range subs {
		for _, d := range s.Dependencies {
			switch {
			case d == s.ID:
				add("subtask %q depends on itself", s.ID)
			case ids[d] == nil:
				add("subtask %q depends on %q, which is not a subtask", s.ID, d)
			}
		}
	}
	if cycle := findCycle(subs, ids); cycle != nil {
		add("the dependencies form a cycle: %s", strings.Join(cycle, " → "))
	}
	for _, id := range p.ActionPlan.ExecutionOrder {
		if ids[id] == nil {
			add("execution_order names %q, which is not a subtask", id)
		}
	}
	probs = append(probs, orderProblems(p.ActionPlan.ExecutionOrder, ids)...)
	probs = append(probs, actionProblems(p.ActionPlan.Actions, ids, l.known)...)
	if len(probs) > 0 {
		return &planError{probs}
	}
	return nil
}

// actionProblems checks the action list (of a plan or a revision).
func actionProblems(actions []Action, subtasks map[string]*Subtask, known func(string) bool) []string {
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if len(actions) == 0 {
		add(`"action_plan.actions" is empty`)
	}
	seen := map[string]bool{}
	firstOf := map[string]int{} // subtask → index of its first action
	lastOf := map[string]int{}  // subtask → index of its last action
	for i, a := range actions {
		name := fmt.Sprintf("action %q", a.ID)
		switch {
		case strings.TrimSpace(a.ID) == "":
			name = fmt.Sprintf("action %d", i+1)
			add("%s has no id", name)
		case seen[a.ID]:
			add("action id %q is used twice", a.ID)
		}
		seen[a.ID] = true
		switch {
		case strings.TrimSpace(a.TaskID) == "":
			add("%s has no task_id", name)
		case subtasks[a.TaskID] == nil:
			add("%s names task_id %q, which is not a subtask", name, a.TaskID)
		case a.Status == "" || a.Status == Pending:
			// Only actions still to run are ordered: a finished action
			// cannot move, and work added later for an earlier subtask
			// is fine.
			if _, ok := firstOf[a.TaskID]; !ok {
				firstOf[a.TaskID] = i
			}
			lastOf[a.TaskID] = i
		}
		if strings.TrimSpace(a.Description) == "" {
			add("%s has no description", name)
		}
		for _, t := range a.Tools {
			if !known(t) {
				add("%s names the tool %q, which does not exist; use the server/tool names listed", name, t)
			}
		}
	}
	var order []string // from a map: sorted so the message is stable
	for task, first := range firstOf {
		for _, dep := range subtasks[task].Dependencies {
			if last, ok := lastOf[dep]; ok && last > first {
				order = append(order, fmt.Sprintf("action %q (of %q) comes before action %q of %q, which %q depends on",
					actions[first].ID, task, actions[last].ID, dep, task))
			}
		}
	}
	slices.Sort(order)
	return append(probs, order...)
}

// orderProblems checks that the execution order lists no subtask before one
// it depends on.
func orderProblems(order []string, ids map[string]*Subtask) []string {
	pos := map[string]int{}
	for i, id := range order {
		pos[id] = i
	}
	var probs []string
	for i, id := range order {
		s := ids[id]
		if s == nil {
			continue
		}
		for _, d := range s.Dependencies {
			if j, ok := pos[d]; ok && j > i {
				probs = append(probs, fmt.Sprintf("execution_order puts %q before %q, which it depends on", id, d))
			}
		}
	}
	return probs
}

// findCycle returns one dependency cycle as a path (first id repeated at the
// end), or nil.
func findCycle(subs []Subtask, ids map[string]*Subtask) []string {
	const (
		unseen = iota
		open
		closed
	)
	state := map[string]int{}
	var stack []string
	var visit func(id string) []string
	visit = func(id string) []string {
		state[id] = open
		stack = append(stack, id)
		for _, d := range ids[id].Dependencies {
			if ids[d] == nil || d == id {
				continue
			}
			switch state[d] {
			case open:
				i := slices.Index(stack, d)
				return append(slices.Clone(stack[i:]), d)
			case unseen:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[id] = closed
		return nil
	}
	for _, s := range subs {
		if ids[s.ID] != nil && state[s.ID] == unseen {
			if c := visit(s.ID); c != nil {
				return c
			}
		}
	}
	return nil
}

// planError lists what is wrong with a plan; it is sent back to the model.
type planError struct{ problems []string }

func (e *planError) Error() string {
	return "the plan was not accepted:\n- " + strings.Join(e.problems, "\n- ")
}
