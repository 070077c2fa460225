package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// A tool result names the tool and carries its output, never the call's
// arguments: the assistant message that made the call holds them once
// (SPEC-NOTES 17). A 100 KB file write is carried once, not twice.
func TestResultMessageDoesNotRepeatTheArguments(t *testing.T) {
	content := strings.Repeat("x", 100<<10)
	args, _ := json.Marshal(map[string]string{"path": "/work/big.txt", "content": content})
	for _, native := range []bool{true, false} {
		ts := NewToolset(fsTools, fsServers, native)
		id := ""
		if native {
			id = "call_1"
		}
		c := ToolCall{ID: id, Tool: "fs/edit_file", Args: args}
		msg, err := ts.ResultMessage(c, toolhost.Result{Text: "Successfully wrote to /work/big.txt", Bytes: 35}, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		want := "Result of fs/edit_file:\n<untrusted source=\"tool output of fs/edit_file\">\nSuccessfully wrote to /work/big.txt\n</untrusted>"
		if msg.Content != want {
			t.Errorf("native=%v: result message\n%q\nwant\n%q", native, msg.Content, want)
		}
		if native && (msg.Role != llm.ToolRole || msg.ToolCallID != "call_1" || msg.Name != "fs__edit_file") {
			t.Errorf("native result message %+v, want a tool message answering call_1", msg)
		}
		if !native && msg.Role != llm.User {
			t.Errorf("JSON-protocol result message role %q, want user", msg.Role)
		}

		msg, err = ts.ResultMessage(c, toolhost.Result{Text: "disk full [cut]", IsError: true, Truncated: true, Bytes: 90000}, 3, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Result of fs/edit_file (the tool reported an error):\n", "disk full",
			"[The result was cut to 15 of 90000 bytes.]", "made this exact call 3 times in a row"} {
			if !strings.Contains(msg.Content, want) {
				t.Errorf("native=%v: error result lacks %q:\n%s", native, want, msg.Content)
			}
		}
		// A call run again after a restart cut it off: the note is ours,
		// outside the tool's fenced output.
		msg, err = ts.ResultMessage(c, toolhost.Result{Text: "done", Bytes: 4}, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		head, fenced, _ := strings.Cut(msg.Content, "<untrusted")
		if !strings.HasPrefix(head, "Result of fs/edit_file:\n[This call was cut off by a restart") ||
			!strings.Contains(head, "may or may not have taken effect") || !strings.Contains(fenced, "done") {
			t.Errorf("native=%v: rerun result message %q", native, msg.Content)
		}
		ref := ts.Refusal(c, "only read-only tools may be used in this phase")
		if ref.Content != "Result of fs/edit_file: not run: only read-only tools may be used in this phase" {
			t.Errorf("refusal %q", ref.Content)
		}
		for _, m := range []llm.Message{msg, ref} {
			if !strings.HasPrefix(m.Content, ResultPrefix+"fs/edit_file") || strings.Contains(m.Content, "xxxx") || strings.Contains(m.Content, "big.txt\"") {
				t.Errorf("native=%v: %q repeats the arguments or lacks the prefix", native, m.Content[:min(len(m.Content), 200)])
			}
		}
	}
}
