package engine

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCallLimit(t *testing.T) {
	for _, tc := range []struct {
		calls, max int
		stop       bool
	}{{0, 1, false}, {999, 1000, false}, {1000, 1000, true}, {1001, 1000, true}, {1, 1, true}} {
		why := CallLimit(tc.calls, tc.max)
		if (why != "") != tc.stop || (tc.stop && !strings.Contains(why, "max_llm_process_num")) {
			t.Errorf("CallLimit(%d, %d) = %q, want stop %v", tc.calls, tc.max, why, tc.stop)
		}
	}
}

func TestUnusableLimit(t *testing.T) {
	for _, tc := range []struct {
		count, max    int
		where, reason string
		want          string
	}{
		{4, 5, "", "x", ""},
		{5, 5, "", "no JSON", "the model sent 5 unusable replies in a row; the last: no JSON"},
		{5, 5, "planning", "no JSON", "the model sent 5 unusable replies in a row (planning); the last: no JSON"},
		{6, 5, "", "empty", "the model sent 6 unusable replies in a row; the last: empty"},
		{0, 1, "", "x", ""},
	} {
		if got := UnusableLimit(tc.count, tc.max, tc.where, tc.reason); got != tc.want {
			t.Errorf("UnusableLimit(%d, %d, %q) = %q, want %q", tc.count, tc.max, tc.where, got, tc.want)
		}
	}
}

func TestRepeatedFailure(t *testing.T) {
	call := ToolCall{Tool: "fs/write", Args: json.RawMessage(`{"path": "a"}`)}
	same := ToolCall{Tool: "fs/write", Args: json.RawMessage(`{"path":"a"}`)} // same call, other spacing
	other := ToolCall{Tool: "fs/write", Args: json.RawMessage(`{"path":"b"}`)}
	for _, tc := range []struct {
		failures map[string]int
		call     ToolCall
		refused  bool
	}{
		{nil, call, false},
		{map[string]int{call.Key(): 1}, call, false},
		{map[string]int{call.Key(): 2}, call, true},
		{map[string]int{call.Key(): 2}, same, true},
		{map[string]int{call.Key(): 3}, other, false},
	} {
		why := RepeatedFailure(tc.failures, tc.call, 2)
		if (why != "") != tc.refused {
			t.Errorf("RepeatedFailure(%v, %s) = %q, want refused %v", tc.failures, tc.call.Key(), why, tc.refused)
		}
	}
}

func TestRepeats(t *testing.T) {
	var r Repeats
	keys := []string{"a", "a", "a", "a", "b", "a"}
	wantWarn := []int{0, 0, 3, 4, 0, 0} // a warning from the third identical call on
	wantCount := []int{1, 2, 3, 4, 1, 1}
	for i, k := range keys {
		var warn int
		r, warn = r.Note(k)
		if warn != wantWarn[i] || r.Count != wantCount[i] || r.LastCall != k {
			t.Fatalf("call %d (%s): Note = %d, state %+v; want %d and a run of %d", i+1, k, warn, r, wantWarn[i], wantCount[i])
		}
	}
}
