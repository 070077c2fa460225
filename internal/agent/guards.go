package agent

// repeatWarnAt is how many identical tool calls in a row make the result
// carry a warning to the model.
const repeatWarnAt = 3

// Repeats counts identical tool calls in a row. The core loop and planning
// mode keep one in their checkpoints, as "last_call" and "repeats".
type Repeats struct {
	LastCall string `json:"last_call,omitempty"` // key of the last call
	Count    int    `json:"repeats,omitempty"`   // identical calls in a row ending with it
}

// Note records a call by its key (ToolCall.Key) and returns the count its
// result should warn about: the run's length once it reaches 3, else 0.
func (r *Repeats) Note(key string) (warn int) {
	if key == r.LastCall {
		r.Count++
	} else {
		r.LastCall, r.Count = key, 1
	}
	if r.Count >= repeatWarnAt {
		return r.Count
	}
	return 0
}
