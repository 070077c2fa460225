package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
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
// beside them as their comment (and calls the text writes in tags);
// otherwise (in either mode: local models write JSON text even with native
// tools) the first JSON object in the text that is a usable command or end,
// trying every candidate, and failing that the tool calls the text writes
// in a model's own shape (shapes.go). A native call whose arguments are not
// an object is a *ReplyError.
func (ts *Toolset) Decode(msg llm.Message) (Reply, error) {
	r := Reply{Text: StripThink(msg.Content)}
	if ts.native && len(msg.ToolCalls) > 0 {
		return ts.decodeNative(r, msg.ToolCalls)
	}
	if r.Text == "" {
		r.Problem = "the reply was empty"
		return r, nil
	}
	got, ok, err := ts.decodeObjects(r.Text)
	if ok || err != nil {
		return got, err
	}
	r.Problem = got.Problem
	tc := ts.recoverCalls(r.Text, false)
	switch {
	case tc.problem != "":
		r.Problem = tc.problem
	case len(tc.calls) > 0:
		r.Calls, r.Comment = tc.calls, tc.rest
		r.Hint, err = ts.hint(hintText, "", tc.calls[0].Tool, 0)
	}
	return r, err
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
// writes in tags (a server that parsed the first of several leaves the
// others in the content).
func (ts *Toolset) decodeNative(r Reply, calls []llm.ToolCall) (Reply, error) {
	r.Comment = r.Text
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
	var err error
	if extra := ts.recoverCalls(r.Text, true); extra.problem == "" && len(extra.calls) > 0 {
		r.Calls = append(r.Calls, extra.calls...)
		r.Comment = extra.rest
		r.Hint, err = ts.hint(hintText, "", extra.calls[0].Tool, 0)
	} else if looseName != "" {
		r.Hint, err = ts.hint(hintName, looseName, loose.Tool, 0)
	}
	return r, err
}

// decodeObjects reads the first usable command or end among the JSON
// objects in text; ok is false when there is none (Problem says why).
func (ts *Toolset) decodeObjects(text string) (r Reply, ok bool, err error) {
	seen := map[string]bool{}
	var first *Reply
	usable := 0
	for _, obj := range JSONObjects(text) {
		if seen[obj] {
			continue
		}
		seen[obj] = true
		got, rerr := ts.decodeWire([]byte(obj))
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
		first.Hint, err = ts.hint(hintObjects, "", "", usable)
	}
	return *first, true, err
}

// JSONObjects returns the JSON objects in text, those inside ```json fences
// first, then every top-level object in order.
func JSONObjects(text string) []string {
	var out []string
	for _, m := range jsonFence.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return append(out, rawObjects(text)...)
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
			hint, err := ts.hint(hintName, tool, full, 0)
			if err != nil {
				return Reply{}, &ReplyError{err.Error()}
			}
			r.Hint = hint
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
