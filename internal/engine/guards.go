package engine

import "fmt"

// The guards are pure functions of the run's counters: the engine (and a
// policy, for its own limits) asks them and acts on the answer.

// CallLimit says why no further model request may be made after calls of at
// most max ("" while requests remain).
func CallLimit(calls, max int) string {
	if calls < max {
		return ""
	}
	return fmt.Sprintf("stopped after %d model calls without finishing (max_llm_process_num)", calls)
}

// UnusableLimit says why the run ends after count unusable replies in a
// row, the last for reason, when count has reached max ("" below it).
// where names the phase, if any.
func UnusableLimit(count, max int, where, reason string) string {
	if count < max {
		return ""
	}
	if where != "" {
		where = " (" + where + ")"
	}
	return fmt.Sprintf("the model sent %d unusable replies in a row%s; the last: %s", count, where, reason)
}

// RepeatedFailure says why a tool call is not run again: the same call
// (ToolCall.Key) has already failed limit times ("" while it may run).
func RepeatedFailure(failures map[string]int, call ToolCall, limit int) string {
	if n := failures[call.Key()]; n >= limit {
		return fmt.Sprintf("the call %s with the same arguments failed %d times; it was not run again", call.Tool, n)
	}
	return ""
}

// repeatWarnAt is how many identical tool calls in a row make the result
// carry a warning to the model.
const repeatWarnAt = 3

// Repeats counts identical tool calls in a row.
type Repeats struct {
	LastCall string `json:"last_call,omitempty"` // key of the last call
	Count    int    `json:"repeats,omitempty"`   // identical calls in a row ending with it
}

// Note returns the count after a call with key (ToolCall.Key) and the count
// its result should warn about: the run's length once it reaches 3, else 0.
func (r Repeats) Note(key string) (next Repeats, warn int) {
	if key == r.LastCall {
		r.Count++
	} else {
		r.LastCall, r.Count = key, 1
	}
	if r.Count >= repeatWarnAt {
		return r, r.Count
	}
	return r, 0
}
