package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/coding-agent/coding-agent/internal/llm"
)

// A constrained run (Options.Constrained) has the server hold each reply to
// what the policy takes next (Policy.Expect), where the server can:
//   - in the JSON protocol, the reply's JSON schema goes with the request
//     (llm.Request.Format): a command naming one of the tools offered, the
//     end of the task, or the policy's own object; the server turns it into
//     a grammar, and the model cannot write anything else;
//   - with native calls, a step that takes calls asks for tool_choice
//     "required", and so that the model can still end the step, the
//     built-in FinishTool is offered beside the others: its call is the end
//     (the task's, or the policy's object, given as its arguments).
// Servers that ignore the constraint get what they would have got
// without it; `doctor` says which the configured server honours.

// FinishTool is the built-in tool that ends a step of a constrained run
// with native calls.
const FinishTool = "task/finish"

// Expect is the reply a policy takes next.
type Expect struct {
	// Calls: a tool call is taken; ReadOnly: of a read-only tool only.
	Calls, ReadOnly bool
	// Done: the JSON protocol's {"done": true, "comment"} ends the run
	// (the plain loop).
	Done bool
	// Object is the JSON schema of the policy's own reply object (a
	// planning phase's), an object at its root; nil: none.
	Object json.RawMessage
	// Finish says what a call of the finish tool does in this step, for
	// its description, when Object is its arguments.
	Finish string
}

// constraint is what a constrained request adds to the tools offered.
type constraint struct {
	format json.RawMessage // the reply's schema (JSON protocol)
	choice string          // tool_choice (native calls)
	finish *llm.Tool       // the finish tool offered; nil: none
	expect Expect
}

// constraint is the constraint of a request of the run: none unless the
// engine is constrained.
func (r *Run) constraint() (constraint, error) {
	if !r.e.o.Constrained {
		return constraint{}, nil
	}
	exp := r.p.Expect()
	c := constraint{expect: exp}
	ts := r.e.ts
	if !ts.native {
		schema, err := ts.ReplySchema(exp, r.st.Offered)
		c.format = schema
		return c, err
	}
	if !exp.Calls {
		// A step that takes no call takes an object as text: no tool_choice
		// fits it, and a reply schema beside native tools is refused by
		// some servers (llama.cpp's).
		return c, nil
	}
	c.choice = llm.ToolChoiceRequired
	if exp.Done || exp.Object != nil {
		def := ts.finishDef(exp)
		c.finish = &def
	}
	return c, nil
}

