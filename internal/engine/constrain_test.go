package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/plan"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// constrainedScripts are runs written as a model held to the reply schema
// writes them: every object has exactly the properties the schema allows,
// the comment and the phase included. Planning goes through every phase
// but the replan decision: a2 fails, the reflection asks for a revision,
// the revision replaces a2 with a4.
var constrainedScripts = map[string][]string{
	"plain": {
		cmd("test/echo", `{"text": "one"}`, "Echoing one."),
		cmd("test/fail", `{}`, "Trying the broken tool."),
		cmd("test/echo", `{"text": "two"}`, ""),
		`{"done": true, "comment": "Echoed twice."}`,
	},
	"planning": {
		cmd("test/echo", `{"text": "look"}`, "Looking first."),
		`{"phase": "pre_planning", "understanding": {"goal": "echo", "deliverables": ["echoes"], "confidence": "high"}, "comment": "Understood."}`,
		`{"phase": "planning", "goal_understanding": {"main_objective": "Echo three things", "success_criteria": ["echoed"]},
		  "task_decomposition": {"subtasks": [{"id": "t1", "description": "echo"}]},
		  "action_plan": {"actions": [{"id": "a1", "task_id": "t1", "description": "echo one", "tools": ["test/echo"]},
		    {"id": "a2", "task_id": "t1", "description": "use the broken tool"}, {"id": "a3", "task_id": "t1", "description": "echo three"}]},
		  "comment": "Planned."}`,
		cmd("test/echo", `{"text": "one"}`, ""),
		`{"phase": "execution", "action_id": "a1", "status": "completed", "summary": "echoed one", "comment": ""}`,
		cmd("test/fail", `{}`, "Trying the broken tool."),
		`{"phase": "execution", "action_id": "a2", "status": "failed", "summary": "the tool is broken", "comment": ""}`,
		`{"phase": "reflection", "reflection": {"status": "failure", "evaluation": "a2 cannot work", "plan_revision_needed": true},
		  "plan_revision": {"reason": "replace a2", "changes": ["a4 instead of a2"]}, "comment": ""}`,
		`{"phase": "revision", "reason": "a2 cannot work", "changes": ["a4 replaces a2"],
		  "task_decomposition": {"subtasks": [{"id": "t1", "description": "echo"}]},
		  "action_plan": {"actions": [{"id": "a4", "task_id": "t1", "description": "echo two"}, {"id": "a3", "task_id": "t1", "description": "echo three"}]},
		  "comment": ""}`,
		cmd("test/echo", `{"text": "two"}`, ""),
		`{"phase": "execution", "action_id": "a4", "status": "completed", "summary": "echoed two", "comment": ""}`,
		cmd("test/echo", `{"text": "three"}`, ""),
		`{"phase": "execution", "action_id": "a3", "status": "completed", "summary": "echoed three", "comment": ""}`,
		`{"phase": "verification", "verification": {"passed": true, "criteria": [{"criterion": "echoed", "met": true}]}, "comment": "All echoed."}`,
	},
}

// constrainedRun runs the task on w in loop with engine options o.
func constrainedRun(t *testing.T, loop string, w *world, o engine.Options) (engine.Outcome, error) {
	t.Helper()
	in := engine.Input{Task: task.Task{Ref: ref, Title: "Echo things", Body: "Please echo.", Author: "alice"}, Post: w}
	return loopRun(t, loop, w, o, in, plan.Settings{
		MaxSubtasks: 10, DecompositionLevel: "moderate", PrePlanning: true, MaxGatherCalls: 5, MaxCallsPerAction: 20,
		MaxAttempts: 2, Reflection: true, ReflectOnError: true, ReflectEvery: 3, MaxRevisions: 3, Verification: true,
		MaxVerifyRounds: 2, MaxReplans: 1, CallComments: true})
}

