package engine

import (
	"encoding/json"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// ToolCall is one tool call the model asked for, named as server/tool.
type ToolCall struct {
	ID   string          `json:"id,omitempty"` // native tool-call id, empty in JSON mode
	Tool string          `json:"tool"`         // server/tool
	Args json.RawMessage `json:"args"`
}

// Key identifies a call by what it does: the tool and its compact arguments.
func (c ToolCall) Key() string { return c.Tool + " " + compactJSON(c.Args) }

// ReplyError says why a model reply could not be used; its text is sent back
// to the model so that the next attempt can do better.
type ReplyError struct{ Reason string }

func (e *ReplyError) Error() string { return e.Reason }

// Toolset is the MCP tools as the model sees them: their provider-safe
// function names, their native definitions, and how a reply's tool calls are
// read and their results written back. The core loop and planning mode share
// it.
type Toolset struct {
	names   *toolNames
	native  bool
	tools   []toolhost.Tool
	servers []toolhost.ServerConfig
	byName  map[string]toolhost.Tool
	pos     map[string]int // full name → position in tools
	// partial is set when the catalog is too large to offer whole (see
	// catalog.go); the rest then describes how it is offered in part.
	partial    bool
	maxTools   int              // the provider's limit of tools a request (0: none)
	share      int              // the catalog's share of the budget in tokens (0: none)
	count      func(string) int // how tokens are counted
	costs      []int            // by position: what a tool adds to a request
	pinned     []int            // positions of the tools always offered
	base       int              // what the tools always offered and the search tool cost
	index      *wordIndex
	initial    []Offer // the offer of a run with no task words: what Catalog lists
	searchDesc string
}

// NewToolset prepares tools for the model; native selects the provider's
// function-calling interface instead of the JSON text protocol.
func NewToolset(tools []toolhost.Tool, servers []toolhost.ServerConfig, native bool) *Toolset {
	full := make([]string, 0, len(tools))
	byName := make(map[string]toolhost.Tool, len(tools))
	pos := make(map[string]int, len(tools))
	for i, t := range tools {
		full = append(full, t.FullName())
		byName[t.FullName()] = t
		pos[t.FullName()] = i
	}
	return &Toolset{names: newToolNames(full), native: native, tools: tools, servers: servers, byName: byName, pos: pos,
		count: llm.Estimate{}.Count}
}

// Known reports whether full ("server/tool") names a tool.
func (ts *Toolset) Known(full string) bool {
	_, ok := ts.byName[full]
	return ok
}

// ReadOnly reports whether the tool full is annotated as changing nothing.
func (ts *Toolset) ReadOnly(full string) bool { return ts.byName[full].ReadOnly }

// Fn is the function name of full sent to the provider.
func (ts *Toolset) Fn(full string) string { return ts.names.fn(full) }

// maxBrief caps the one-line description of a tool in the native catalog.
const maxBrief = 160

// Catalog renders the tool list and the servers' notes for a system prompt,
// so that the catalog reaches the model once. With native calls the
// schemas and full descriptions travel in the request's tools field: the
// prompt names each tool with the first sentence of its description. In the
// JSON protocol the prompt is the only catalog: each tool with its whole
// description and a compact summary of its parameters (paramSummary).
//
// A policy puts it whole in its system prompt. When the catalog is offered
// in part it lists the tools a run with no task words starts with, and the
// engine puts each run's own list in its place (catalog.go).
func (ts *Toolset) Catalog() (string, error) { return ts.catalog(ts.initial) }

// catalog renders the catalog of a request offering offer.
func (ts *Toolset) catalog(offer []Offer) (string, error) {
	tools := ts.offered(offer)
	data := struct {
		Lines           []string
		Servers         []toolhost.ServerConfig
		FunctionCalling bool
		Hidden          int
	}{Servers: ts.servers, FunctionCalling: ts.native}
	if ts.partial {
		data.Hidden = len(ts.tools) - len(tools) + 1 // the search tool is not the catalog's
	}
	for _, t := range tools {
		data.Lines = append(data.Lines, ts.line(t))
	}
	return render("catalog.tmpl", data)
}

// ResultPrefix begins every message that answers a tool call (a result, a
// tool error or a refusal), followed by the tool's server/tool name. The
// call's arguments are not repeated: they are in the assistant message
// that made the call, as a native call or in its JSON.
const ResultPrefix = "Result of "

// Refusal answers a call that was not run, saying why.
func (ts *Toolset) Refusal(c ToolCall, reason string) llm.Message {
	return ts.answer(c, ResultPrefix+c.Tool+": not run: "+reason)
}

// ResultMessage is the message that carries a tool's result back to the
// model: a tool message answering the native call, or a user message in
// JSON mode. repeated > 0 warns that the same call was made that many times
// in a row; rerun says that the call was cut off by a restart before its
// result was recorded, and was run again, so it may have taken effect twice.
func (ts *Toolset) ResultMessage(c ToolCall, res toolhost.Result, repeated int, rerun bool) (llm.Message, error) {
	text, err := resultPrompt(c, res, repeated, rerun)
	if err != nil {
		return llm.Message{}, err
	}
	return ts.answer(c, text), nil
}

// answer is the message that answers call c with text: a tool message for a
// native call, a user message otherwise.
func (ts *Toolset) answer(c ToolCall, text string) llm.Message {
	if ts.native && c.ID != "" {
		return llm.Message{Role: llm.ToolRole, ToolCallID: c.ID, Name: ts.names.fn(c.Tool), Content: text}
	}
	return llm.Message{Role: llm.User, Content: text}
}

// Native reports whether the provider's function calling is used.
func (ts *Toolset) Native() bool { return ts.native }
