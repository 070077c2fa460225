package engine

import "github.com/coding-agent/coding-agent/internal/llm"

// RequestCounter counts requests as the engine counts them before sending
// them (unscaled), for tests that check what was sent against the budget;
// like a run, it counts each text once.
func RequestCounter(b Budget) func(msgs []llm.Message, tools []llm.Tool) int {
	r := &Run{e: &Engine{o: Options{Budget: b}}, st: &checkpoint{}, counted: map[string]int{}}
	return func(msgs []llm.Message, tools []llm.Tool) int { return r.tokens(msgs, r.toolTokens(tools)) }
}

// Limit is what a request may hold under b.
func (b Budget) Limit() int { return b.limit() }
