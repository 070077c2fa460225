package engine

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// parseText reads a JSON-protocol reply as the plain loop does: calls or
// the end, else the problem as a reply error.
func parseText(text string) (Reply, error) {
	return parseWith(NewToolset(nil, nil, false), llm.Message{Content: text})
}

func parseWith(ts *Toolset, msg llm.Message) (Reply, error) {
	r, err := ts.Decode(msg)
	if err == nil && len(r.Calls) == 0 && !r.Done {
		return r, &ReplyError{r.Problem}
	}
	return r, err
}

func TestParseText(t *testing.T) {
	for _, tc := range []struct {
		name, in    string
		wantTool    string
		wantArgs    string
		wantComment string
		wantDone    bool
		wantErr     string
	}{
		{name: "command", in: `{"comment":"look","command":{"tool":"fs/list","args":{"path":"."}}}`,
			wantTool: "fs/list", wantArgs: `{"path":"."}`, wantComment: "look"},
		{name: "comment inside command", in: `{"command":{"tool":"fs/list","args":{},"comment":"why"}}`,
			wantTool: "fs/list", wantArgs: `{}`, wantComment: "why"},
		{name: "done", in: `{"done": true, "comment": "finished"}`, wantDone: true, wantComment: "finished"},
		{name: "fenced among prose", in: "Here you go:\n```json\n{\"done\": true, \"comment\": \"ok\"}\n```\nbye",
			wantDone: true, wantComment: "ok"},
		{name: "think stripped", in: "<think>{\"done\": true, \"comment\": \"no\"}</think>{\"command\":{\"tool\":\"a/b\",\"args\":{}}}",
			wantTool: "a/b", wantArgs: `{}`},
		{name: "closing think only", in: "reasoning... </think>\n{\"done\":true,\"comment\":\"x\"}", wantDone: true, wantComment: "x"},
		{name: "prose then object", in: `I will list. {"command":{"tool":"fs/list","args":{"p":"{"}}} thanks`,
			wantTool: "fs/list", wantArgs: `{"p":"{"}`},
		{name: "args as string", in: `{"command":{"tool":"fs/x","args":"{\"a\":1}"}}`, wantTool: "fs/x", wantArgs: `{"a":1}`},
		{name: "missing args", in: `{"command":{"tool":"fs/x"}}`, wantTool: "fs/x", wantArgs: `{}`},
		{name: "empty", in: "  ", wantErr: "empty"},
		{name: "no json", in: "I think the answer is 42.", wantErr: "no JSON object"},
		{name: "neither", in: `{"comment":"hi"}`, wantErr: `neither "command" nor "done"`},
		{name: "done false", in: `{"done":false,"comment":"hi"}`, wantErr: `"done" is false`},
		{name: "both", in: `{"done":true,"command":{"tool":"a/b","args":{}}}`, wantErr: "both"},
		{name: "tool without server", in: `{"command":{"tool":"list","args":{}}}`, wantErr: "server/tool"},
		{name: "args not object", in: `{"command":{"tool":"a/b","args":[1]}}`, wantErr: "must be a JSON object"},
		{name: "only think", in: "<think>{\"done\":true}</think>", wantErr: "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := parseText(tc.in)
			if tc.wantErr != "" {
				var re *ReplyError
				if !errors.As(err, &re) || !strings.Contains(re.Reason, tc.wantErr) {
					t.Fatalf("err = %v, want a reply error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Done != tc.wantDone || a.Comment != tc.wantComment {
				t.Fatalf("got %+v", a)
			}
			if tc.wantTool != "" {
				if len(a.Calls) != 1 || a.Calls[0].Tool != tc.wantTool || compactJSON(a.Calls[0].Args) != tc.wantArgs {
					t.Fatalf("calls = %+v, want %s %s", a.Calls, tc.wantTool, tc.wantArgs)
				}
			} else if len(a.Calls) != 0 {
				t.Fatalf("unexpected calls %+v", a.Calls)
			}
		})
	}
}

func TestParseNative(t *testing.T) {
	ts := NewToolset([]toolhost.Tool{{Server: "fs", Name: "write_file"}, {Server: "my.server", Name: "do it"}}, nil, true)
	names := ts.names
	parseNative := func(msg llm.Message, _ *toolNames) (Reply, error) { return parseWith(ts, msg) }
	msg := llm.Message{Content: "<think>hm</think>Writing the file.", ToolCalls: []llm.ToolCall{
		{ID: "c1", Name: names.fn("fs/write_file"), Arguments: json.RawMessage(`{"path":"a"}`)},
		{ID: "c2", Name: names.fn("my.server/do it"), Arguments: nil},
	}}
	a, err := parseNative(msg, names)
	if err != nil {
		t.Fatal(err)
	}
	if a.Comment != "Writing the file." || len(a.Calls) != 2 || a.Calls[0].Tool != "fs/write_file" ||
		a.Calls[1].Tool != "my.server/do it" || a.Calls[1].ID != "c2" || string(a.Calls[1].Args) != "{}" {
		t.Fatalf("got %+v", a)
	}
	// Text only: the done object.
	if a, err := parseNative(llm.Message{Content: `{"done":true,"comment":"all good"}`}, names); err != nil || !a.Done {
		t.Fatalf("done: %+v %v", a, err)
	}
	// Text only without done is unusable.
	if _, err := parseNative(llm.Message{Content: "I have finished."}, names); err == nil {
		t.Fatal("want an error for text without a done object")
	}
	// Bad arguments are unusable.
	_, err = parseNative(llm.Message{ToolCalls: []llm.ToolCall{{ID: "x", Name: "fs__write_file", Arguments: json.RawMessage(`"nope"`)}}}, names)
	var re *ReplyError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want reply error", err)
	}
}

