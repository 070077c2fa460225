package plan

import (
	"encoding/json"
	"fmt"

	"github.com/coding-agent/coding-agent/internal/engine"
)

// Each phase's reply object has a JSON schema, so that a constrained run
// can have the server hold the model to it (engine.Expect). A schema says
// what its phase's parse.go check reads: the fields, the values an
// enumeration allows, the action in hand, the known tools, the limit of
// subtasks. What no schema the grammar engines share can say (unique ids,
// dependencies that exist and form no cycle, a text that is not only
// spaces) is still checked when the reply is read.

// Expect is, in the phases that take tool calls, a call or the phase's
// object, and in the others the object alone.
func (p *policy) Expect() engine.Expect {
	phase := p.st.At.Phase
	schema, err := json.Marshal(p.phaseSchema())
	if err != nil { // not reached: the schema is made of strings, lists and maps
		p.log.Error("encoding the reply schema", "phase", phase, "error", err)
		schema = nil
	}
	exp := engine.Expect{Calls: phase.takesCalls(), ReadOnly: phase != PhaseExecution, Object: schema}
	switch phase {
	case PhasePrePlanning:
		exp.Finish = "States your understanding of the task and ends pre-planning: its arguments are the pre-planning object."
	case PhaseExecution:
		exp.Finish = fmt.Sprintf("Ends action %s, completed or failed: its arguments are the execution object.", p.st.At.Action)
	case PhaseVerification:
		exp.Finish = "Reports the verification round: its arguments are the verification object."
	}
	return exp
}

// phaseSchema is the schema of the current phase's reply object.
func (p *policy) phaseSchema() map[string]any {
	st := p.st
	var props engine.Props
	var required []string
	switch st.At.Phase {
	case PhasePrePlanning:
		props = engine.Props{{Name: "understanding", Schema: engine.ObjectSchema(engine.Props{
			{Name: "goal", Schema: text(1)},
			{Name: "deliverables", Schema: list(text(0))},
			{Name: "constraints", Schema: list(text(0))},
			{Name: "ambiguities", Schema: list(text(0))},
			{Name: "confidence", Schema: choice("high", "medium", "low")},
		}, "goal", "deliverables", "confidence")}}
		required = []string{"understanding"}
	case PhasePlanning:
		props = engine.Props{
			{Name: "goal_understanding", Schema: engine.ObjectSchema(engine.Props{
				{Name: "main_objective", Schema: text(1)},
				{Name: "success_criteria", Schema: list(text(0))},
				{Name: "constraints", Schema: list(text(0))},
			}, "main_objective", "success_criteria")},
			{Name: "task_decomposition", Schema: p.decompositionSchema()},
			{Name: "action_plan", Schema: p.actionPlanSchema(nil)},
		}
		required = []string{"goal_understanding", "task_decomposition", "action_plan"}
	case PhaseExecution:
		props = engine.Props{
			{Name: "action_id", Schema: map[string]any{"const": st.At.Action}},
			{Name: "status", Schema: choice("completed", "failed")},
			{Name: "summary", Schema: text(0)},
		}
		required = []string{"action_id", "status", "summary"}
	case PhaseReflection:
		props = engine.Props{
			{Name: "reflection", Schema: engine.ObjectSchema(engine.Props{
				{Name: "status", Schema: choice("success", "failure", "partial")},
				{Name: "evaluation", Schema: text(0)},
				{Name: "plan_revision_needed", Schema: map[string]any{"type": "boolean"}},
			}, "status", "evaluation", "plan_revision_needed")},
			{Name: "plan_revision", Schema: engine.ObjectSchema(engine.Props{
				{Name: "reason", Schema: text(0)},
				{Name: "changes", Schema: list(text(0))},
			})},
		}
		required = []string{"reflection"}
	case PhaseRevision:
		// The subtasks are restated: an action's task_id then names one
		// the same object lists, the way a plan's do.
		props = engine.Props{
			{Name: "reason", Schema: text(1)},
			{Name: "changes", Schema: list(text(0))},
			{Name: "task_decomposition", Schema: p.decompositionSchema()},
			{Name: "action_plan", Schema: p.actionPlanSchema(nil)},
		}
		required = []string{"reason", "task_decomposition", "action_plan"}
	case PhaseVerification:
		var subtasks []string
		if st.Plan != nil {
			for _, s := range st.Plan.TaskDecomposition.Subtasks {
				subtasks = append(subtasks, s.ID)
			}
		}
		criterion := func(met any) map[string]any {
			return engine.ObjectSchema(engine.Props{
				{Name: "criterion", Schema: text(0)},
				{Name: "met", Schema: met},
				{Name: "evidence", Schema: text(0)},
			}, "criterion", "met")
		}
		props = engine.Props{
			{Name: "verification", Schema: map[string]any{"anyOf": []any{
				engine.ObjectSchema(engine.Props{
					{Name: "passed", Schema: map[string]any{"const": true}},
					{Name: "criteria", Schema: list(criterion(map[string]any{"const": true}))},
					{Name: "missing", Schema: map[string]any{"type": "array", "items": text(0), "maxItems": 0}},
				}, "passed"),
				engine.ObjectSchema(engine.Props{
					{Name: "passed", Schema: map[string]any{"const": false}},
					{Name: "criteria", Schema: list(criterion(map[string]any{"type": "boolean"}))},
					{Name: "missing", Schema: list(text(0))},
				}, "passed"),
			}}},
			{Name: "additional_actions", Schema: list(p.actionSchema(subtasks))},
		}
		required = []string{"verification"}
	case PhaseReplan:
		props = engine.Props{
			{Name: "decision", Schema: choice(p.replanOptions()...)},
			{Name: "reason", Schema: text(1)},
		}
		required = []string{"decision", "reason"}
	}
	all := append(engine.Props{{Name: "phase", Schema: map[string]any{"const": string(st.At.Phase)}}}, props...)
	all = append(all, engine.Prop{Name: "comment", Schema: text(0)})
	return engine.ObjectSchema(all, append([]string{"phase"}, append(required, "comment")...)...)
}

