package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/ollama"
	"github.com/coding-agent/coding-agent/internal/llm/openai"
	"github.com/coding-agent/coding-agent/internal/plan"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// shape is a reply as real local models write it through Ollama, LM Studio,
// vLLM and llama.cpp servers, recorded with where it is documented. The
// tool and the arguments are the test server's (test/echo, {"text": "hi"});
// the shape around them is the documented one.
type shape struct {
	name, source string
	native       bool          // native tool calls are on (tools are sent)
	reply        llmtest.Reply // what the server answers
	raw          string        // or a raw OpenAI body (OpenAI wire only)
	openaiOnly   bool          // the shape exists on the OpenAI wire only
	// The intended calls ("server/tool {args}"), in order, and whether
	// the next message tells the model how to reply next time; or, when
	// the intent is not clear, a part of the correction sent back.
	calls      []string
	hint       bool
	correction string
}

const (
	echoHi  = `test/echo {"text":"hi"}`
	echoTwo = `test/echo {"text":"two"}`
	command = `{"comment": "Echoing.", "command": {"tool": "test/echo", "args": {"text": "hi"}}}`
)

var shapes = []shape{
	{name: "think block before the answer", source: "lmstudio-ai/lmstudio-bug-tracker#1569 (<think>…</think> inside content)",
		reply: llmtest.Reply{Content: "<think>\nThe user wants an echo. I will call echo.\n</think>\n\n" + command},
		calls: []string{echoHi}},
	{name: "closing think tag only", source: "ggml-org/llama.cpp#11861, ollama/ollama#11521 (the opening <think> is in the template)",
		reply: llmtest.Reply{Content: "The user wants an echo.\n</think>\n\n" + command},
		calls: []string{echoHi}},
	{name: "separate reasoning field", source: "https://docs.vllm.ai/en/v0.10.0/features/reasoning_outputs.html (reasoning_content); https://docs.ollama.com/capabilities/thinking (message.thinking)",
		reply: llmtest.Reply{Content: command, Reasoning: `I could answer {"done": true, "comment": "secret"} but should echo.`},
		calls: []string{echoHi}},
	{name: "reasoning field of newer vLLM", source: "https://docs.vllm.ai/en/stable/features/reasoning_outputs/ (reasoning, formerly reasoning_content)",
		reply:      llmtest.Reply{Content: command, Reasoning: "I should echo; secret thoughts.", ReasoningField: "reasoning"},
		openaiOnly: true, calls: []string{echoHi}},
	{name: "JSON in a code fence with prose around", source: "ollama/ollama#13519 (JSON in a code block in content)",
		reply: llmtest.Reply{Content: "I'll echo it now.\n```json\n" + command + "\n```\nLet me know if you need more."},
		calls: []string{echoHi}},
	{name: "Qwen <tool_call> in content", source: "ollama/ollama#11381 (qwen3 <tool_call> of a name not in the tool list is not parsed); ollama/ollama#17284 (left as content)",
		native: true, reply: llmtest.Reply{Content: "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": \"hi\"}}\n</tool_call>"},
		calls: []string{echoHi}, hint: true},
	{name: "Qwen <tool_call> without native tools", source: "sgomez/ollama-ai-provider#26 (qwen2:7b through Ollama answers with <tool_call> text)",
		reply: llmtest.Reply{Content: "<tool_call>\n{\"name\": \"test__echo\", \"arguments\": {\"text\": \"hi\"}}\n</tool_call>"},
		calls: []string{echoHi}, hint: true},
	{name: "bare name/arguments object", source: "ollama/ollama#11185 (qwen3:32b: the call as content)",
		native: true, reply: llmtest.Reply{Content: `{"name": "echo", "arguments": {"text": "hi"}}`},
		calls: []string{echoHi}, hint: true},
	{name: "Llama name/parameters object in a fence", source: "ollama/ollama#13519 (llama3.2:3b: JSON call in a code block in content)",
		native: true, reply: llmtest.Reply{Content: "```json\n{\"name\": \"echo\", \"parameters\": {\"text\": \"hi\"}}\n```"},
		calls: []string{echoHi}, hint: true},
	{name: "type/name/parameters object with prose after", source: "vllm-project/vllm#19024 (Llama JSON call followed by plain text); vllm-project/vllm#46863",
		native: true, reply: llmtest.Reply{Content: "{\"type\": \"function\", \"name\": \"echo\", \"parameters\": {\"text\": \"hi\"}}\n\nWould you like anything else?"},
		calls: []string{echoHi}, hint: true},
	{name: "type/function wrapper object", source: "vllm-project/vllm#11786 (llama3.2 content holds the call, tool_calls empty)",
		native: true, reply: llmtest.Reply{Content: `{"type": "function", "function": {"name": "echo", "parameters": {"text": "hi"}}}`},
		calls: []string{echoHi}, hint: true},
	{name: "Llama <|python_tag|>", source: "meta-llama/llama-models#266 (Llama 3.1 JSON tool calls after <|python_tag|>)",
		native: true, reply: llmtest.Reply{Content: `<|python_tag|>{"type": "function", "name": "echo", "parameters": {"text": "hi"}}<|eom_id|>`},
		calls: []string{echoHi}, hint: true},
	{name: "Llama 4 <|python_start|>", source: "vllm-project/vllm#16214 (<|python_start|>{\"name\", \"parameters\"}<|python_end|> as content)",
		native: true, reply: llmtest.Reply{Content: `<|python_start|>{"name": "echo", "parameters": {"text": "hi"}}<|python_end|>`},
		calls: []string{echoHi}, hint: true},
	{name: "calls separated by semicolons", source: "lemonade-sdk/lemonade#1562 (llama-server: Llama 3.2 writes \"; {…}; {…}\"); abetlen/llama-cpp-python#1856",
		native: true, reply: llmtest.Reply{Content: `{"name": "echo", "parameters": {"text": "hi"}}; {"name": "echo", "parameters": {"text": "two"}}`},
		calls: []string{echoHi, echoTwo}, hint: true},
	{name: "two objects in one reply", source: "sgomez/ollama-ai-provider#11 (two {\"name\", \"arguments\"} objects in one Ollama reply); NousResearch/hermes-agent#87900",
		native: true, reply: llmtest.Reply{Content: "{\n  \"name\": \"echo\",\n  \"arguments\": {\"text\": \"hi\"}\n} {\n  \"name\": \"echo\",\n  \"arguments\": {\"text\": \"two\"}\n}"},
		calls: []string{echoHi, echoTwo}, hint: true},
	{name: "Harmony call as content", source: "lmstudio-ai/lmstudio-bug-tracker#942 (gpt-oss Harmony call left in the output)",
		native: true, reply: llmtest.Reply{Content: `<|start|>assistant<|channel|>commentary to=functions.test__echo<|constrain|>json<|message|>{"text":"hi"}`},
		calls: []string{echoHi}, hint: true},
	{name: "Harmony with analysis and <|call|>", source: "ggml-org/llama.cpp#15181 (unparsed Harmony calls stay verbatim in content); header as in ai-dynamo/dynamo#2999",
		native: true, reply: llmtest.Reply{Content: "<|channel|>analysis<|message|>Need to echo.<|end|><|start|>assistant<|channel|>commentary to=functions.test__echo <|constrain|>json<|message|>{\"text\":\"hi\"}<|call|>"},
		calls: []string{echoHi}, hint: true},
	{name: "native call plus another in content", source: "ggml-org/llama.cpp#14101 (the first call is parsed, the others stay in content)",
		native: true, reply: llmtest.Reply{Content: "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": \"two\"}}\n</tool_call>",
			ToolCalls: []llmtest.Call{{Name: "test__echo", Args: map[string]string{"text": "hi"}}}},
		calls: []string{echoHi, echoTwo}, hint: true},
	{name: "native arguments as a JSON string", source: "ollama/ollama#12413 (models send arguments as a serialized string); vllm-project/vllm#54964",
		native: true, openaiOnly: true,
		reply: llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "test__echo", Args: json.RawMessage(`"{\"text\": \"hi\"}"`)}}},
		calls: []string{echoHi}},
	{name: "string arguments inside <tool_call>", source: "vllm-project/vllm#54964 (Granite 4 writes \"arguments\" as a string)",
		native: true, reply: llmtest.Reply{Content: "<tool_call>{\"name\": \"echo\", \"arguments\": \"{\\n  \\\"text\\\": \\\"hi\\\"\\n}\"}</tool_call>"},
		calls: []string{echoHi}, hint: true},
	{name: "native arguments as an object", source: "ggml-org/llama.cpp#20198 (llama-server returns arguments as a JSON object)",
		native: true, openaiOnly: true,
		raw: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
			"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"test__echo","arguments":{"text":"hi"}}}]}}]}`,
		calls: []string{echoHi}},
	{name: "native call without the server prefix", source: "NousResearch/hermes-agent#61336 (models drop the MCP server prefix of tool names)",
		native: true, reply: llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "echo", Args: map[string]string{"text": "hi"}}}},
		calls: []string{echoHi}, hint: true},
	{name: "command without the server prefix", source: "NousResearch/hermes-agent#61336 (models drop the MCP server prefix of tool names)",
		reply: llmtest.Reply{Content: `{"comment": "Echoing.", "command": {"tool": "echo", "args": {"text": "hi"}}}`},
		calls: []string{echoHi}, hint: true},
	{name: "call of a tool not in the list", source: "ollama/ollama#11381 (a call of a tool that is not offered)",
		native: true, reply: llmtest.Reply{Content: "<tool_call>\n{\"name\": \"create\", \"arguments\": {\"title\": \"test1\"}}\n</tool_call>"},
		correction: `there is no tool "create"`},
	{name: "empty reply cut by the length limit", source: "ollama/ollama#16184 (done_reason length: thinking, no content)",
		reply:      llmtest.Reply{Reasoning: "Thinking and thinking about the echo", FinishReason: "length"},
		correction: "cut off at the output token limit"},
}

