package engine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The <tool_call> block and the XML-style families: Hermes and Qwen's
// <tool_call>{"name", "arguments"}</tool_call>, Qwen3-Coder and Qwen3.5's
// <function=NAME><parameter=P>…</parameter></function> (with or without
// the <tool_call> around it), GLM's <tool_call>NAME<arg_key>K</arg_key>
// <arg_value>V</arg_value></tool_call>, and MiniMax's
// <minimax:tool_call><invoke name="NAME"><parameter name="P">V</parameter>
// </invoke></minimax:tool_call>. The parameter values of the XML-style
// families are text, typed by the tool's input schema (typedArgs).

// toolCallBlocks reads each <tool_call> block: up to its </tool_call>, or,
// where the closing tag is missing, to the end of the text (a block whose
// JSON is whole is a whole call; the XML-style ones carry their own end).
func toolCallBlocks(text string) []markup {
	const open, end = "<tool_call>", "</tool_call>"
	var out []markup
	for at := 0; ; {
		i := strings.Index(text[at:], open)
		if i < 0 {
			return out
		}
		start := at + i
		body := start + len(open)
		inner, stop, closed := text[body:], len(text), false
		if j := strings.Index(inner, end); j >= 0 {
			inner, stop, closed = inner[:j], body+j+len(end), true
		}
		calls, problem := blockCalls(inner, closed)
		opaque := strings.Contains(inner, "<function=") || strings.Contains(inner, "<invoke") || strings.Contains(inner, "<arg_key>")
		out = append(out, markup{span: span{start, stop}, calls: calls, problem: problem, opaque: opaque})
		at = stop
	}
}

// blockCalls reads what a <tool_call> block holds: XML-style calls, GLM's
// name and arguments, or JSON call objects.
func blockCalls(inner string, closed bool) ([]rawCall, string) {
	switch {
	case strings.Contains(inner, "<function="):
		return nested(inner, qwenFunctions(inner))
	case strings.Contains(inner, "<invoke"):
		return nested(inner, invokes(inner))
	case strings.Contains(inner, "<arg_key>"):
		return glmCall(inner, closed)
	}
	if objs := rawObjects(inner); len(objs) > 0 {
		var calls []rawCall
		for _, raw := range objs {
			name, args, ok := callObject(raw, true)
			if !ok {
				return nil, `the <tool_call> block holds no {"name": ..., "arguments": {...}} object`
			}
			calls = append(calls, rawCall{name: name, args: args})
		}
		return calls, ""
	}
	if name := strings.TrimSpace(inner); toolWord.MatchString(name) {
		// GLM writes a call without arguments as its bare name.
		if !closed {
			return nil, fmt.Sprintf("the <tool_call> of %s has no closing </tool_call>: it looks cut off; write the whole call", name)
		}
		return []rawCall{{name: name, text: true}}, ""
	}
	return nil, `the <tool_call> block holds no {"name": ..., "arguments": {...}} object`
}

// toolWord is a tool's name as models write it: no spaces, no markup.
var toolWord = regexp.MustCompile(`^[A-Za-z0-9_.:/\-]+$`)

// nested are the calls of the markups found inside a block, which must
// hold nothing else.
func nested(inner string, ms []markup) ([]rawCall, string) {
	var calls []rawCall
	at := 0
	for _, m := range ms {
		if m.problem != "" {
			return nil, m.problem
		}
		if !blank(inner[at:m.start]) {
			return nil, "the <tool_call> block holds text beside its call"
		}
		calls = append(calls, m.calls...)
		at = m.end
	}
	if !blank(inner[at:]) {
		return nil, "the <tool_call> block holds text beside its call"
	}
	return calls, ""
}

// qwenFunctions reads each <function=NAME>…</function> block. Qwen3-Coder
// and Qwen3.5 often leave out the opening <tool_call> (and the server eats
// it), so the block stands on its own; but its </function> must be there:
// without it the call may have been cut, and is not acted upon.
func qwenFunctions(text string) []markup {
	const open, end = "<function=", "</function>"
	var out []markup
	for at := 0; ; {
		i := strings.Index(text[at:], open)
		if i < 0 {
			return out
		}
		start := at + i
		head := start + len(open)
		gt := strings.IndexByte(text[head:], '>')
		j := strings.Index(text[head:], end)
		if gt < 0 || j < 0 || j < gt {
			name := text[head:]
			if gt >= 0 {
				name = text[head : head+gt]
			}
			return append(out, markup{span: span{start, len(text)}, opaque: true,
				problem: fmt.Sprintf("the call of %s has no closing </function>: it looks cut off; write the whole call", clip(oneLine(name), 60))})
		}
		name := text[head : head+gt]
		stop := head + j + len(end)
		m := markup{span: span{start, stop}, opaque: true}
		if !toolWord.MatchString(name) {
			m.problem = fmt.Sprintf("<function=%s> does not name a tool", clip(oneLine(name), 60))
		} else if params, problem := xmlParams(text[head+gt+1:head+j], "<parameter=", name); problem != "" {
			m.problem = problem
		} else {
			m.calls = []rawCall{{name: name, params: params, text: true}}
		}
		out = append(out, m)
		at = stop
	}
}