// corrected reports whether a request tells the model its last reply could
// not be used.
func corrected(r llmtest.Received) bool {
	return slices.ContainsFunc(r.Messages, func(m llm.Message) bool { return strings.Contains(m.Content, "could not be used") })
}

// In the JSON protocol, a constrained run sends the reply's schema with
// every request (Ollama's format, OpenAI's response_format) on both wires
// and in both loops; the server enforcing it answers every scripted reply
// (each would fail the test if the schema forbade it), no correction is
// ever sent, and the run ends done. Unconstrained, the same run sends none.
func TestConstrainedJSONRunSendsTheSchema(t *testing.T) {
	host := startHost(t)
	for _, wire := range []string{llmtest.WireOpenAI, llmtest.WireOllama} {
		for _, loop := range []string{"plain", "planning"} {
			for _, constrained := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/constrained=%v", wire, loop, constrained), func(t *testing.T) {
					srv := llmtest.NewServer(t, llmtest.Options{EnforceFormat: true})
					for _, c := range constrainedScripts[loop] {
						srv.Script(llmtest.Reply{Content: c})
					}
					out, err := constrainedRun(t, loop, newWorld(t), engine.Options{LLM: client(t, wire, srv),
						Tools: tools{Host: host}, Constrained: constrained})
					if err != nil || out.End != engine.Done {
						t.Fatalf("outcome %+v, %v", out, err)
					}
					reqs := srv.Requests()
					if len(reqs) != len(constrainedScripts[loop]) || srv.Remaining() != 0 {
						t.Errorf("%d requests for %d scripted replies", len(reqs), len(constrainedScripts[loop]))
					}
					for _, r := range reqs {
						if (r.Format != nil) != constrained {
							t.Errorf("request %d: schema %s, want one: %v", r.N, r.Format, constrained)
						}
						if corrected(r) {
							t.Errorf("request %d carries a correction", r.N)
						}
						if r.ToolChoice != "" || r.ToolNames != nil {
							t.Errorf("request %d: tool_choice %q, tools %v in the JSON protocol", r.N, r.ToolChoice, r.ToolNames)
						}
					}
				})
			}
		}
	}
}

// The schema of a step names the tools offered: in pre-planning and
// verification the read-only ones only.
func TestConstrainedSchemaNamesTheToolsOffered(t *testing.T) {
	host := startHost(t)
	srv := llmtest.NewServer(t, llmtest.Options{EnforceFormat: true})
	for _, c := range constrainedScripts["planning"] {
		srv.Script(llmtest.Reply{Content: c})
	}
	if out, err := constrainedRun(t, "planning", newWorld(t), engine.Options{LLM: client(t, llmtest.WireOpenAI, srv),
		Tools: tools{Host: host}, Constrained: true}); err != nil || out.End != engine.Done {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	reqs := srv.Requests()
	all := []string{"test/echo", "test/fail", "test/env", "test/sleep", "test/big", "test/write_file", "test/pid"}
	readOnly := []string{"test/echo", "test/fail", "test/env", "test/pid"}
	for i, want := range map[int][]string{
		0:  readOnly, // pre-planning
		2:  nil,      // planning: no calls
		3:  all,      // execution
		13: readOnly, // verification
	} {
		got := commandTools(t, reqs[i].Format)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("request %d: the command may name %q, want %q", i+1, got, want)
		}
	}
}

