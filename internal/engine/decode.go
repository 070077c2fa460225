package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/coding-agent/coding-agent/internal/llm"
)

// Reply is a model reply as the engine reads it for every policy: the text
// without reasoning blocks, and the tool calls or the end of the task it
// asks for. A policy reads its own objects (planning's phase replies) from
// Text.
type Reply struct {
	Text    string
	Comment string     // the comment that goes with Calls or Done
	Calls   []ToolCall // native calls, a JSON "command", or calls written as text
	Done    bool       // {"done": true, ...} in the text
	// Problem is why neither calls nor the end could be read ("" when
	// they could): what a policy that wants one tells the model.
	Problem string
	// Hint is one line for the model's next message when the reply was
	// understood but not written as asked (a call written as text, a tool
	// named loosely, objects beyond the first): how to reply next time. It
	// is not a correction: the reply counts as usable.
	Hint string
	// Cut is set when the reply was cut off at the output token limit
	// before anything usable was whole in it (DecodeResponse's *ReplyError
	// says how): the run raises the limit once.
	Cut bool
	// Said is, when the content held nothing usable and the reply was read
	// from the reasoning field, the part of the reasoning it was read from:
	// the JSON object or the calls' markup the reasoning ends with. The
	// conversation keeps it as what the model said; the rest of the
	// reasoning is never kept, sent back or posted.
	Said string
	// hintKind is Hint's kind (hintText, hintName, hintObjects): a run
	// tells the model each kind once.
	hintKind string
}

var (
	thinkBlock = regexp.MustCompile(`(?s)<think>.*?</think>`)
	jsonFence  = regexp.MustCompile("(?s)```(?:json|JSON)?\\s*\\n?(\\{.*?\\})\\s*```")
)