// decompositionSchema is task_decomposition's: at most the subtasks
// allowed, each with an id.
func (p *policy) decompositionSchema() map[string]any {
	subtask := engine.ObjectSchema(engine.Props{
		{Name: "id", Schema: text(1)},
		{Name: "description", Schema: text(0)},
		{Name: "dependencies", Schema: list(text(1))},
		{Name: "complexity", Schema: choice("low", "medium", "high")},
	}, "id", "description")
	subtasks := map[string]any{"type": "array", "items": subtask, "minItems": 1}
	if n := p.c.o.Settings.MaxSubtasks; n > 0 {
		subtasks["maxItems"] = n
	}
	return engine.ObjectSchema(engine.Props{
		{Name: "reasoning", Schema: text(0)},
		{Name: "subtasks", Schema: subtasks},
	}, "subtasks")
}

// actionPlanSchema is action_plan's: at least one action; subtasks, when
// not nil, are the task ids an action may name.
func (p *policy) actionPlanSchema(subtasks []string) map[string]any {
	return engine.ObjectSchema(engine.Props{
		{Name: "execution_order", Schema: list(text(1))},
		{Name: "actions", Schema: map[string]any{"type": "array", "items": p.actionSchema(subtasks), "minItems": 1}},
	}, "actions")
}

// actionSchema is an action's: its tools are those of the catalog; its
// task_id one of subtasks when they are given.
func (p *policy) actionSchema(subtasks []string) map[string]any {
	taskID := text(1)
	if len(subtasks) > 0 {
		taskID = choice(subtasks...)
	}
	tools := map[string]any{"type": "array", "maxItems": 0} // no tool to name
	if names := p.c.o.Engine.Toolset().Names(); len(names) > 0 {
		tools = list(choice(names...))
	}
	return engine.ObjectSchema(engine.Props{
		{Name: "id", Schema: text(1)},
		{Name: "task_id", Schema: taskID},
		{Name: "description", Schema: text(1)},
		{Name: "tools", Schema: tools},
		{Name: "expected_outcome", Schema: text(0)},
	}, "id", "task_id", "description")
}

// text is a string of at least n characters.
func text(n int) map[string]any {
	if n == 0 {
		return map[string]any{"type": "string"}
	}
	return map[string]any{"type": "string", "minLength": n}
}

func list(items map[string]any) map[string]any {
	return map[string]any{"type": "array", "items": items}
}

func choice(values ...string) map[string]any {
	return map[string]any{"type": "string", "enum": values}
}