// client is a model provider on wire, talking to srv.
func client(t *testing.T, wire string, srv *llmtest.Server) llm.Client {
	t.Helper()
	var c llm.Client
	var err error
	if wire == llmtest.WireOpenAI {
		c, err = openai.New(openai.Options{BaseURL: srv.OpenAIURL(), Model: "test-model"})
	} else {
		c, err = ollama.New(ollama.Options{Endpoint: srv.URL(), Model: "test-model"})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (s shape) wires() []string {
	if s.openaiOnly || s.raw != "" {
		return []string{llmtest.WireOpenAI}
	}
	return []string{llmtest.WireOpenAI, llmtest.WireOllama}
}

func (s shape) step() llmtest.Step {
	if s.raw != "" {
		return llmtest.Garbage{Body: s.raw}
	}
	return s.reply
}

// Each shape, as the server sends it on each wire, decodes to the intended
// calls (with a hint when it was not written as asked) or to the reason
// sent back.
func TestRealModelReplyShapesDecode(t *testing.T) {
	host := startHost(t)
	for _, s := range shapes {
		for _, wire := range s.wires() {
			t.Run(s.name+"/"+wire, func(t *testing.T) {
				srv := llmtest.NewServer(t, llmtest.Options{})
				srv.Script(s.step())
				resp, err := client(t, wire, srv).Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "echo"}}})
				if err != nil {
					t.Fatal(err)
				}
				ts := engine.NewToolset(host.Tools(), nil, s.native)
				r, err := ts.DecodeResponse(resp)
				if s.correction != "" {
					reason := r.Problem
					if re, ok := err.(*engine.ReplyError); ok {
						reason = re.Reason
					} else if err != nil {
						t.Fatal(err)
					}
					if len(r.Calls) != 0 || !strings.Contains(reason, s.correction) {
						t.Fatalf("calls %v, reason %q; want no calls and %q (source: %s)", r.Calls, reason, s.correction, s.source)
					}
					return
				}
				if err != nil {
					t.Fatalf("%v (source: %s)", err, s.source)
				}
				if got := callKeys(r.Calls); strings.Join(got, "|") != strings.Join(s.calls, "|") {
					t.Fatalf("calls %q, want %q; problem %q (source: %s)", got, s.calls, r.Problem, s.source)
				}
				if (r.Hint != "") != s.hint || strings.Contains(r.Hint, "\n") {
					t.Errorf("hint %q, want one: %v", r.Hint, s.hint)
				}
				if strings.Contains(r.Comment, "secret") || strings.Contains(r.Comment, "<|") || strings.Contains(r.Comment, "tool_call>") {
					t.Errorf("comment %q carries reasoning or call markup", r.Comment)
				}
			})
		}
	}
}

