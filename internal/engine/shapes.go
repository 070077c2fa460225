package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// Local models write tool calls in the shapes their chat templates taught
// them, and servers leave them in the content (or the reasoning field) when
// their parser does not recognise them (shapes_test.go lists each shape
// with where it is documented). This file and the shapes_*.go files recover
// the calls from such text, one small recogniser per model family, all
// sharing how a call's tool is named (resolve) and its arguments read
// (addCall). A call is recovered only when it is complete and its tool can
// be named exactly; markup cut off before its end is a problem, never a
// guess.

// span is a part of a text: [start, end).
type span struct{ start, end int }

// markup is a tool call (or a list of them) a reply writes as text in a
// model family's markup, and where it is; or, with problem set, markup
// that cannot be read as a whole call (cut off, malformed).
type markup struct {
	span
	calls   []rawCall
	problem string
	// opaque markup holds values written as text (the XML-style
	// families): a JSON object inside it is a value, not a reply.
	opaque bool
}

// rawCall is one call as the markup writes it: the tool as named, and its
// arguments as a JSON object or as parameters written as text.
type rawCall struct {
	name string
	args json.RawMessage // the arguments object (nil: none)
	// params are the arguments as text (the XML-style families); each
	// value is typed by the tool's input schema (typedArgs).
	params []param
	text   bool // the arguments are params
}

// param is a parameter written as text: its name and its value.
type param struct{ name, value string }

// families are the recognisers of the markups that can stand anywhere in
// a reply; each returns what it finds, in order. The pythonic call list and
// bare JSON call objects are whole-reply shapes, read apart (recoverCalls).
var families = []func(string) []markup{
	toolCallBlocks, // <tool_call>: Hermes/Qwen JSON, Qwen3-Coder XML, GLM, MiniMax-style invoke
	qwenFunctions,  // <function=NAME>…</function> without <tool_call>
	invokes,        // MiniMax <invoke name="NAME">…</invoke>
	deepSeekCalls,  // DeepSeek V3/R1/V3.1 <｜tool▁call▁begin｜>
	mistralCalls,   // Mistral/Devstral [TOOL_CALLS]
	kimiCalls,      // Kimi K2 <|tool_call_begin|>
	pythonTagCalls, // Llama <|python_tag|>, <|python_start|>
	harmonyMarkups, // gpt-oss to=functions.NAME … <|message|>{…}
}

// findMarkup runs every family on text: the markups found, in order, none
// overlapping (one that starts inside another, such as a <function=> block
// inside its <tool_call>, is the outer one's).
func findMarkup(text string) []markup {
	return outermost(allMarkup(text))
}

// wholeMarkup is findMarkup without the markups that are no whole calls
// (cut, malformed): in a reasoning they are the model thinking about
// calls, and must not hide a whole call they overlap.
func wholeMarkup(text string) []markup {
	return outermost(slices.DeleteFunc(allMarkup(text), func(m markup) bool { return m.problem != "" }))
}

// allMarkup is what every family finds in text.
func allMarkup(text string) []markup {
	var all []markup
	for _, f := range families {
		all = append(all, f(text)...)
	}
	return all
}

// outermost are the markups of all in order, leaving out each that starts
// inside one before it.
func outermost(all []markup) []markup {
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].start != all[j].start {
			return all[i].start < all[j].start
		}
		return all[i].end > all[j].end
	})
	var out []markup
	end := -1
	for _, m := range all {
		if m.start < end {
			continue
		}
		out = append(out, m)
		end = m.end
	}
	return out
}

// textCalls are the tool calls written as text in a reply, and the text
// around them, or why the calls it found cannot be used.
type textCalls struct {
	calls   []ToolCall
	rest    string // the text without the calls: the step's comment
	problem string
}