// xmlParams reads Qwen3-Coder's parameters, <parameter=P>\nVALUE\n</parameter>
// each; a missing </parameter> ends the value at the next parameter or at
// </function>, as the vendors' parsers read it.
func xmlParams(body, open, fn string) ([]param, string) {
	const end = "</parameter>"
	var params []param
	for at := 0; ; {
		rest := strings.TrimLeft(body[at:], " \t\r\n")
		if rest == "" {
			return params, ""
		}
		if !strings.HasPrefix(rest, open) {
			return nil, fmt.Sprintf("the call of %s holds text outside its <parameter> tags", fn)
		}
		at = len(body) - len(rest) + len(open)
		gt := strings.IndexByte(body[at:], '>')
		if gt < 0 {
			return nil, fmt.Sprintf("a parameter of the call of %s is not closed", fn)
		}
		name := body[at : at+gt]
		if !paramName.MatchString(name) {
			return nil, fmt.Sprintf("the call of %s has a malformed parameter name %q", fn, clip(name, 60))
		}
		at += gt + 1
		stop, next := len(body), len(body)
		if k := strings.Index(body[at:], end); k >= 0 {
			stop, next = at+k, at+k+len(end)
		}
		if k := strings.Index(body[at:], open); k >= 0 && at+k < stop {
			stop, next = at+k, at+k
		}
		params = append(params, param{name, trimNewline(body[at:stop])})
		at = next
	}
}

// paramName is a parameter's name: no markup, no line break.
var paramName = regexp.MustCompile(`^[^<>=\n\r"]+$`)

// trimNewline removes the one line break the templates put on each side
// of a value, and no more (a file's content keeps its own).
func trimNewline(s string) string {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "\r\n"), "\n")
	s = strings.TrimSuffix(s, "\n")
	return strings.TrimSuffix(s, "\r")
}

// glmCall reads GLM-4.5 to 4.7's call: the tool's name, then
// <arg_key>K</arg_key><arg_value>V</arg_value> pairs, in a <tool_call>
// block that must be closed (a cut one could be missing arguments).
func glmCall(inner string, closed bool) ([]rawCall, string) {
	i := strings.Index(inner, "<arg_key>")
	name := strings.TrimSpace(inner[:i])
	if !toolWord.MatchString(name) {
		return nil, "the <tool_call> block does not begin with the name of a tool"
	}
	if !closed {
		return nil, fmt.Sprintf("the <tool_call> of %s has no closing </tool_call>: it looks cut off; write the whole call", name)
	}
	var params []param
	for rest := inner[i:]; strings.TrimSpace(rest) != ""; {
		rest = strings.TrimLeft(rest, " \t\r\n")
		key, after, ok := between(rest, "<arg_key>", "</arg_key>")
		if !ok {
			return nil, fmt.Sprintf("the call of %s holds text outside its <arg_key>/<arg_value> pairs", name)
		}
		value, after, ok := between(strings.TrimLeft(after, " \t\r\n"), "<arg_value>", "</arg_value>")
		if !ok || !paramName.MatchString(strings.TrimSpace(key)) {
			return nil, fmt.Sprintf("the argument %q of %s has no <arg_value>", clip(key, 60), name)
		}
		params = append(params, param{strings.TrimSpace(key), trimNewline(value)})
		rest = after
	}
	return []rawCall{{name: name, params: params, text: true}}, ""
}

// between reads s as open, a text, close: the text and what follows.
func between(s, open, close string) (in, after string, ok bool) {
	rest, ok := strings.CutPrefix(s, open)
	if !ok {
		return "", "", false
	}
	in, after, ok = strings.Cut(rest, close)
	return in, after, ok
}

// invokes reads each MiniMax-M2 <invoke name="NAME">…</invoke> block (in
// its <minimax:tool_call> or not: the wrapper is a token servers strip);
// its </invoke> must be there.
var invokeHead = regexp.MustCompile(`<invoke name=(?:"([^"<>\n]*)"|'([^'<>\n]*)')\s*>`)

func invokes(text string) []markup {
	const end = "</invoke>"
	var out []markup
	for at := 0; ; {
		loc := invokeHead.FindStringSubmatchIndex(text[at:])
		if loc == nil {
			return out
		}
		start, head := at+loc[0], at+loc[1]
		name := submatch(text[at:], loc, 1)
		j := strings.Index(text[head:], end)
		if j < 0 {
			return append(out, markup{span: span{start, len(text)}, opaque: true,
				problem: fmt.Sprintf("the call of %s has no closing </invoke>: it looks cut off; write the whole call", clip(name, 60))})
		}
		stop := head + j + len(end)
		m := markup{span: span{start, stop}, opaque: true}
		if params, problem := invokeParams(text[head:head+j], name); problem != "" {
			m.problem = problem
		} else {
			m.calls = []rawCall{{name: name, params: params, text: true}}
		}
		out = append(out, m)
		at = stop
	}
}

