package toolhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server's question (MCP elicitation: an elicitation/create request during
// a call, or an input_required result under the 2026-07-28 revision, which
// the go-sdk turns into the same request) goes to the Asker of the call it
// came during: the task's run, which answers from what people said on the
// task or defers the question to them (engine.Run.Ask).

// Question is what a server asked: its message and the fields it wants
// (requestedSchema: an object of flat properties).
type Question struct {
	Server  string          `json:"server"`
	Message string          `json:"message"`
	Schema  json.RawMessage `json:"schema,omitempty"`
}

// Key names the question's form: its server and the fields it asks for.
// The call made again once the question was answered asks it again with
// the same key, even when its message changed (a build number, a time in
// it).
func (q Question) Key() string {
	schema := q.Schema
	var v any
	if json.Unmarshal(schema, &v) == nil {
		schema, _ = json.Marshal(v) // keys sorted: one key for one schema
	}
	h := sha256.Sum256([]byte(q.Server + "\x00" + string(schema)))
	return hex.EncodeToString(h[:12])
}

// Answer is what goes back to the server: accept with the fields' values,
// decline (nobody will answer, or the person refused), or cancel (the
// question was put off: the call is repeated once it is answered).
type Answer struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// The answers' actions.
const (
	Accept  = "accept"
	Decline = "decline"
	Cancel  = "cancel"
)

// Asker answers the questions servers ask during a call. Ask may be called
// on another goroutine than the call's, while the call waits.
type Asker interface {
	Ask(ctx context.Context, q Question) Answer
}

type askerKey struct{}

// WithAsker returns ctx for calls whose servers' questions a answers.
func WithAsker(ctx context.Context, a Asker) context.Context {
	return context.WithValue(ctx, askerKey{}, a)
}

func askerOf(ctx context.Context) Asker {
	a, _ := ctx.Value(askerKey{}).(Asker)
	return a
}

// asking is the calls in flight on each connection, for the questions a
// server sends on its connection rather than within the call (before the
// 2026-07-28 revision): the one call in flight on it is the one that asked.
type asking struct {
	mu    sync.Mutex
	calls map[*mcp.ClientSession][]*inFlight
}

type inFlight struct {
	server string
	asker  Asker
}

// start records a call on sess until the returned func is called.
func (k *asking) start(sess *mcp.ClientSession, server string, a Asker) func() {
	f := &inFlight{server: server, asker: a}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.calls == nil {
		k.calls = map[*mcp.ClientSession][]*inFlight{}
	}
	k.calls[sess] = append(k.calls[sess], f)
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		fs := k.calls[sess]
		for i, g := range fs {
			if g == f {
				fs = append(fs[:i], fs[i+1:]...)
				break
			}
		}
		if len(fs) == 0 {
			delete(k.calls, sess)
		} else {
			k.calls[sess] = fs
		}
	}
}

// of is the server of the calls in flight on sess ("?" for none), and the
// call when there is exactly one (not when a process-scoped server is
// called by two tasks at once: who asked is not known); n is how many are.
func (k *asking) of(sess *mcp.ClientSession) (server string, f *inFlight, n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	fs := k.calls[sess]
	switch len(fs) {
	case 0:
		return "?", nil, 0
	case 1:
		return fs[0].server, fs[0], 1
	}
	return fs[0].server, nil, len(fs)
}

// elicit is the client's elicitation handler: the question goes to the
// asker of the call it came during, and is declined when there is none.
// Only form questions are taken (the capability the host advertises): a
// URL question asks a person to open a page, which an issue's comment would
// show to everyone.
func (h *Host) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	p := req.Params
	server, f, n := h.asking.of(req.Session)
	a := askerOf(ctx) // a question within the call carries the call's context
	if a == nil && f != nil {
		a = f.asker
	}
	if p.Mode == "url" || p.URL != "" {
		h.log.Warn("MCP server asked for a page to be opened (URL elicitation); declined", "server", server)
		return &mcp.ElicitResult{Action: Decline}, nil
	}
	if a == nil {
		why := "no task's call is waiting on the server"
		if n > 1 {
			why = "several tasks' calls are waiting on the server: which one asked is not known"
		}
		h.log.Warn("MCP server asked a question nobody can answer; declined", "server", server, "reason", why)
		return &mcp.ElicitResult{Action: Decline}, nil
	}
	var schema json.RawMessage
	if p.RequestedSchema != nil {
		b, err := json.Marshal(p.RequestedSchema)
		if err != nil {
			return &mcp.ElicitResult{Action: Decline}, nil
		}
		schema = b
	}
	// What the server says goes to people and to the model: its message
	// is redacted as its results are; a form that holds a secret is not
	// shown at all.
	if h.opts.Redact(string(schema)) != string(schema) {
		h.log.Warn("MCP server asked a question whose form holds a secret; declined", "server", server)
		return &mcp.ElicitResult{Action: Decline}, nil
	}
	ans := a.Ask(ctx, Question{Server: server, Message: h.opts.Redact(p.Message), Schema: schema})
	h.log.Info("MCP server asked a question", "server", server, "action", ans.Action)
	return &mcp.ElicitResult{Action: ans.Action, Content: ans.Content}, nil
}

// Field is one field a question asks for, as its schema describes it.
type Field struct {
	Name        string
	Title       string
	Description string
	Type        string // string, number, integer, boolean, or array (of choices)
	Format      string // a string's format: email, uri, date, date-time
	Required    bool
	Choices     []Choice // the values it may take (an array: each item's), none for any
	Default     any
}

// Choice is one value a field may take, with its title when it has one.
type Choice struct {
	Value string
	Title string
}

// Fields are the question's fields, in the order the schema lists them
// (sorted by name where it cannot be told); none for a question without a
// schema or with one this reader cannot read.
func (q Question) Fields() []Field {
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if json.Unmarshal(q.Schema, &s) != nil || len(s.Properties) == 0 {
		return nil
	}
	var out []Field
	dec := json.NewDecoder(bytes.NewReader(s.Properties))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := t.(string)
		var p property
		if err := dec.Decode(&p); err != nil {
			return nil
		}
		f := Field{Name: name, Title: p.Title, Description: p.Description, Type: p.Type, Format: p.Format,
			Required: slices.Contains(s.Required, name), Default: p.Default, Choices: p.choices()}
		if p.Type == "array" && p.Items != nil {
			f.Choices = p.Items.choices()
		}
		out = append(out, f)
	}
	return out
}

// property is a field's schema: the primitive schemas elicitation allows.
type property struct {
	Type        string    `json:"type"`
	Title       string    `json:"title"`
	Description string    `json:"description"`
	Format      string    `json:"format"`
	Default     any       `json:"default"`
	Enum        []any     `json:"enum"`
	EnumNames   []string  `json:"enumNames"`
	OneOf       []titled  `json:"oneOf"`
	AnyOf       []titled  `json:"anyOf"`
	Items       *property `json:"items"`
}

type titled struct {
	Const any    `json:"const"`
	Title string `json:"title"`
}

func (p property) choices() []Choice {
	var out []Choice
	for i, v := range p.Enum {
		c := Choice{Value: fmt.Sprint(v)}
		if i < len(p.EnumNames) {
			c.Title = p.EnumNames[i]
		}
		out = append(out, c)
	}
	for _, t := range slices.Concat(p.OneOf, p.AnyOf) {
		if t.Const != nil {
			out = append(out, Choice{Value: fmt.Sprint(t.Const), Title: t.Title})
		}
	}
	return out
}