// recoverCalls finds tool calls written as text: in any family's markup,
// and, unless taggedOnly, as a whole reply that is a pythonic call list or
// bare {"name", "arguments"|"parameters"} objects. Every call must name a
// tool exactly (resolve) and be whole, or none is recovered.
func (ts *Toolset) recoverCalls(text string, taggedOnly bool) textCalls {
	return ts.recoverFrom(text, findMarkup(text), taggedOnly)
}

// recoverFrom is recoverCalls with text's markups ms found already.
func (ts *Toolset) recoverFrom(text string, ms []markup, taggedOnly bool) textCalls {
	if harmonyCall.MatchString(text) {
		return ts.harmonyCalls(text)
	}
	out := ts.resolveMarkup(ms)
	var cut []span
	for _, m := range ms {
		cut = append(cut, m.span)
	}
	if len(ms) == 0 && !taggedOnly {
		if calls, ok := ts.pythonicCalls(text); ok {
			return textCalls{calls: calls}
		}
		for _, o := range jsonObjectsAt(text) {
			name, args, ok := callObject(o.raw, false)
			if !ok {
				continue
			}
			if !ts.addCall(&out, name, args) {
				out.calls = nil
				break
			}
			cut = append(cut, o.span)
		}
	}
	out.rest = cleanRest(text, cut)
	return out
}

// resolveMarkup reads the calls of ms: each tool named exactly and its
// arguments an object, or the first problem and no calls.
func (ts *Toolset) resolveMarkup(ms []markup) textCalls {
	var out textCalls
	for _, m := range ms {
		if m.problem != "" {
			return textCalls{problem: m.problem}
		}
		for _, c := range m.calls {
			ok := false
			if c.text {
				ok = ts.addTyped(&out, c.name, c.params)
			} else {
				ok = ts.addCall(&out, c.name, c.args)
			}
			if !ok {
				return textCalls{problem: out.problem}
			}
		}
	}
	return out
}

// addCall resolves name and checks args; false (with the problem set) when
// the call cannot be used.
func (ts *Toolset) addCall(out *textCalls, name string, args json.RawMessage) bool {
	full, _, problem := ts.resolve(name)
	if problem != "" {
		out.problem = problem + "; name the tool exactly as listed"
		return false
	}
	norm, err := normaliseArgs(args)
	if err != nil {
		out.problem = fmt.Sprintf("the arguments of %s are not a JSON object", name)
		return false
	}
	out.calls = append(out.calls, ToolCall{Tool: full, Args: norm})
	return true
}

// addTyped resolves name and types params by the tool's input schema;
// false (with the problem set) when the call cannot be used.
func (ts *Toolset) addTyped(out *textCalls, name string, params []param) bool {
	full, _, problem := ts.resolve(name)
	if problem != "" {
		out.problem = problem + "; name the tool exactly as listed"
		return false
	}
	args, problem := typedArgs(ts.byName[full].InputSchema, full, params)
	if problem != "" {
		out.problem = problem
		return false
	}
	out.calls = append(out.calls, ToolCall{Tool: full, Args: args})
	return true
}

// callObject reads a call written as a JSON object: {"name", "arguments"}
// (Qwen, Hermes), {"name", "parameters"} (Llama), either with
// "type": "function", or {"type": "function", "function": {…}}. A bare
// object must carry its arguments key, so that {"name": "Alice"} is not a
// call; in a tag the arguments may be left out (no arguments).
func callObject(raw string, tagged bool) (name string, args json.RawMessage, ok bool) {
	var v map[string]json.RawMessage
	if json.Unmarshal([]byte(raw), &v) != nil {
		return "", nil, false
	}
	if t, ok := v["type"]; ok && string(t) != `"function"` {
		return "", nil, false
	}
	if fn, ok := v["function"]; ok {
		for k := range v {
			if k != "type" && k != "function" && k != "id" {
				return "", nil, false
			}
		}
		return callObject(string(fn), tagged)
	}
	a, hasArgs := v["arguments"]
	p, hasParams := v["parameters"]
	for k := range v {
		switch k {
		case "name", "arguments", "parameters", "type", "id":
		default:
			return "", nil, false
		}
	}
	if json.Unmarshal(v["name"], &name) != nil || name == "" || (hasArgs && hasParams) {
		return "", nil, false
	}
	switch {
	case hasArgs:
		return name, a, true
	case hasParams:
		return name, p, true
	case tagged:
		return name, nil, true
	}
	return "", nil, false
}