func TestToolNamesAreValidAndCollisionFree(t *testing.T) {
	long := "srv/" + strings.Repeat("x", 80)
	full := []string{"fs/read", "fs/read_file", "a__b/c", "a/b__c", "git hub/list.issues", long, "srv/" + strings.Repeat("x", 81)}
	n := newToolNames(full)
	seen := map[string]string{}
	for _, f := range full {
		fn := n.fn(f)
		if !validFn(fn) {
			t.Errorf("%q → %q is not a valid function name", f, fn)
		}
		if other, dup := seen[fn]; dup {
			t.Errorf("%q and %q both map to %q", f, other, fn)
		}
		seen[fn] = f
		if back, ok := n.full(fn); !ok || back != f {
			t.Errorf("%q → %q → %q", f, fn, back)
		}
	}
	if n.fn("fs/read") != "fs__read" {
		t.Errorf("plain names should stay readable, got %q", n.fn("fs/read"))
	}
}

func validFn(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	return !invalidFnChars.MatchString(s)
}

// Names are matched to the catalog exactly: the full name, the function
// name, or a tool's own name when one server alone has it; anything else
// is not recovered and goes back as a correction.
func TestLooseToolNames(t *testing.T) {
	ts := NewToolset([]toolhost.Tool{{Server: "fs", Name: "read"}, {Server: "git", Name: "read"},
		{Server: "fs", Name: "write_file"}}, nil, false)
	for _, tc := range []struct {
		name, in, want, hint, problem string
	}{
		{name: "function name", in: `{"command":{"tool":"fs__write_file","args":{}}}`, want: "fs/write_file", hint: `"fs/write_file"`},
		{name: "own name, unique", in: `{"command":{"tool":"write_file","args":{}}}`, want: "fs/write_file", hint: `"fs/write_file"`},
		{name: "own name, ambiguous", in: `{"command":{"tool":"read","args":{}}}`, problem: `could be any of fs/read, git/read`},
		{name: "unknown", in: `{"command":{"tool":"rm","args":{}}}`, problem: `there is no tool "rm"`},
		{name: "ambiguous in a tag", in: `<tool_call>{"name": "read", "arguments": {}}</tool_call>`, problem: `could be any of fs/read, git/read`},
		{name: "exact name takes no hint", in: `{"command":{"tool":"fs/read","args":{}}}`, want: "fs/read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parseWith(ts, llm.Message{Content: tc.in})
			if tc.problem != "" {
				var re *ReplyError
				if !errors.As(err, &re) || !strings.Contains(re.Reason, tc.problem) {
					t.Fatalf("err = %v, want %q", err, tc.problem)
				}
				return
			}
			if err != nil || len(r.Calls) != 1 || r.Calls[0].Tool != tc.want {
				t.Fatalf("reply %+v, %v; want a call of %s", r, err, tc.want)
			}
			if !strings.Contains(r.Hint, tc.hint) || (tc.hint == "") != (r.Hint == "") {
				t.Errorf("hint %q, want one naming %s", r.Hint, tc.hint)
			}
		})
	}
}

