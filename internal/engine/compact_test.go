package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/llm"
)

func msg(role, content string) llm.Message { return llm.Message{Role: role, Content: content} }

// stubbed shortens what precedes the verbatim tail and starts the tail with
// a reply, so that a tool result stays with its call and roles alternate.
func TestStubbedKeepsTheTailAndItsCall(t *testing.T) {
	long := strings.Repeat("output line; ", 100)
	call := llm.Message{Role: llm.Assistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "fs__write", Arguments: json.RawMessage(`{"content":"` + strings.Repeat("x", 1000) + `"}`)}}}
	msgs := []llm.Message{msg(llm.System, long), msg(llm.User, long),
		call, {Role: llm.ToolRole, ToolCallID: "c1", Content: long},
		msg(llm.Assistant, long), msg(llm.User, long),
		msg(llm.Assistant, "short"), msg(llm.User, long), msg(llm.Assistant, long), msg(llm.User, long)}
	out, cut := stubbed(msgs, 3)
	if cut != 6 || out[cut].Role != llm.Assistant {
		t.Fatalf("the tail starts at %d (%s), want 6, a reply", cut, out[cut].Role)
	}
	if out[0].Content != long || out[1].Content != long {
		t.Error("the system prompt or the task was shortened")
	}
	for i := 2; i < cut; i++ {
		if len(out[i].Content) > stubPrefix+80 {
			t.Errorf("message %d was not stubbed: %d bytes", i, len(out[i].Content))
		}
	}
	if !strings.Contains(string(out[2].ToolCalls[0].Arguments), "elided") || out[2].ToolCalls[0].ID != "c1" {
		t.Errorf("the call's arguments: %s", out[2].ToolCalls[0].Arguments)
	}
	if !json.Valid(out[2].ToolCalls[0].Arguments) {
		t.Error("stubbed arguments are not JSON")
	}
	for i := cut; i < len(out); i++ {
		if out[i].Content != msgs[i].Content {
			t.Errorf("tail message %d changed", i)
		}
	}
	if strings.Repeat("x", 1000) != string(msgs[2].ToolCalls[0].Arguments)[12:1012] {
		t.Error("the input conversation was changed")
	}
}

// withNote ends the task with one note, replacing an earlier one.
func TestWithNoteReplacesTheEarlierNote(t *testing.T) {
	msgs := []llm.Message{msg(llm.System, "s"), msg(llm.User, "the task"), msg(llm.Assistant, "a")}
	once := withNote(msgs, "first", "plan A")
	twice := withNote(once, "second", "plan B")
	if got := twice[1].Content; strings.Count(got, noteMark) != 1 || !strings.HasPrefix(got, "the task\n\n") ||
		!strings.Contains(got, "second") || !strings.Contains(got, "plan B") || strings.Contains(got, "plan A") {
		t.Errorf("task after two notes:\n%s", got)
	}
	if msgs[1].Content != "the task" || len(twice) != 3 {
		t.Error("the input was changed or a message added")
	}
}