// StripThink removes <think>…</think> reasoning blocks, including a reply
// whose opening tag was part of the prompt template (only "</think>" shows),
// and an unterminated block at the end.
func StripThink(s string) string {
	s = thinkBlock.ReplaceAllString(s, "")
	if i := strings.Index(s, "</think>"); i >= 0 {
		s = s[i+len("</think>"):]
	}
	if i := strings.Index(s, "<think>"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// Decode reads a reply: with native tool calls, its calls and the text
// beside them as their comment (and calls the text writes in markup);
// otherwise (in either mode: local models write JSON text even with native
// tools) the first JSON object in the text that is a usable command or end,
// trying every candidate, and failing that the tool calls the text writes
// in a model's own markup (shapes.go). When the content holds nothing
// usable, the reply may be in the reasoning field (decodeReasoning). A
// native call whose arguments are not an object is a *ReplyError.
func (ts *Toolset) Decode(msg llm.Message) (Reply, error) {
	r := Reply{Text: StripThink(msg.Content)}
	if ts.native && len(msg.ToolCalls) > 0 {
		return ts.decodeNative(r, msg.ToolCalls)
	}
	if r.Text == "" {
		return ts.decodeReasoning(msg.Reasoning)
	}
	r, err := ts.decodeText(r)
	if err != nil || len(r.Calls) > 0 || r.Done {
		return r, err
	}
	// A server whose reasoning parser swallowed the call leaves it at the
	// end of the reasoning, and the content without a reply.
	text := reasoningText(msg.Reasoning)
	if group := trailing(text, wholeMarkup(text)); len(group) > 0 {
		if tc := ts.resolveMarkup(group); len(tc.calls) > 0 {
			r = Reply{Text: r.Text, Calls: tc.calls, Said: text[group[0].start:group[len(group)-1].end]}
			err = ts.setHint(&r, hintText, "", tc.calls[0].Tool, 0)
		}
	}
	return r, err
}

// decodeText reads a reply's text: a usable command or end among its JSON
// objects (those inside XML-style markup are parameter values, not
// replies), or the calls it writes in markup.
func (ts *Toolset) decodeText(r Reply) (Reply, error) {
	ms := findMarkup(r.Text)
	got, ok, err := ts.decodeObjects(r.Text, ms)
	if ok || err != nil {
		return got, err
	}
	r.Problem = got.Problem
	tc := ts.recoverFrom(r.Text, ms, false)
	switch {
	case tc.problem != "":
		r.Problem = tc.problem
	case len(tc.calls) > 0:
		r.Calls, r.Comment = tc.calls, tc.rest
		err = ts.setHint(&r, hintText, "", tc.calls[0].Tool, 0)
	}
	return r, err
}

// decodeReasoning reads a reply whose content is empty from what its
// reasoning field ends with, as servers whose reasoning parser took the
// whole answer leave it (content null): calls in any family's markup, a
// reasoning that is nothing but calls (a pythonic list, bare call
// objects), or a JSON object (a command or the end; or a policy's own
// object, in Text). A reasoning of prose
// only is an empty reply. Nothing of the reasoning becomes a comment but
// a JSON object's own "comment".
func (ts *Toolset) decodeReasoning(reasoning string) (Reply, error) {
	empty := Reply{Problem: "the reply was empty"}
	text := reasoningText(reasoning)
	if text == "" {
		return empty, nil
	}
	ms := findMarkup(text)
	if group := trailing(text, wholeMarkup(text)); len(group) > 0 {
		tc := ts.resolveMarkup(group)
		if tc.problem != "" {
			return Reply{Problem: tc.problem}, nil
		}
		r := Reply{Calls: tc.calls, Said: text[group[0].start:group[len(group)-1].end]}
		return r, ts.setHint(&r, hintText, "", tc.calls[0].Tool, 0)
	}
	if tc := ts.recoverFrom(text, ms, false); len(ms) == 0 && len(tc.calls) > 0 && tc.rest == "" {
		// A reasoning that is nothing but calls: a pythonic list, or bare
		// call objects.
		r := Reply{Calls: tc.calls, Said: text}
		return r, ts.setHint(&r, hintText, "", tc.calls[0].Tool, 0)
	}
	if objs := jsonObjectsAt(text); len(objs) > 0 {
		last := objs[len(objs)-1]
		if blank(text[last.end:]) && !insideOpaque(last.span, ms) {
			got, rerr := ts.decodeWire([]byte(last.raw))
			if rerr == nil {
				got.Text, got.Said = last.raw, last.raw
				return got, nil
			}
			if name, args, ok := callObject(last.raw, false); ok {
				r := Reply{Said: last.raw}
				tc := textCalls{}
				if !ts.addCall(&tc, name, args) {
					return Reply{Problem: tc.problem}, nil
				}
				r.Calls = tc.calls
				return r, ts.setHint(&r, hintText, "", tc.calls[0].Tool, 0)
			}
			return Reply{Text: last.raw, Said: last.raw, Problem: rerr.Reason}, nil
		}
	}
	return empty, nil
}

// reasoningText is a reasoning field without the think tags some servers
// leave in it.
func reasoningText(reasoning string) string {
	r := strings.ReplaceAll(strings.ReplaceAll(reasoning, "<think>", ""), "</think>", "")
	return strings.TrimSpace(r)
}

// trailing are the markups text ends with: the last one, and each before
// it with nothing said between them.
func trailing(text string, ms []markup) []markup {
	end, k := len(text), len(ms)
	for k > 0 && blank(text[ms[k-1].end:end]) {
		k--
		end = ms[k].start
	}
	return ms[k:]
}

// insideOpaque reports whether s lies inside markup whose content is text
// (XML-style parameter values), where a JSON object is a value, not a
// reply.
func insideOpaque(s span, ms []markup) bool {
	for _, m := range ms {
		if m.opaque && s.start >= m.start && s.end <= m.end {
			return true
		}
	}
	return false
}

// DecodeResponse decodes resp's message. A reply cut at the token limit
// (finish reason length) before anything usable was whole in it is a
// *ReplyError that says so, with Reply.Cut set: a native call whose
// arguments were cut, a JSON object cut in the middle, or an empty reply
// whose budget went to reasoning.
func (ts *Toolset) DecodeResponse(resp llm.Response) (Reply, error) {
	r, err := ts.Decode(resp.Message)
	if resp.FinishReason != llm.FinishLength {
		return r, err
	}
	if name := ts.cutCall(resp.Message.ToolCalls); name != "" && errors.As(err, new(*ReplyError)) {
		return Reply{Cut: true}, &ReplyError{fmt.Sprintf("your call of %s was cut off at the output token limit "+
			"in the middle of its arguments, so it was not run", name)}
	}
	if err != nil || len(r.Calls) > 0 || r.Done || (len(JSONObjects(r.Text)) > 0 && !endsInObject(r.Text)) {
		return r, err
	}
	if endsInObject(r.Text) {
		return Reply{Cut: true}, &ReplyError{"the reply was cut off at the output token limit in the middle of a JSON object, " +
			"so nothing in it could be used"}
	}
	return Reply{Cut: true}, &ReplyError{"the reply was cut off at the output token limit before anything usable was written; " +
		"think less and answer shorter"}
}

// cutCall is the name of the first native call whose arguments are not a
// JSON object, "" when there is none.
func (ts *Toolset) cutCall(calls []llm.ToolCall) string {
	if !ts.native {
		return ""
	}
	for _, tc := range calls {
		if _, bad := normaliseArgs(tc.Arguments); bad != nil {
			return tc.Name
		}
	}
	return ""
}

// decodeNative reads native tool calls, and calls the text beside them
// writes in markup (a server that parsed the first of several leaves the
// others in the content; one that echoes the parsed call there adds
// nothing). The comment is the text without any markup: a server that
// parsed the call may leave its closing tag or end tokens behind.
func (ts *Toolset) decodeNative(r Reply, calls []llm.ToolCall) (Reply, error) {
	var loose ToolCall
	var looseName string
	for _, tc := range calls {
		full, how, problem := ts.resolve(tc.Name)
		if problem != "" {
			full = tc.Name // the host answers "unknown tool" to the model
		}
		args, err := normaliseArgs(tc.Arguments)
		if err != nil {
			return Reply{}, &ReplyError{fmt.Sprintf("the arguments of %s are not a JSON object", tc.Name)}
		}
		call := ToolCall{ID: tc.ID, Tool: full, Args: args}
		if problem == "" && how != byFn && looseName == "" {
			loose, looseName = call, tc.Name
		}
		r.Calls = append(r.Calls, call)
	}
	extra := ts.recoverCalls(r.Text, true)
	r.Comment = extra.rest
	native := len(r.Calls)
	if extra.problem == "" {
		for _, c := range extra.calls {
			if !slices.ContainsFunc(r.Calls[:native], func(n ToolCall) bool { return n.Key() == c.Key() }) {
				r.Calls = append(r.Calls, c)
			}
		}
	}
	switch {
	case len(r.Calls) > native:
		return r, ts.setHint(&r, hintText, "", r.Calls[native].Tool, 0)
	case looseName != "":
		return r, ts.setHint(&r, hintName, looseName, loose.Tool, 0)
	}
	return r, nil
}

// decodeObjects reads the first usable command or end among the JSON
// objects in text (not those inside ms's XML-style markup); ok is false
// when there is none (Problem says why).
func (ts *Toolset) decodeObjects(text string, ms []markup) (r Reply, ok bool, err error) {
	seen := map[string]bool{}
	var first *Reply
	usable := 0
	for _, obj := range objectsIn(text) {
		if seen[obj.raw] || insideOpaque(obj.span, ms) {
			continue
		}
		seen[obj.raw] = true
		got, rerr := ts.decodeWire([]byte(obj.raw))
		if rerr != nil {
			if r.Problem == "" {
				r.Problem = rerr.Reason
			}
			continue
		}
		usable++
		if first == nil {
			got.Text = text
			first = &got
		}
	}
	switch {
	case first == nil:
		if len(seen) == 0 {
			r.Problem = "the reply contained no JSON object"
		}
		return r, false, nil
	case usable > 1 && first.Hint == "":
		err = ts.setHint(first, hintObjects, "", "", usable)
	}
	return *first, true, err
}

// JSONObjects returns the JSON objects in text, those inside ```json fences
// first, then every top-level object in order.
func JSONObjects(text string) []string {
	var out []string
	for _, o := range objectsIn(text) {
		out = append(out, o.raw)
	}
	return out
}

// objectsIn are JSONObjects with their places.
func objectsIn(text string) []jsonObject {
	var out []jsonObject
	for _, m := range jsonFence.FindAllStringSubmatchIndex(text, -1) {
		out = append(out, jsonObject{span{m[2], m[3]}, text[m[2]:m[3]]})
	}
	return append(out, jsonObjectsAt(text)...)
}

// endsInObject reports whether s ends inside a JSON object that was never
// closed.
func endsInObject(s string) bool {
	_, open := scanObjects(s)
	return open
}

// wireReply is the JSON protocol: {"comment", "command": {"tool", "args",
// "comment"}} or {"done": true, "comment"}.
type wireReply struct {
	Comment *string `json:"comment"`
	Command *struct {
		Tool    string          `json:"tool"`
		Args    json.RawMessage `json:"args"`
		Comment string          `json:"comment"`
	} `json:"command"`
	Done *bool `json:"done"`
}

func (ts *Toolset) decodeWire(b []byte) (Reply, *ReplyError) {
	var w wireReply
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&w); err != nil {
		return Reply{}, &ReplyError{fmt.Sprintf("the JSON object could not be read: %v", err)}
	}
	var r Reply
	if w.Comment != nil {
		r.Comment = *w.Comment
	}
	switch {
	case w.Command != nil && w.Done != nil && *w.Done:
		return Reply{}, &ReplyError{`the reply has both "command" and "done": true; send one of them`}
	case w.Command != nil:
		tool := w.Command.Tool
		if tool == "" {
			return Reply{}, &ReplyError{`"command.tool" is missing; name the tool as "server/tool"`}
		}
		full, how, problem := ts.resolve(tool)
		switch {
		case problem == "" && how != byFull:
			// A loose name for one tool: taken, with a hint.
			if err := ts.setHint(&r, hintName, tool, full, 0); err != nil {
				return Reply{}, &ReplyError{err.Error()}
			}
		case problem != "" && strings.Contains(tool, "/"):
			full = tool // the host answers "unknown tool" to the model
		case problem != "":
			return Reply{}, &ReplyError{fmt.Sprintf(`"command.tool" is %q (%s); name the tool as "server/tool"`, tool, problem)}
		}
		args, err := normaliseArgs(w.Command.Args)
		if err != nil {
			return Reply{}, err
		}
		if r.Comment == "" {
			r.Comment = w.Command.Comment
		}
		r.Calls = []ToolCall{{Tool: full, Args: args}}
		return r, nil
	case w.Done != nil && *w.Done:
		r.Done = true
		return r, nil
	case w.Done != nil:
		return Reply{}, &ReplyError{`"done" is false but there is no "command"; send a command or {"done": true, ...}`}
	default:
		return Reply{}, &ReplyError{`the JSON object has neither "command" nor "done"`}
	}
}

// normaliseArgs accepts an object (or nothing, meaning {}); a string holding
// an object is unwrapped, as some models double-encode.
func normaliseArgs(raw json.RawMessage) (json.RawMessage, *ReplyError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return json.RawMessage(`{}`), nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			raw = json.RawMessage(strings.TrimSpace(s))
		}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, &ReplyError{`"args" must be a JSON object`}
	}
	return raw, nil
}