// commandTools are the tools the command of a reply schema may name.
func commandTools(t *testing.T, schema json.RawMessage) []string {
	t.Helper()
	type object struct {
		Properties struct {
			Command *struct {
				Properties struct {
					Tool struct {
						Enum []string `json:"enum"`
					} `json:"tool"`
				} `json:"properties"`
			} `json:"command"`
		} `json:"properties"`
	}
	var s struct {
		object
		AnyOf []object `json:"anyOf"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatal(err)
	}
	for _, o := range append(s.AnyOf, s.object) {
		if c := o.Properties.Command; c != nil {
			return c.Properties.Tool.Enum
		}
	}
	return nil
}

// finish is a call of the finish tool with args.
func finish(args string) llmtest.Call {
	return llmtest.Call{Name: "task__finish", Args: json.RawMessage(args)}
}

// With native calls, a constrained step that takes calls asks for
// tool_choice "required" (OpenAI wire; Ollama has none) and offers the
// finish tool, whose call ends the task (plain loop) or gives the phase's
// object (planning: pre-planning, execution, verification); the phases
// that take an object as text ask for neither. A finish beside another
// call is not taken: the other call runs. The server honouring
// tool_choice fails the test on any reply without a call where one was
// required. Unconstrained, no request carries tool_choice or the finish
// tool.
func TestConstrainedNativeRunEndsThroughTheFinishTool(t *testing.T) {
	host := startHost(t)
	echo := func(text string) llmtest.Call {
		return llmtest.Call{Name: "test__echo", Args: map[string]string{"text": text}}
	}
	scripts := map[string][]llmtest.Reply{
		"plain": {
			{Content: "Echoing one.", ToolCalls: []llmtest.Call{echo("one"), finish(`{"comment": "too soon"}`)}},
			{ToolCalls: []llmtest.Call{finish(`{"comment": "Echoed one."}`)}},
		},
		"planning": {
			{ToolCalls: []llmtest.Call{echo("look")}},
			{ToolCalls: []llmtest.Call{finish(`{"phase": "pre_planning", "understanding": {"goal": "echo", "deliverables": ["an echo"], "confidence": "high"}, "comment": "Understood."}`)}},
			{Content: `{"phase": "planning", "goal_understanding": {"main_objective": "Echo", "success_criteria": ["echoed"]},
				"task_decomposition": {"subtasks": [{"id": "t1", "description": "echo"}]},
				"action_plan": {"actions": [{"id": "a1", "task_id": "t1", "description": "echo one"}]}, "comment": "Planned."}`},
			{ToolCalls: []llmtest.Call{echo("one")}},
			{ToolCalls: []llmtest.Call{finish(`{"phase": "execution", "action_id": "a1", "status": "completed", "summary": "echoed one", "comment": ""}`)}},
			{ToolCalls: []llmtest.Call{finish(`{"phase": "verification", "verification": {"passed": true, "criteria": [{"criterion": "echoed", "met": true}]}, "comment": "Echoed one."}`)}},
		},
	}
	// takesCalls are the requests (0-based) of steps that take calls.
	takesCalls := map[string][]int{"plain": {0, 1}, "planning": {0, 1, 3, 4, 5}}
	for _, wire := range []string{llmtest.WireOpenAI, llmtest.WireOllama} {
		for _, loop := range []string{"plain", "planning"} {
			for _, constrained := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/constrained=%v", wire, loop, constrained), func(t *testing.T) {
					srv := llmtest.NewServer(t, llmtest.Options{HonourToolChoice: true})
					for _, r := range scripts[loop] {
						if !constrained {
							r = unfinished(r, loop)
						}
						srv.Script(r)
					}
					out, err := constrainedRun(t, loop, newWorld(t), engine.Options{LLM: client(t, wire, srv), Tools: tools{Host: host},
						FunctionCalling: true, Constrained: constrained})
					if err != nil || out.End != engine.Done {
						t.Fatalf("outcome %+v, %v", out, err)
					}
					reqs := srv.Requests()
					if !constrained {
						for _, r := range reqs {
							if r.ToolChoice != "" || slices.Contains(r.ToolNames, "task__finish") || r.Format != nil || corrected(r) {
								t.Errorf("request %d: tool_choice %q, tools %v, format %s, correction %v without a constraint",
									r.N, r.ToolChoice, r.ToolNames, r.Format, corrected(r))
							}
						}
						return
					}
					if loop == "plain" && out.Comment != "Echoed one." {
						t.Errorf("closing comment %q, want the finish tool's", out.Comment)
					}
					for i, r := range reqs {
						calls := slices.Contains(takesCalls[loop], i)
						wantChoice := ""
						if calls && wire == llmtest.WireOpenAI {
							wantChoice = "required"
						}
						if r.ToolChoice != wantChoice || slices.Contains(r.ToolNames, "task__finish") != calls || r.Format != nil {
							t.Errorf("request %d: tool_choice %q, tools %v, format %s; want tool_choice %q and the finish tool: %v",
								r.N, r.ToolChoice, r.ToolNames, r.Format, wantChoice, calls)
						}
						if corrected(r) {
							t.Errorf("request %d carries a correction", r.N)
						}
					}
					if loop == "plain" {
						second := reqs[1].Messages
						var echoed, refused bool
						for _, m := range second {
							echoed = echoed || strings.Contains(m.Content, "tool output of test/echo")
							refused = refused || (m.Role == llm.ToolRole && strings.Contains(m.Content, "task/finish: not taken"))
						}
						if !echoed || !refused {
							t.Errorf("after echo and finish together: echoed %v, finish refused %v", echoed, refused)
						}
					}
				})
			}
		}
	}
}

// unfinished is r as the unconstrained prompt asks for it: the object a
// finish call gives written as text instead (the plain loop's end as
// {"done": true, ...}), and a finish beside other calls left out.
func unfinished(r llmtest.Reply, loop string) llmtest.Reply {
	var calls []llmtest.Call
	for _, c := range r.ToolCalls {
		if c.Name != "task__finish" {
			calls = append(calls, c)
			continue
		}
		if len(r.ToolCalls) > 1 {
			continue
		}
		args := string(c.Args.(json.RawMessage))
		if loop == "plain" {
			args = strings.Replace(args, "{", `{"done": true, `, 1)
		}
		r.Content = args
	}
	r.ToolCalls = calls
	return r
}

// echoTools are a read-only and a writing tool, beside the catalog's.
func echoTools() []toolhost.Tool {
	return []toolhost.Tool{
		{Server: "fs", Name: "read", ReadOnly: true, InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		{Server: "fs", Name: "write", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}}}`)},
		{Server: "git", Name: "log", ReadOnly: true},
	}
}

