package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/coding-agent/coding-agent/internal/llm"
)

// Action is what one model reply asks for: tool calls, or the end of the task.
type Action struct {
	Comment string     `json:"comment,omitempty"`
	Calls   []ToolCall `json:"calls,omitempty"`
	Done    bool       `json:"done,omitempty"`
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

// parseText reads a JSON-protocol reply from free text: the object may stand
// alone, inside a ```json fence, or among prose.
func parseText(text string) (Action, error) {
	text = StripThink(text)
	if text == "" {
		return Action{}, &ReplyError{"the reply was empty"}
	}
	candidates := JSONObjects(text)
	if len(candidates) == 0 {
		return Action{}, &ReplyError{"the reply contained no JSON object"}
	}
	var firstErr error
	for _, c := range candidates {
		a, err := decodeReply([]byte(c))
		if err == nil {
			return a, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return Action{}, firstErr
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

func decodeReply(b []byte) (Action, error) {
	var w wireReply
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&w); err != nil {
		return Action{}, &ReplyError{fmt.Sprintf("the JSON object could not be read: %v", err)}
	}
	var a Action
	if w.Comment != nil {
		a.Comment = *w.Comment
	}
	switch {
	case w.Command != nil && w.Done != nil && *w.Done:
		return Action{}, &ReplyError{`the reply has both "command" and "done": true; send one of them`}
	case w.Command != nil:
		if w.Command.Tool == "" {
			return Action{}, &ReplyError{`"command.tool" is missing; name the tool as "server/tool"`}
		}
		if !strings.Contains(w.Command.Tool, "/") {
			return Action{}, &ReplyError{fmt.Sprintf(`"command.tool" is %q; name the tool as "server/tool"`, w.Command.Tool)}
		}
		args, err := normaliseArgs(w.Command.Args)
		if err != nil {
			return Action{}, err
		}
		if a.Comment == "" {
			a.Comment = w.Command.Comment
		}
		a.Calls = []ToolCall{{Tool: w.Command.Tool, Args: args}}
		return a, nil
	case w.Done != nil && *w.Done:
		a.Done = true
		return a, nil
	case w.Done != nil:
		return Action{}, &ReplyError{`"done" is false but there is no "command"; send a command or {"done": true, ...}`}
	default:
		return Action{}, &ReplyError{`the JSON object has neither "command" nor "done"`}
	}
}

// normaliseArgs accepts an object (or nothing, meaning {}); a string holding
// an object is unwrapped, as some models double-encode.
func normaliseArgs(raw json.RawMessage) (json.RawMessage, error) {
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

// parseNative reads a reply in native tool-call mode: tool calls, with the
// text beside them as the step's comment; or text holding the done object
// (a JSON command in the text is accepted too, as local models send it).
func parseNative(msg llm.Message, names *toolNames) (Action, error) {
	text := StripThink(msg.Content)
	if len(msg.ToolCalls) == 0 {
		return parseText(text)
	}
	a := Action{Comment: text}
	for _, tc := range msg.ToolCalls {
		full, ok := names.full(tc.Name)
		if !ok {
			full = tc.Name // the host answers "unknown tool" to the model
		}
		args, err := normaliseArgs(tc.Arguments)
		if err != nil { // always a *ReplyError: name the call it is about
			return Action{}, &ReplyError{fmt.Sprintf("the arguments of %s are not a JSON object", tc.Name)}
		}
		a.Calls = append(a.Calls, ToolCall{ID: tc.ID, Tool: full, Args: args})
	}
	return a, nil
}
