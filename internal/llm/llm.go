// Package llm is the model port: one Chat call per model turn, with the
// conversation, optional native tools, and the usage it cost. Providers live
// in llm/openai (OpenAI and LM Studio) and llm/ollama.
package llm

import (
	"context"
	"encoding/json"
	"errors"
)

// Roles of a message.
const (
	System    = "system"
	User      = "user"
	Assistant = "assistant"
	ToolRole  = "tool"
)

// Message is one entry of the conversation.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // assistant messages with native tool calls
	ToolCallID string     `json:"tool_call_id,omitempty"` // tool messages: which call this answers
	Name       string     `json:"name,omitempty"`         // tool messages: the function name
	// Reasoning is the reasoning trace a server returned beside the answer
	// (reasoning_content or reasoning on OpenAI-compatible servers,
	// thinking on Ollama). It is never sent back to the model, never posted
	// and never stored in a checkpoint; when the content holds no reply, the
	// engine keeps only the reply it reads at its end (engine.Reply.Said).
	Reasoning string `json:"-"`
}

// ToolCall is a native function call the model asked for.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"` // a JSON object
}

// Tool describes a function the model may call natively.
type Tool struct {
	Name        string          `json:"name"` // matches ^[a-zA-Z0-9_-]{1,64}$
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"` // JSON Schema of the arguments object
}

// Request is one model turn. When Tools is empty no tools field is sent.
type Request struct {
	Messages  []Message
	Tools     []Tool
	MaxTokens int // 0: provider default
	// Format is a JSON schema the reply's content must match, for a
	// server that enforces it as a grammar (Ollama's format, the
	// response_format of OpenAI-compatible servers); nil: none.
	Format json.RawMessage
	// ToolChoice is ToolChoiceRequired to have the server make the model
	// call a tool, or "" for the server's default. It is only sent with
	// Tools, and only on the wire that has it (OpenAI's).
	ToolChoice string
}

// ToolChoiceRequired asks for a reply that calls at least one tool.
const ToolChoiceRequired = "required"

// Usage is what one call cost.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Response is the model's answer to one Request.
type Response struct {
	Message Message // role assistant
	Usage   Usage
	// FinishReason is why the model stopped, as the server said it
	// (OpenAI finish_reason, Ollama done_reason): FinishLength when the
	// reply was cut at the token limit; "" when the server did not say.
	FinishReason string
}

// FinishLength is the finish reason of a reply cut at the output token
// limit, on both wire formats.
const FinishLength = "length"

// Client is a model provider.
type Client interface {
	Chat(ctx context.Context, req Request) (Response, error)
}

// ErrEmptyReply is returned (wrapped) when the provider answered 200 with
// no choice or message at all.
var ErrEmptyReply = errors.New("model returned no message")

// ErrContextLength is returned (wrapped) when the server refused a request
// as longer than the model's context window (OpenAI: HTTP 400 with code
// context_length_exceeded).
var ErrContextLength = errors.New("the request exceeds the model's context length")

// Counter counts the tokens of a text as a model sees them: a tokenizer
// where the model family is known, otherwise an estimate.
type Counter interface {
	Count(text string) int
}

// Estimate counts a token for every 3 bytes, rounded up: more than BPE
// tokenizers give for English and code (about 4 bytes a token), and about
// one token per character for CJK text (3 bytes in UTF-8). It stands in
// for a tokenizer the engine does not have.
type Estimate struct{}

// Count is the estimate of text's tokens.
func (Estimate) Count(text string) int { return (len(text) + 2) / 3 }

// ErrorInBody is the header wire.AnswerTransport sets on an answer it
// turned from a 200 into an error status: its value is the status the
// server answered ("200"). A provider reads it to say that the server
// answered success with an error, not the status the retry layer saw.
const ErrorInBody = "Coding-Agent-Error-In-Body"