// Every reply the plain loop's reply schema admits decodes to a usable
// reply: the minimal instance, one taking each branch and naming each tool
// offered, and the one with every optional property; with a catalog
// offered in part, a tool a search loaded is admitted and one never loaded
// is not.
func TestEverySchemaValidReplyIsUsable(t *testing.T) {
	ts := engine.NewToolset(echoTools(), nil, false)
	exp := engine.Expect{Calls: true, Done: true}
	schema, err := ts.ReplySchema(exp, nil)
	if err != nil {
		t.Fatal(err)
	}
	instances, err := llmtest.Instances(schema)
	if err != nil {
		t.Fatal(err)
	}
	full, err := llmtest.Full(schema)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]bool{}
	ends := 0
	for _, inst := range append(instances, full) {
		if err := llmtest.Matches(schema, string(inst)); err != nil {
			t.Fatalf("instance %s does not match its schema: %v", inst, err)
		}
		r, err := ts.Decode(llm.Message{Role: llm.Assistant, Content: string(inst)})
		if err != nil || r.Problem != "" || (len(r.Calls) == 0) == !r.Done || r.Hint != "" {
			t.Errorf("%s: reply %+v, %v; want one call or the end, no problem, no hint", inst, r, err)
		}
		for _, c := range r.Calls {
			tools[c.Tool] = true
		}
		if r.Done {
			ends++
		}
	}
	if len(tools) != 3 || ends == 0 {
		t.Errorf("the instances name %v and end %d times; want every tool and the end", tools, ends)
	}
	// Read-only tools only, and no end: the one read-only call branch.
	schema, err = ts.ReplySchema(engine.Expect{Calls: true, ReadOnly: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(schema), "fs/write") || strings.Contains(string(schema), "anyOf") {
		t.Errorf("read-only schema %s", schema)
	}
	// Nothing to call and no end: nothing the protocol can write.
	if schema, err := engine.NewToolset(nil, nil, false).ReplySchema(engine.Expect{Calls: true}, nil); schema != nil || err != nil {
		t.Errorf("schema %s, %v with nothing to call", schema, err)
	}
}