func callKeys(calls []engine.ToolCall) []string {
	var out []string
	for _, c := range calls {
		var b bytes.Buffer
		if err := json.Compact(&b, c.Args); err != nil {
			b.Write(c.Args)
		}
		out = append(out, c.Tool+" "+b.String())
	}
	return out
}

// Each shape runs through the engine on both wires and in both loops: the
// intended tool call runs (its result comes back to the model, with the
// hint after it), or the correction goes back and no tool runs; the
// reasoning never reaches a comment or a later request.
func TestRealModelReplyShapesRun(t *testing.T) {
	host := startHost(t)
	for _, s := range shapes {
		for _, wire := range s.wires() {
			for _, loop := range []string{"plain", "planning"} {
				t.Run(s.name+"/"+wire+"/"+loop, func(t *testing.T) {
					srv := llmtest.NewServer(t, llmtest.Options{})
					before, after := shapeScript(loop)
					for _, c := range before {
						srv.Script(llmtest.Reply{Content: c})
					}
					srv.Script(s.step())
					for _, c := range after {
						srv.Script(llmtest.Reply{Content: c})
					}
					w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
					out, err := shapeRun(t, loop, w, client(t, wire, srv), tools{Host: host}, s.native)
					if err != nil || out.End != engine.Done {
						t.Fatalf("outcome %+v, %v (source: %s)", out, err, s.source)
					}
					reqs := srv.Requests()
					next := reqs[len(before)+1].Messages // the request after the shape
					results, hinted, corrected := 0, false, false
					for _, m := range next[len(next)-len(s.calls)-2:] {
						results += strings.Count(m.Content, "tool output of test/echo")
						hinted = hinted || strings.Contains(m.Content, "Note: ")
						corrected = corrected || strings.Contains(m.Content, "could not be used")
					}
					if s.correction != "" {
						if !corrected || results != 0 {
							t.Errorf("correction %v, %d results; want the correction and no call (source: %s)", corrected, results, s.source)
						}
					} else if results != len(s.calls) || hinted != s.hint || corrected {
						t.Errorf("%d results, hint %v, corrected %v; want %d results, hint %v (source: %s)",
							results, hinted, corrected, len(s.calls), s.hint, s.source)
					}
					for _, r := range reqs {
						if strings.Contains(string(r.Body), "secret") || strings.Contains(string(r.Body), "Thinking and thinking") {
							t.Fatalf("request %d carries the reasoning", r.N)
						}
					}
					for _, c := range w.comments {
						if strings.Contains(c, "secret") || strings.Contains(c, "<|") || strings.Contains(c, "tool_call>") {
							t.Errorf("comment carries reasoning or call markup:\n%s", c)
						}
					}
				})
			}
		}
	}
}