// nameHow is how a tool name was matched to the catalog.
type nameHow int

const (
	byFull nameHow = iota // "server/tool"
	byFn                  // the provider function name, "server__tool"
	byBare                // the tool's own name, unique across servers
)

// resolve names the tool a model meant: its full name, its function name
// (also "server__tool" where the function name had to be hashed, and
// Harmony's and Kimi's "functions." prefix), or its own name when exactly
// one server has it. problem says why name is not one tool.
func (ts *Toolset) resolve(name string) (full string, how nameHow, problem string) {
	name = strings.TrimPrefix(strings.TrimSpace(name), "functions.")
	if _, ok := ts.byName[name]; ok {
		return name, byFull, ""
	}
	if f, ok := ts.names.full(name); ok {
		return f, byFn, ""
	}
	if server, tool, ok := strings.Cut(name, "__"); ok {
		if _, known := ts.byName[server+"/"+tool]; known {
			return server + "/" + tool, byFn, ""
		}
	}
	var matches []string
	for _, t := range ts.tools {
		if t.Name == name {
			matches = append(matches, t.FullName())
		}
	}
	sort.Strings(matches)
	switch len(matches) {
	case 1:
		return matches[0], byBare, ""
	case 0:
		return "", 0, fmt.Sprintf("there is no tool %q", name)
	}
	return "", 0, fmt.Sprintf("%q could be any of %s", name, strings.Join(matches, ", "))
}

// jsonObject is a top-level JSON object in a text and where it is.
type jsonObject struct {
	span
	raw string
}

// jsonObjectsAt returns each top-level JSON object that decodes from a '{'
// in s, in order, with its place.
func jsonObjectsAt(s string) []jsonObject {
	objs, _ := scanObjects(s)
	return objs
}

// scanObjects returns each top-level JSON object that decodes from a '{' in
// s, in order, and whether an object was left open at the end of s (a reply
// cut off in the middle of one).
func scanObjects(s string) (out []jsonObject, open bool) {
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '{')
		if j < 0 {
			break
		}
		start := i + j
		dec := json.NewDecoder(strings.NewReader(s[start:]))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			open = open || errors.Is(err, io.ErrUnexpectedEOF)
			i = start + 1
			continue
		}
		end := start + int(dec.InputOffset())
		out = append(out, jsonObject{span{start, end}, string(raw)})
		i = end
	}
	return out, open
}

// valueAt reads the JSON value (an object, or a list when list is set)
// that begins at s[i] after white space and an optional ```json fence
// line: its text and where it ends (after the closing fence, if any).
// ok is false when no whole value begins there.
func valueAt(s string, i int, list bool) (raw string, end int, ok bool) {
	j := i + len(s[i:]) - len(strings.TrimLeft(s[i:], " \t\r\n"))
	fenced := false
	if rest, found := strings.CutPrefix(s[j:], "```"); found {
		k := strings.IndexByte(rest, '\n')
		if k < 0 || strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(rest[:k], "json"), "JSON")) != "" {
			return "", 0, false
		}
		j += 3 + k + 1
		j += len(s[j:]) - len(strings.TrimLeft(s[j:], " \t\r\n"))
		fenced = true
	}
	if j >= len(s) || (s[j] != '{' && !(list && s[j] == '[')) {
		return "", 0, false
	}
	dec := json.NewDecoder(strings.NewReader(s[j:]))
	var v json.RawMessage
	if dec.Decode(&v) != nil {
		return "", 0, false
	}
	end = j + int(dec.InputOffset())
	if fenced {
		rest := s[end:]
		trimmed := strings.TrimLeft(rest, " \t\r\n")
		if !strings.HasPrefix(trimmed, "```") {
			return "", 0, false
		}
		end += len(rest) - len(trimmed) + 3
	}
	return string(v), end, true
}