// With a catalog offered in part, the reply schema names the tools the
// run's offer holds (chosen up front or loaded by a search) and the search;
// not the others.
func TestReplySchemaNamesLoadedTools(t *testing.T) {
	host := manyTools(t, 140, "")
	e, err := engine.New(engine.Options{LLM: &seeker{}, Tools: host, State: newWorld(t), MaxTools: 40, Constrained: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := e.Toolset()
	schema, err := ts.ReplySchema(engine.Expect{Calls: true, Done: true}, []engine.Offer{{Tool: "many/tool_001"}, {Tool: "many/tool_136", Used: 3}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"many/tool_001": true, "many/tool_136": true, engine.SearchTool: true, "many/tool_135": false} {
		if strings.Contains(string(schema), `"`+name+`"`) != want {
			t.Errorf("schema names %s: %v, want %v", name, !want, want)
		}
	}
	r, err := ts.Decode(llm.Message{Content: `{"comment": "", "command": {"tool": "many/tool_136", "args": {"text": "hi"}}}`})
	if err != nil || len(r.Calls) != 1 || llmtest.Matches(schema, `{"comment": "", "command": {"tool": "many/tool_136", "args": {"text": "hi"}}}`) != nil {
		t.Errorf("a call of the loaded tool: %+v, %v", r, err)
	}
}

// An MCP tool named as the finish tool is refused when it would be
// shadowed, with what to do.
func TestFinishToolNameIsReserved(t *testing.T) {
	taken := toolsOf{toolhost.Tool{Server: "task", Name: "finish"}}
	for _, native := range []bool{true, false} {
		_, err := engine.New(engine.Options{LLM: &seeker{}, Tools: taken, State: newWorld(t), FunctionCalling: native, Constrained: true})
		if native != (err != nil) || (err != nil && !strings.Contains(err.Error(), "rename the server")) {
			t.Errorf("native %v: %v", native, err)
		}
	}
}

// toolsOf is a catalog of tools that are never called.
type toolsOf []toolhost.Tool

func (ts toolsOf) Tools() []toolhost.Tool           { return ts }
func (ts toolsOf) Servers() []toolhost.ServerConfig { return nil }
func (ts toolsOf) Call(context.Context, string, json.RawMessage) (toolhost.Result, error) {
	return toolhost.Result{}, fmt.Errorf("not called in this test")
}

// A finish right after a failed call is questioned once, as a done is, and
// the question says to call the finish tool again; the second finish ends
// the run done.
func TestConstrainedFinishAfterAFailureIsQuestioned(t *testing.T) {
	host := startHost(t)
	srv := llmtest.NewServer(t, llmtest.Options{HonourToolChoice: true})
	srv.Script(
		llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "test__fail", Args: map[string]string{}}}},
		llmtest.Reply{ToolCalls: []llmtest.Call{finish(`{"comment": "Done, I think."}`)}},
		llmtest.Reply{ToolCalls: []llmtest.Call{finish(`{"comment": "Done: the failure was expected."}`)}},
	)
	out, err := constrainedRun(t, "plain", newWorld(t), engine.Options{LLM: client(t, llmtest.WireOpenAI, srv),
		Tools: tools{Host: host}, FunctionCalling: true, Constrained: true})
	if err != nil || out.End != engine.Done || out.Comment != "Done: the failure was expected." {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	last := srv.Requests()[2].Messages
	if q := last[len(last)-1]; q.Role != llm.User || !strings.Contains(q.Content, "is the task really done") || !strings.Contains(q.Content, "call task__finish again") {
		t.Errorf("the question: %+v", q)
	}
}
