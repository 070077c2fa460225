package engine

import (
	"bytes"
	"encoding/json"
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
	Calls   []ToolCall // native calls, or a JSON "command" in the text
	Done    bool       // {"done": true, ...} in the text
	// Problem is why neither calls nor the end could be read ("" when
	// they could): what a policy that wants one tells the model.
	Problem string
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
// beside them as their comment; otherwise (in either mode: local models
// write JSON text even with native tools) the first JSON object in the text
// that is a usable command or end, trying every candidate. A native call
// whose arguments are not an object is a *ReplyError.
func (ts *Toolset) Decode(msg llm.Message) (Reply, error) {
	r := Reply{Text: StripThink(msg.Content)}
	if ts.native && len(msg.ToolCalls) > 0 {
		r.Comment = r.Text
		for _, tc := range msg.ToolCalls {
			full, ok := ts.names.full(tc.Name)
			if !ok {
				full = tc.Name // the host answers "unknown tool" to the model
			}
			args, err := normaliseArgs(tc.Arguments)
			if err != nil {
				return Reply{}, &ReplyError{fmt.Sprintf("the arguments of %s are not a JSON object", tc.Name)}
			}
			r.Calls = append(r.Calls, ToolCall{ID: tc.ID, Tool: full, Args: args})
		}
		return r, nil
	}
	if r.Text == "" {
		r.Problem = "the reply was empty"
		return r, nil
	}
	objs := JSONObjects(r.Text)
	if len(objs) == 0 {
		r.Problem = "the reply contained no JSON object"
	}
	for _, obj := range objs {
		got, err := decodeWire([]byte(obj))
		if err != nil {
			if r.Problem == "" {
				r.Problem = err.Reason
			}
			continue
		}
		got.Text = r.Text
		return got, nil
	}
	return r, nil
}

// JSONObjects returns the JSON objects in text, those inside ```json fences
// first, then every top-level object in order.
func JSONObjects(text string) []string {
	var out []string
	for _, m := range jsonFence.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return append(out, objectsIn(text)...)
}

// objectsIn returns each top-level JSON object that decodes from a '{' in s,
// in order.
func objectsIn(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '{')
		if j < 0 {
			break
		}
		start := i + j
		dec := json.NewDecoder(strings.NewReader(s[start:]))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			i = start + 1
			continue
		}
		out = append(out, string(raw))
		i = start + int(dec.InputOffset())
	}
	return out
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

func decodeWire(b []byte) (Reply, *ReplyError) {
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
		if w.Command.Tool == "" {
			return Reply{}, &ReplyError{`"command.tool" is missing; name the tool as "server/tool"`}
		}
		if !strings.Contains(w.Command.Tool, "/") {
			return Reply{}, &ReplyError{fmt.Sprintf(`"command.tool" is %q; name the tool as "server/tool"`, w.Command.Tool)}
		}
		args, err := normaliseArgs(w.Command.Args)
		if err != nil {
			return Reply{}, err
		}
		if r.Comment == "" {
			r.Comment = w.Command.Comment
		}
		r.Calls = []ToolCall{{Tool: w.Command.Tool, Args: args}}
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