// finishDef is the finish tool as a request offers it for exp.
func (ts *Toolset) finishDef(exp Expect) llm.Tool {
	if exp.Object != nil {
		desc := exp.Finish
		if desc == "" {
			desc = "Ends this step: its arguments are the JSON object the step asks for."
		}
		return llm.Tool{Name: ts.names.fn(FinishTool), Description: desc + " Call it alone, once the results of your other calls are in.",
			Parameters: exp.Object}
	}
	return llm.Tool{Name: ts.names.fn(FinishTool),
		Description: "Ends the task once it is complete. Call it alone, once the results of your other calls are in, with your closing comment: what you did and what changed.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"comment":{"type":"string","description":"what you did and what changed"}},"required":["comment"]}`)}
}

// FinishFn is the function name of the finish tool when a constrained run
// with native calls offers it, "" otherwise: the prompts name it.
func (e *Engine) FinishFn() string {
	if !e.o.Constrained || !e.ts.native {
		return ""
	}
	return e.ts.names.fn(FinishTool)
}

// finished reads a reply that is one call of the finish tool alone: the
// end it stands for (the task's, or the policy's object as the text to
// read). ok is false for any other reply.
func (ts *Toolset) finished(msg llm.Message, exp Expect) (reply Reply, ok bool, err error) {
	if len(msg.ToolCalls) != 1 || !ts.isFinish(msg.ToolCalls[0].Name) {
		return Reply{}, false, nil
	}
	args, rerr := normaliseArgs(msg.ToolCalls[0].Arguments)
	if rerr != nil {
		return Reply{}, true, &ReplyError{fmt.Sprintf("the arguments of %s are not a JSON object", msg.ToolCalls[0].Name)}
	}
	text := StripThink(msg.Content)
	if exp.Object != nil {
		return Reply{Text: string(args), Comment: text}, true, nil
	}
	var a struct {
		Comment string `json:"comment"`
	}
	_ = json.Unmarshal(args, &a) // an object: a comment of another type is no comment
	if a.Comment == "" {
		a.Comment = text
	}
	return Reply{Text: text, Comment: a.Comment, Done: true}, true, nil
}

// isFinish reports whether a call's name is the finish tool's.
func (ts *Toolset) isFinish(name string) bool {
	return name == FinishTool || name == ts.names.fn(FinishTool)
}

// finishAnswer answers the finish call of msg, so that the conversation
// sent next holds no call without its result.
func (ts *Toolset) finishAnswer(msg llm.Message) llm.Message {
	c := ToolCall{ID: msg.ToolCalls[0].ID, Tool: FinishTool}
	return ts.answer(c, ResultPrefix+FinishTool+": received.")
}

// finishAmongOthers is the answer to a finish call made beside other calls:
// the step goes on with their results.
func (ts *Toolset) finishAmongOthers(c ToolCall) llm.Message {
	return ts.answer(c, ResultPrefix+FinishTool+": not taken: it ends the step, so call it alone, "+
		"in a reply of its own, once the results of your other calls are in.")
}

// ReplySchema is the JSON schema of a reply in the JSON protocol that exp
// admits: a command naming one of the tools a request with offer offers
// (read-only ones only when exp says so), the end of
// the task, or the policy's object; nil when it admits nothing the
// protocol can write. It keeps to what the servers' grammar engines share
// (type, properties, required, additionalProperties, enum, const, anyOf):
// every object is closed, so that no reply the schema admits holds both a
// command and the end.
func (ts *Toolset) ReplySchema(exp Expect, offer []Offer) (json.RawMessage, error) {
	var alts []any
	if exp.Calls {
		if names := ts.callable(offer, exp.ReadOnly); len(names) > 0 {
			alts = append(alts, ObjectSchema(Props{
				{"comment", map[string]any{"type": "string", "description": "why you run it, for the issue"}},
				{"command", ObjectSchema(Props{
					{"tool", map[string]any{"type": "string", "enum": names}},
					{"args", map[string]any{"type": "object"}},
				}, "tool", "args")},
			}, "comment", "command"))
		}
	}
	if exp.Done {
		alts = append(alts, ObjectSchema(Props{
			{"done", map[string]any{"const": true}},
			{"comment", map[string]any{"type": "string", "description": "what you did and what changed"}},
		}, "done", "comment"))
	}
	if exp.Object != nil {
		if !bytes.HasPrefix(bytes.TrimSpace(exp.Object), []byte("{")) {
			return nil, errors.New("engine: a policy's reply schema must be a JSON object")
		}
		alts = append(alts, exp.Object)
	}
	var schema any
	switch len(alts) {
	case 0:
		return nil, nil
	case 1:
		schema = alts[0]
	default:
		schema = map[string]any{"anyOf": alts}
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("engine: encoding the reply schema: %w", err)
	}
	return b, nil
}

// callable are the full names of the tools a request with offer offers
// (ts.offered: the one place that says so), in the order offered: what a
// command may name.
func (ts *Toolset) callable(offer []Offer, readOnly bool) []string {
	var names []string
	for _, t := range ts.offered(offer) {
		if full := t.FullName(); (!readOnly || t.ReadOnly) && !slices.Contains(names, full) {
			names = append(names, full)
		}
	}
	return names
}

// Names are the full names of every tool of the catalog, offered up front
// or not, sorted: those a plan may name.
func (ts *Toolset) Names() []string {
	names := make([]string, 0, len(ts.byName))
	for n := range ts.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Prop is a property of an object schema.
type Prop struct {
	Name   string
	Schema any
}

// Props are an object schema's properties, encoded in their order: the
// grammar engines have the model write them in the order of the schema.
type Props []Prop

// MarshalJSON encodes the properties as one object, in order.
func (ps Props) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(p.Name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(p.Schema)
		if err != nil {
			return nil, fmt.Errorf("property %s: %w", p.Name, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// ObjectSchema is a closed object schema: props, the required ones, and
// no other property (an open object lets a grammar add keys of any name).
func ObjectSchema(props Props, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// budgeted are the definitions a request is counted with: its tools, and
// the reply's schema when it has one, counted as a definition (some
// servers render it into the prompt).
func budgeted(defs []llm.Tool, format json.RawMessage) []llm.Tool {
	if format == nil {
		return defs
	}
	return append(slices.Clone(defs), llm.Tool{Parameters: format})
}