// shapeScript is what the model says before and after the shape: in
// planning mode the plan of one action, then its end and the verification.
func shapeScript(loop string) (before, after []string) {
	if loop == "plain" {
		return nil, []string{`{"done": true, "comment": "Echoed."}`}
	}
	return []string{`{"phase": "planning", "goal_understanding": {"main_objective": "Echo", "success_criteria": ["echoed"]},
			"task_decomposition": {"subtasks": [{"id": "t1", "description": "echo"}]},
			"action_plan": {"actions": [{"id": "a1", "task_id": "t1", "description": "echo hi"}]}}`},
		[]string{`{"phase": "execution", "action_id": "a1", "status": "completed", "summary": "echoed"}`,
			`{"phase": "verification", "verification": {"passed": true, "criteria": [{"criterion": "echoed", "met": true}]}, "comment": "Echoed."}`}
}

// shapeRun runs the task on w in loop, with native tool calls or not.
func shapeRun(t *testing.T, loop string, w *world, m llm.Client, ts engine.Tools, native bool) (engine.Outcome, error) {
	t.Helper()
	e, err := engine.New(engine.Options{LLM: m, Tools: ts, State: w, FunctionCalling: native, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	in := engine.Input{Task: task.Task{Ref: ref, Title: "Echo hi", Body: "Please echo hi.", Author: "alice"}, Post: w}
	ctx := context.Background()
	if loop == "plain" {
		l, err := agent.New(e)
		if err != nil {
			t.Fatal(err)
		}
		return l.Run(ctx, in)
	}
	c, err := plan.New(plan.Options{Engine: e, Forge: w, Lang: report.English, Settings: plan.Settings{
		MaxSubtasks: 10, DecompositionLevel: "moderate", MaxCallsPerAction: 10, MaxAttempts: 2,
		MaxRevisions: 1, Verification: true, MaxVerifyRounds: 1, MaxReplans: 1, CallComments: true, HistoryDir: w.history}})
	if err != nil {
		t.Fatal(err)
	}
	return c.Run(ctx, in)
}
