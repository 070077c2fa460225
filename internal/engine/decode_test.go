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
