package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// Local models write tool calls in the shapes their chat templates taught
// them, and servers leave them in the content when their parser does not
// recognise them (shapes_test.go lists each shape with where it is
// documented). These functions recover the calls from such text; a call
// whose tool cannot be named exactly is not recovered.

var (
	// Qwen, Hermes and the Ollama templates built on them:
	// <tool_call>{"name": …, "arguments": …}</tool_call>, the closing tag
	// missing when the reply ends.
	toolCallTag = regexp.MustCompile(`(?s)<tool_call>(.*?)(?:</tool_call>|$)`)
	// Llama 3.1: <|python_tag|>{"name": …, "parameters": …}, several
	// separated by ";"; Llama 4: <|python_start|>…<|python_end|>.
	pythonTag = regexp.MustCompile(`(?s)<\|python_tag\|>(.*?)(?:<\|eom_id\|>|<\|eot_id\|>|$)|<\|python_start\|>(.*?)(?:<\|python_end\|>|$)`)
	// gpt-oss Harmony: … to=functions.NAME [<|constrain|>json]<|message|>{…}[<|call|>].
	harmonyCall  = regexp.MustCompile(`to=functions\.([A-Za-z0-9_.\-/]+)(?:[^<]|<\|(?:channel|constrain)\|>)*?<\|message\|>`)
	harmonyFinal = regexp.MustCompile(`(?s)<\|channel\|>final<\|message\|>(.*?)(?:<\|end\|>|<\|return\|>|$)`)
	// Leftovers once a call is cut out of the text: empty fences and the
	// templates' end tokens.
	emptyFence = regexp.MustCompile("```[a-zA-Z]*\\s*```")
	endTokens  = regexp.MustCompile(`<\|(?:eot_id|eom_id|im_end|end|call|return)\|>`)
)

// span is a part of a text: [start, end).
type span struct{ start, end int }

// textCalls are the tool calls written as text in a reply, and the text
// around them, or why the calls it found cannot be used.
type textCalls struct {
	calls   []ToolCall
	rest    string // the text without the calls: the step's comment
	problem string
}

// recoverCalls finds tool calls written as text: in tags (<tool_call>,
// <|python_tag|>, Harmony's to=functions.NAME), and, unless taggedOnly, as
// bare {"name", "arguments"|"parameters"} objects. Every call must name a
// tool exactly (resolve) or none is recovered.
func (ts *Toolset) recoverCalls(text string, taggedOnly bool) textCalls {
	if harmonyCall.MatchString(text) {
		return ts.harmonyCalls(text)
	}
	var out textCalls
	var cut []span
	add := func(raws []string, where string) bool {
		if len(raws) == 0 {
			out.problem = fmt.Sprintf(`the %s holds no {"name": ..., "arguments": {...}} object`, where)
			return false
		}
		for _, raw := range raws {
			name, args, ok := callObject(raw, true)
			if !ok {
				out.problem = fmt.Sprintf(`the %s holds no {"name": ..., "arguments": {...}} object`, where)
				return false
			}
			if !ts.addCall(&out, name, args) {
				return false
			}
		}
		return true
	}
	for _, m := range toolCallTag.FindAllStringSubmatchIndex(text, -1) {
		if !add(rawObjects(text[m[2]:m[3]]), "<tool_call> block") {
			return out
		}
		cut = append(cut, span{m[0], m[1]})
	}
	for _, m := range pythonTag.FindAllStringSubmatchIndex(text, -1) {
		inner := m[2:4]
		if inner[0] < 0 {
			inner = m[4:6]
		}
		if !add(rawObjects(text[inner[0]:inner[1]]), "<|python_tag|> call") {
			return out
		}
		cut = append(cut, span{m[0], m[1]})
	}
	if len(out.calls) == 0 && !taggedOnly {
		for _, o := range jsonObjectsAt(text) {
			name, args, ok := callObject(o.raw, false)
			if !ok {
				continue
			}
			if !ts.addCall(&out, name, args) {
				return out
			}
			cut = append(cut, o.span)
		}
	}
	out.rest = cleanRest(text, cut)
	return out
}

// harmonyCalls reads gpt-oss Harmony output: each to=functions.NAME header
// is followed by <|message|> and the arguments object; the comment is the
// final channel's text, if any.
func (ts *Toolset) harmonyCalls(text string) textCalls {
	var out textCalls
	for _, m := range harmonyCall.FindAllStringSubmatchIndex(text, -1) {
		name := text[m[2]:m[3]]
		objs := jsonObjectsAt(text[m[1]:])
		if len(objs) == 0 || strings.TrimSpace(text[m[1]:m[1]+objs[0].start]) != "" {
			out.problem = fmt.Sprintf("the call of %s has no JSON object of arguments after <|message|>", name)
			return out
		}
		if !ts.addCall(&out, name, json.RawMessage(objs[0].raw)) {
			return out
		}
	}
	if m := harmonyFinal.FindStringSubmatch(text); m != nil {
		out.rest = strings.TrimSpace(m[1])
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
// Harmony's "functions." prefix), or its own name when exactly one server
// has it. problem says why name is not one tool.
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

// rawObjects are the JSON objects in s.
func rawObjects(s string) []string {
	var out []string
	for _, o := range jsonObjectsAt(s) {
		out = append(out, o.raw)
	}
	return out
}

// cleanRest is text without the spans cut out (in order, not
// overlapping), empty fences and end tokens: what the model wrote around
// its calls.
func cleanRest(text string, cut []span) string {
	sort.Slice(cut, func(i, j int) bool { return cut[i].start < cut[j].start })
	var b strings.Builder
	at := 0
	for _, c := range cut {
		if c.start < at {
			continue
		}
		b.WriteString(text[at:c.start])
		at = c.end
	}
	b.WriteString(text[at:])
	rest := emptyFence.ReplaceAllString(b.String(), "")
	rest = endTokens.ReplaceAllString(rest, "")
	return strings.TrimSpace(strings.Trim(strings.TrimSpace(rest), ";"))
}

// The kinds of hint a recovered reply gets (prompts/hint.tmpl).
const (
	hintText    = "text"    // calls written as text
	hintName    = "name"    // a tool named loosely
	hintObjects = "objects" // JSON objects beyond the first
)

// hint renders the one line that tells the model how to reply next time.
func (ts *Toolset) hint(kind, name, full string, objects int) (string, error) {
	return render("hint.tmpl", struct {
		Kind, Name, Full, Fn string
		Objects              int
		FunctionCalling      bool
	}{kind, name, full, ts.names.fn(full), objects, ts.native})
}
