package llmtest

import (
	"encoding/json"
	"fmt"
)

// Step is one scripted answer: a Reply, a Fault, Garbage, Empty, Slow,
// Stall, Raw or Streamed.
type Step interface{ isStep() }

// Reply answers 200 with a model message in the request's wire format.
type Reply struct {
	Content   string
	ToolCalls []Call
	Usage     Usage
	// FinishReason defaults to "tool_calls" when ToolCalls is set and to
	// "stop" otherwise; Ollama's done_reason is FinishReason when set
	// (e.g. "length"), else "stop".
	FinishReason string
	// Reasoning is a reasoning trace sent beside the content: Ollama's
	// message.thinking, or on the OpenAI wire the field ReasoningField
	// names ("" means reasoning_content, as llama.cpp, LM Studio and older
	// vLLM send it; newer vLLM sends "reasoning").
	Reasoning      string
	ReasoningField string
}

// Call is a native tool call in a Reply.
type Call struct {
	// ID is sent as the call's id. When empty, OpenAI replies carry
	// "call_<request>_<index>" and Ollama replies carry no id, as Ollama does.
	ID   string
	Name string
	// Args are the arguments: a json.RawMessage is sent verbatim (on the
	// OpenAI wire it may even be invalid JSON, to test a model's bad
	// output, or arguments cut at the token limit), anything else is
	// marshalled, nil is {}.
	Args any
	// NoID sends the call without an id on the OpenAI wire too, as some
	// servers do; with no Name and no Args it is the empty call some
	// servers send beside a final answer.
	NoID bool
}

// Usage is the token count a Reply reports.
type Usage struct{ In, Out int }

// Fault answers with an HTTP error.
type Fault struct {
	Status     int    // e.g. 500, 429, 503; 0 means 500
	Body       string // "" means an error object in the wire format
	NoBody     bool   // answer with an empty body instead
	RetryAfter string // sent as the Retry-After header when not empty
}

// Garbage answers 200 with Body verbatim; "" means a truncated JSON
// object. Any body goes, so it also serves hand-written replies in shapes
// Reply does not produce.
type Garbage struct{ Body string }

// Empty answers 200 with no message at all: an OpenAI completion with no
// choices, or an empty Ollama body.
type Empty struct{}

// Slow holds the answer back. It closes Arrived (when not nil) once the
// request is in, then waits until the request's context ends (the client
// gave up: nothing is answered) or Release is closed (Then is answered; nil
// means an empty Reply). With a nil Release it waits for the client only.
// Each Slow needs its own Arrived channel.
type Slow struct {
	Arrived chan<- struct{}
	Release <-chan struct{}
	Then    Step
}

// Stall starts the answer Then would give (nil means an empty Reply): its
// status, its headers and the first half of its body, and then sends
// nothing more until the client gives up, as a server that stalls
// mid-answer. Arrived (when not nil) is closed once the first half is out.
type Stall struct {
	Then    Step
	Arrived chan<- struct{}
}

func (Reply) isStep()   {}
func (Fault) isStep()   {}
func (Garbage) isStep() {}
func (Empty) isStep()   {}
func (Slow) isStep()    {}
func (Stall) isStep()   {}

// argsJSON renders a Call's arguments.
func argsJSON(args any) (json.RawMessage, error) {
	switch a := args.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		return a, nil
	default:
		b, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("marshalling tool call arguments: %w", err)
		}
		return b, nil
	}
}

func finishReason(r Reply) string {
	switch {
	case r.FinishReason != "":
		return r.FinishReason
	case len(r.ToolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}