// Only objects that are calls and nothing else are taken for calls: a
// JSON object in prose that has a "name" is not one.
func TestBareObjectsThatAreNotCalls(t *testing.T) {
	ts := NewToolset([]toolhost.Tool{{Server: "fs", Name: "read"}}, nil, true)
	for _, in := range []string{
		`Here is the user: {"name": "read", "age": 3}`,
		`{"name": "read"}`,
		`{"type": "object", "name": "read", "parameters": {}}`,
		`{"name": "read", "arguments": {}, "parameters": {}}`,
	} {
		if r, err := parseWith(ts, llm.Message{Content: in}); err == nil || len(r.Calls) != 0 {
			t.Errorf("%s: read as %+v", in, r.Calls)
		}
	}
}

// A second usable object is not acted on; the model is told only the first
// one was used.
func TestSecondObjectIsIgnoredWithAHint(t *testing.T) {
	r, err := parseText(`{"comment":"a","command":{"tool":"fs/list","args":{}}} {"done": true, "comment": "x"}`)
	if err != nil || len(r.Calls) != 1 || r.Done || !strings.Contains(r.Hint, "first of the 2 JSON objects") {
		t.Fatalf("reply %+v, %v", r, err)
	}
	// The same object in a fence and counted again is one object.
	r, err = parseText("```json\n{\"done\": true, \"comment\": \"x\"}\n```")
	if err != nil || !r.Done || r.Hint != "" {
		t.Fatalf("reply %+v, %v", r, err)
	}
}

// A reply cut at the token limit with nothing usable in it says so; a
// usable one is used.
func TestCutReply(t *testing.T) {
	ts := NewToolset([]toolhost.Tool{{Server: "fs", Name: "read"}}, nil, false)
	for _, in := range []string{"", `{"command": {"tool": "fs/read", "args": {"path": "a`,
		`{"comment": "x", "command": {"tool": "fs/read", "args": {"path": "a"}`, "I will first read the"} {
		_, err := ts.DecodeResponse(llm.Response{Message: llm.Message{Content: in}, FinishReason: llm.FinishLength})
		var re *ReplyError
		if !errors.As(err, &re) || !strings.Contains(re.Reason, "cut off") {
			t.Errorf("%q: err = %v, want a cut reply", in, err)
		}
	}
	r, err := ts.DecodeResponse(llm.Response{Message: llm.Message{Content: `{"command": {"tool": "fs/read", "args": {}}}`}, FinishReason: llm.FinishLength})
	if err != nil || len(r.Calls) != 1 {
		t.Errorf("reply %+v, %v", r, err)
	}
	if _, err := ts.DecodeResponse(llm.Response{Message: llm.Message{Content: ""}, FinishReason: "stop"}); err != nil {
		t.Errorf("an empty reply that was not cut: %v", err)
	}
}

// schemaTools are tools whose parameters have each JSON type.
func schemaTools() *Toolset {
	return NewToolset([]toolhost.Tool{
		{Server: "fs", Name: "write_file", InputSchema: json.RawMessage(`{"type": "object", "properties": {
			"path": {"type": "string"}, "content": {"type": "string"}}}`)},
		{Server: "t", Name: "typed", InputSchema: json.RawMessage(`{"type": "object", "$defs": {"n": {"type": "number"}},
			"properties": {"count": {"type": "integer"}, "ratio": {"$ref": "#/$defs/n"}, "force": {"type": "boolean"},
			"opts": {"type": "object"}, "list": {"type": "array"}, "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
			"mode": {"enum": ["fast", "slow"]}, "either": {"type": ["integer", "string"]}}}`)},
	}, nil, true)
}