// rawObjects are the JSON objects in s.
func rawObjects(s string) []string {
	var out []string
	for _, o := range jsonObjectsAt(s) {
		out = append(out, o.raw)
	}
	return out
}

var (
	// Leftovers once calls are cut out of a text: empty fences, the
	// templates' special tokens (<|…|> and DeepSeek's <｜…｜>), and the
	// families' tags, which mean nothing in a comment.
	emptyFence   = regexp.MustCompile("```[a-zA-Z]*\\s*```")
	markupTokens = regexp.MustCompile(`<\|[A-Za-z0-9_:.\-]{1,40}\|>|<｜[^｜<>\n]{1,40}｜>|` +
		`</?(?:tool_calls?|function|parameter|arg_key|arg_value|invoke|minimax:tool_call)(?:[= ][^<>\n]*)?>|` +
		`\[(?:TOOL_CALLS|/TOOL_CALLS|ARGS)\]|\[CALL_ID\][A-Za-z0-9]*|</s>`)
	// A call's opening markup left in a comment is a call that was not
	// recovered: the comment ends before it.
	callOpeners = regexp.MustCompile(`<tool_call>|<function=|<minimax:tool_call>|<invoke name=|\[TOOL_CALLS\]|` +
		`<\|tool_calls?_section_begin\|>|<\|tool_call_begin\|>|<\|python_tag\|>|<\|python_start\|>|<｜tool[▁_ \\]+calls?[▁_ \\]*(?:begin)?｜>`)
)

// cleanRest is text without the spans cut out (overlapping ones are
// merged), the calls' opening markup that was not cut and everything after
// it, empty fences and every family's tokens and tags: what the model wrote
// around its calls, fit to be posted.
func cleanRest(text string, cut []span) string {
	cut = slices.Clone(cut)
	sort.Slice(cut, func(i, j int) bool { return cut[i].start < cut[j].start })
	var b strings.Builder
	at := 0
	for _, c := range cut {
		if c.end <= at {
			continue
		}
		if c.start > at {
			b.WriteString(text[at:c.start])
		}
		at = c.end
	}
	b.WriteString(text[at:])
	rest := b.String()
	if loc := callOpeners.FindStringIndex(rest); loc != nil {
		rest = rest[:loc[0]]
	}
	rest = markupTokens.ReplaceAllString(rest, "")
	rest = emptyFence.ReplaceAllString(rest, "")
	rest = strings.TrimSpace(strings.Trim(strings.TrimSpace(rest), ";"))
	if !strings.ContainsFunc(rest, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return "" // fragments of markup (a lone ">"), not words
	}
	return rest
}

// blank reports whether s holds nothing a model says: white space, fences,
// tokens and tags only.
func blank(s string) bool {
	s = markupTokens.ReplaceAllString(s, "")
	return strings.Trim(s, " \t\r\n`;") == ""
}

// The kinds of hint a recovered reply gets (prompts/hint.tmpl).
const (
	hintText    = "text"    // calls written as text
	hintName    = "name"    // a tool named loosely
	hintObjects = "objects" // JSON objects beyond the first
)

// setHint gives r the one line that tells the model how to reply next
// time, and its kind (a run tells each kind once).
func (ts *Toolset) setHint(r *Reply, kind, name, full string, objects int) error {
	h, err := render("hint.tmpl", struct {
		Kind, Name, Full, Fn string
		Objects              int
		FunctionCalling      bool
	}{kind, name, full, ts.names.fn(full), objects, ts.native})
	r.Hint, r.hintKind = h, kind
	return err
}