var invokeParam = regexp.MustCompile(`^<parameter name=(?:"([^"<>\n]*)"|'([^'<>\n]*)')\s*>`)

// invokeParams reads <parameter name="P">V</parameter> each, closed.
func invokeParams(body, fn string) ([]param, string) {
	var params []param
	for rest := body; ; {
		rest = strings.TrimLeft(rest, " \t\r\n")
		if rest == "" {
			return params, ""
		}
		loc := invokeParam.FindStringSubmatchIndex(rest)
		if loc == nil {
			return nil, fmt.Sprintf("the call of %s holds text outside its <parameter> tags", fn)
		}
		name := submatch(rest, loc, 1)
		value, after, ok := strings.Cut(rest[loc[1]:], "</parameter>")
		if !ok {
			return nil, fmt.Sprintf("the parameter %q of %s is not closed", name, fn)
		}
		params = append(params, param{name, trimNewline(value)})
		rest = after
	}
}

// submatch is the first of the alternative groups from g on that matched.
func submatch(s string, loc []int, g int) string {
	for ; 2*g+1 < len(loc); g++ {
		if loc[2*g] >= 0 {
			return s[loc[2*g]:loc[2*g+1]]
		}
	}
	return ""
}

// typedArgs builds the arguments object of the tool full from parameters
// written as text: each value becomes the JSON type the tool's input schema
// gives the parameter (a string where the schema allows one or says
// nothing). A value that cannot be of its type is a problem: the call is
// not guessed at.
func typedArgs(schema json.RawMessage, full string, params []param) (json.RawMessage, string) {
	var root jsonSchema
	_ = json.Unmarshal(schema, &root) // a schema that cannot be read types nothing: values stay text
	r := summary{root: &root}
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range params {
		if slices.ContainsFunc(params[:i], func(q param) bool { return q.name == p.name }) {
			return nil, fmt.Sprintf("the call of %s gives the parameter %q twice", full, p.name)
		}
		v, want := typeValue(r, root.Properties[p.name], p.value)
		if v == nil {
			return nil, fmt.Sprintf("the parameter %q of %s is %q, which is not %s as its schema requires",
				p.name, full, clip(oneLine(p.value), 80), want)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(p.name)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return json.RawMessage(b.String()), ""
}

var (
	jsonInteger = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)$`)
	jsonNumber  = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$`)
)

// typeValue is v as the JSON value of schema s, or nil and the types it
// should have been.
func typeValue(r summary, s *jsonSchema, v string) (json.RawMessage, string) {
	types := schemaTypes(r, s, 0)
	if len(types) == 0 || slices.Contains(types, "string") {
		b, _ := json.Marshal(v)
		return b, ""
	}
	t := strings.TrimSpace(v)
	for _, ty := range types {
		switch ty {
		case "integer":
			if jsonInteger.MatchString(t) {
				return json.RawMessage(t), ""
			}
		case "number":
			if jsonNumber.MatchString(t) {
				return json.RawMessage(t), ""
			}
		case "boolean":
			// The templates render Python's True and False as they are.
			if l := strings.ToLower(t); l == "true" || l == "false" {
				return json.RawMessage(l), ""
			}
		case "null":
			if t == "null" || t == "None" {
				return json.RawMessage("null"), ""
			}
		case "object", "array":
			open := map[string]string{"object": "{", "array": "["}[ty]
			if strings.HasPrefix(t, open) && json.Valid([]byte(t)) {
				return json.RawMessage(t), ""
			}
		}
	}
	return nil, strings.Join(types, " or ")
}

// schemaTypes are the JSON types schema s allows: its type names, its
// alternatives', or what its enum, properties or items imply.
func schemaTypes(r summary, s *jsonSchema, depth int) []string {
	if s == nil || depth > maxParamDepth {
		return nil
	}
	if s.Ref != "" {
		return schemaTypes(r, r.resolve(s.Ref), depth+1)
	}
	names := typeNames(s.Type)
	for _, a := range append(slices.Clip(s.AnyOf), s.OneOf...) {
		names = append(names, schemaTypes(r, a, depth+1)...)
	}
	if len(names) == 0 {
		for _, e := range s.Enum {
			switch {
			case len(e) > 0 && e[0] == '"':
				names = append(names, "string")
			case string(e) == "true" || string(e) == "false":
				names = append(names, "boolean")
			case string(e) == "null":
				names = append(names, "null")
			default:
				names = append(names, "number")
			}
		}
	}
	switch {
	case len(names) > 0:
	case len(s.Properties) > 0:
		names = []string{"object"}
	case len(s.Items) > 0:
		names = []string{"array"}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