// XML-style values are typed by the schema: a value of a non-string type
// that cannot be read as that type is a problem, never a guess.
func TestTypedParameters(t *testing.T) {
	ts := schemaTools()
	xml := func(params string) string { return "<function=typed>\n" + params + "</function>" }
	p := func(name, value string) string { return "<parameter=" + name + ">\n" + value + "\n</parameter>\n" }
	for _, tc := range []struct{ name, in, args, problem string }{
		{"every type", xml(p("count", "3") + p("ratio", "0.5") + p("force", "True") + p("opts", `{"a": 1}`) +
			p("list", "[1, 2]") + p("limit", "None") + p("mode", "fast") + p("either", "12")),
			`{"count":3,"ratio":0.5,"force":true,"opts":{"a":1},"list":[1,2],"limit":null,"mode":"fast","either":"12"}`, ""},
		{"a string keeps its own lines", "<function=write_file>\n<parameter=content>\nline 1\nline 2\n\n</parameter>\n</function>",
			`{"content":"line 1\nline 2\n"}`, ""},
		{"a parameter the schema does not know stays text", xml(p("other", "3")), `{"other":"3"}`, ""},
		{"not an integer", xml(p("count", "3.5")), "", `"count" of t/typed is "3.5", which is not integer`},
		{"not a boolean", xml(p("force", "yes")), "", "which is not boolean"},
		{"not an object", xml(p("opts", "{a: 1}")), "", "which is not object"},
		{"given twice", xml(p("count", "1") + p("count", "2")), "", `gives the parameter "count" twice`},
		{"text beside the parameters", xml("hello\n" + p("count", "1")), "", "text outside its <parameter> tags"},
		{"a missing </parameter> ends at the next one", xml("<parameter=count>\n1\n<parameter=ratio>\n2\n</parameter>\n"),
			`{"count":1,"ratio":2}`, ""},
		{"GLM values", "<tool_call>typed<arg_key>count</arg_key><arg_value>7</arg_value><arg_key>force</arg_key><arg_value>false</arg_value></tool_call>",
			`{"count":7,"force":false}`, ""},
		{"GLM cut", "<tool_call>typed<arg_key>count</arg_key><arg_value>7</arg_value>", "", "no closing </tool_call>"},
		{"MiniMax values", `<invoke name="typed"><parameter name="count">2</parameter><parameter name="list">["a"]</parameter></invoke>`,
			`{"count":2,"list":["a"]}`, ""},
		{"MiniMax parameter not closed", `<invoke name="typed"><parameter name="count">2</invoke>`, "", `"count" of typed is not closed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ts.Decode(llm.Message{Content: tc.in})
			if err != nil {
				t.Fatal(err)
			}
			if tc.problem != "" {
				if len(r.Calls) != 0 || !strings.Contains(r.Problem, tc.problem) {
					t.Fatalf("calls %v, problem %q; want %q", r.Calls, r.Problem, tc.problem)
				}
				return
			}
			if len(r.Calls) != 1 || compactJSON(r.Calls[0].Args) != tc.args {
				t.Fatalf("calls %+v, problem %q; want the arguments %s", r.Calls, r.Problem, tc.args)
			}
		})
	}
}

// A pythonic call list is a call only when the whole reply is one, its
// arguments are literals and each name is a tool's.
func TestPythonicCalls(t *testing.T) {
	ts := schemaTools()
	for _, tc := range []struct{ in, want string }{
		{`[typed(count=-2, ratio=1.5e3, force=False, limit=None, list=[1, "a", [True]], opts={"k": 'v', "n": {}},)]`,
			`t/typed {"count":-2,"ratio":1500,"force":false,"limit":null,"list":[1,"a",[true]],"opts":{"k":"v","n":{}}}`},
		{"```python\n[write_file(path=\"a\\tb\", content='it\\'s \\u00e9\\n')]\n```", `fs/write_file {"path":"a\tb","content":"it's é\n"}`},
		{`[write_file(), typed()]`, `fs/write_file {}|t/typed {}`},
		{`[typed(count=n)]`, ""},               // a variable
		{`[typed(count=1+1)]`, ""},             // an expression
		{`[typed(1)]`, ""},                     // a positional argument
		{`[typed(count=f"x")]`, ""},            // an f-string
		{`[typed(count=1, count=2)]`, ""},      // a key twice
		{`[rm(path="/")]`, ""},                 // no such tool
		{`[typed(count=1)] and then more`, ""}, // not the whole reply
		{`[typed(count=print("x"))]`, ""},      // a call inside
	} {
		r, err := ts.Decode(llm.Message{Content: tc.in})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range r.Calls {
			got = append(got, c.Tool+" "+compactJSON(c.Args))
		}
		if strings.Join(got, "|") != tc.want {
			t.Errorf("%s: calls %q, want %q (problem %q)", tc.in, got, tc.want, r.Problem)
		}
	}
}

// A JSON object inside an XML-style value is the value, not a reply; a
// protocol object a model wrapped in <tool_call> is still the reply.
func TestObjectsInsideMarkup(t *testing.T) {
	ts := schemaTools()
	r, err := ts.Decode(llm.Message{Content: "<function=write_file>\n<parameter=path>\nd.json\n</parameter>\n<parameter=content>\n{\"done\": true, \"comment\": \"x\"}\n</parameter>\n</function>"})
	if err != nil || r.Done || len(r.Calls) != 1 || r.Calls[0].Tool != "fs/write_file" {
		t.Fatalf("reply %+v, %v; want the call of write_file", r, err)
	}
	r, err = ts.Decode(llm.Message{Content: `<tool_call>{"comment": "Writing.", "command": {"tool": "fs/write_file", "args": {"path": "a"}}}</tool_call>`})
	if err != nil || len(r.Calls) != 1 || r.Comment != "Writing." || r.Hint != "" {
		t.Fatalf("reply %+v, %v; want the command", r, err)
	}
}

// With the content empty, the reply is what the reasoning ends with: the
// end of the task, a policy's own object (in Text, for planning), or
// nothing when the reasoning is prose. Only the part read is kept (Said).
func TestReplyInReasoning(t *testing.T) {
	ts := schemaTools()
	r, err := ts.Decode(llm.Message{Reasoning: "<think>All done, a secret.</think>\n" + `{"done": true, "comment": "Finished."}`})
	if err != nil || !r.Done || r.Comment != "Finished." || r.Said != `{"done": true, "comment": "Finished."}` {
		t.Fatalf("reply %+v, %v; want the end", r, err)
	}
	phase := `{"phase": "execution", "action_id": "a1", "status": "completed", "summary": "done"}`
	r, err = ts.Decode(llm.Message{Reasoning: "Reporting the action, secret.\n" + phase})
	if err != nil || r.Text != phase || r.Said != phase || r.Problem == "" || r.Comment != "" {
		t.Fatalf("reply %+v, %v; want the phase object as the text", r, err)
	}
	for _, prose := range []string{"Thinking about {\"done\": true} and more.", "Just thoughts.", ""} {
		r, err = ts.Decode(llm.Message{Reasoning: prose})
		if err != nil || len(r.Calls) != 0 || r.Done || r.Problem != "the reply was empty" || r.Said != "" {
			t.Errorf("%q: reply %+v, %v; want an empty reply", prose, r, err)
		}
	}
	// The content's reply wins over the reasoning's.
	r, err = ts.Decode(llm.Message{Content: `{"done": true, "comment": "ok"}`, Reasoning: "<function=typed>\n</function>"})
	if err != nil || !r.Done || len(r.Calls) != 0 || r.Said != "" {
		t.Fatalf("reply %+v, %v; want the content's end", r, err)
	}
}

// A server that parsed a native call and echoed it in the content gets it
// run once.
func TestNativeCallEchoedInContent(t *testing.T) {
	ts := schemaTools()
	r, err := ts.Decode(llm.Message{Content: "<tool_call>\n{\"name\": \"fs__write_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>",
		ToolCalls: []llm.ToolCall{{ID: "c1", Name: "fs__write_file", Arguments: json.RawMessage(`{"path": "a"}`)}}})
	if err != nil || len(r.Calls) != 1 || r.Calls[0].ID != "c1" || r.Comment != "" || r.Hint != "" {
		t.Fatalf("reply %+v, %v; want the native call once", r, err)
	}
}

// The comment is what the model said around its calls, without any
// family's markup, nor a call's opening that was not recovered.
func TestCleanRest(t *testing.T) {
	for in, want := range map[string]string{
		"Done.<|im_end|>":                         "Done.",
		"Look: <｜end▁of▁sentence｜>":               "Look:",
		"Here.\n</function>\n</tool_call>":        "Here.",
		"I will call it.\n<tool_call>\n{\"name\"": "I will call it.",
		"Calling [TOOL_CALLS]echo[ARGS]{":         "Calling",
		"ok</s>":                                  "ok",
		">\n</tool_call>":                         "",
		"```json\n```":                            "",
	} {
		if got := cleanRest(in, nil); got != want {
			t.Errorf("cleanRest(%q) = %q, want %q", in, got, want)
		}
	}
}

// Markup named in the reasoning's prose does not hide the whole call the
// reasoning ends with.
func TestReasoningCallAfterProseMarkup(t *testing.T) {
	ts := schemaTools()
	r, err := ts.Decode(llm.Message{Reasoning: "Qwen writes <function=NAME> blocks; so:\n<tool_call>\n<function=write_file>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>"})
	if err != nil || len(r.Calls) != 1 || compactJSON(r.Calls[0].Args) != `{"path":"a"}` || r.Comment != "" {
		t.Fatalf("reply %+v, %v; want the call the reasoning ends with", r, err)
	}
}
