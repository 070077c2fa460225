package wire

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/coding-agent/coding-agent/internal/httpx"
)

// An event stream as OpenAI-compatible servers send a streamed chat
// completion: server-sent events whose data are chat.completion.chunk
// objects, ending with "data: [DONE]". Errors come as a data object with
// an "error", as an event named error, or (llama.cpp's server until late
// 2025) as a line of its own field "error:".

// chunk is one chat.completion.chunk, the parts of it read here.
type chunk struct {
	ID                string          `json:"id"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []chunkChoice   `json:"choices"`
	Usage             json.RawMessage `json:"usage"`
	Error             json.RawMessage `json:"error"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        *delta  `json:"delta"`
	Message      *delta  `json:"message"` // a server that sends whole messages in its chunks
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Content          *string     `json:"content"`
	ReasoningContent *string     `json:"reasoning_content"`
	Reasoning        *string     `json:"reasoning"`
	Refusal          *string     `json:"refusal"`
	ToolCalls        []callDelta `json:"tool_calls"`
}

type callDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// choice is one choice put together from its deltas.
type choice struct {
	index   int
	content strings.Builder
	// The reasoning trace under the field name the server used.
	reasoningContent, reasoning    strings.Builder
	refusal                        strings.Builder
	hasContent                     bool
	sawReasoningContent, sawReason bool
	calls                          []*call
	byIndex                        map[int]*call
	finish                         string
}

type call struct {
	id, typ, name string
	args          strings.Builder
}

// assemble reads an event stream: the chat.completion its chunks add up to,
// or the body of the error it carries (failed). Both are nil when body is
// not a stream of chunks (the retry layer then says it is not JSON); err
// says the stream was cut before its end, which is retried.
func assemble(body []byte) (whole, failed []byte, err error) {
	var (
		head    chunk
		usage   json.RawMessage
		choices = map[int]*choice{}
		ended   bool
		chunks  int
	)
	for ev := range events(body) {
		if ev.name == "error" || ev.err != "" {
			return nil, errorBody(cmp.Or(ev.err, ev.data)), nil
		}
		if ev.name != "" && ev.name != "message" {
			continue // a ping or a server's own event
		}
		data := strings.TrimSpace(ev.data)
		if data == "" {
			continue
		}
		if data == "[DONE]" {
			ended = true
			break
		}
		var c chunk
		if json.Unmarshal([]byte(data), &c) != nil {
			return nil, nil, nil
		}
		if filled(c.Error) {
			return nil, errorBody(data), nil
		}
		chunks++
		if head.ID == "" {
			head.ID, head.Created, head.Model, head.SystemFingerprint = c.ID, c.Created, c.Model, c.SystemFingerprint
		}
		if filled(c.Usage) {
			usage = c.Usage
		}
		for _, cc := range c.Choices {
			ch := choices[cc.Index]
			if ch == nil {
				ch = &choice{index: cc.Index, byIndex: map[int]*call{}}
				choices[cc.Index] = ch
			}
			d := cc.Delta
			if d == nil {
				d = cc.Message
			}
			if d != nil {
				ch.add(d)
			}
			if cc.FinishReason != nil && *cc.FinishReason != "" {
				ch.finish = *cc.FinishReason
				ended = true
			}
		}
	}
	switch {
	case chunks == 0:
		return nil, nil, nil
	case !ended:
		return nil, nil, httpx.ReadFailed(fmt.Errorf("the event stream ended before its last chunk: %w", io.ErrUnexpectedEOF))
	}
	out := map[string]any{
		"id": head.ID, "object": "chat.completion", "created": head.Created, "model": head.Model,
		"choices": completed(choices),
	}
	if head.SystemFingerprint != "" {
		out["system_fingerprint"] = head.SystemFingerprint
	}
	if usage != nil {
		out["usage"] = usage
	}
	whole, err = json.Marshal(out)
	return whole, nil, err
}

func (ch *choice) add(d *delta) {
	if d.Content != nil {
		ch.content.WriteString(*d.Content)
		ch.hasContent = true
	}
	if d.ReasoningContent != nil {
		ch.reasoningContent.WriteString(*d.ReasoningContent)
		ch.sawReasoningContent = true
	}
	if d.Reasoning != nil {
		ch.reasoning.WriteString(*d.Reasoning)
		ch.sawReason = true
	}
	if d.Refusal != nil {
		ch.refusal.WriteString(*d.Refusal)
	}
	for _, cd := range d.ToolCalls {
		c := ch.callFor(cd)
		if c.id == "" {
			c.id = cd.ID
		}
		if c.typ == "" {
			c.typ = cd.Type
		}
		// The name comes whole in one delta on most servers, repeated in
		// every delta on some, in pieces on a few.
		if n := cd.Function.Name; n != "" && n != c.name {
			c.name += n
		}
		c.args.WriteString(argumentsPiece(cd.Function.Arguments))
	}
}

// callFor is the call a delta continues: by its index, or without one the
// last call unless the delta's id names another.
func (ch *choice) callFor(cd callDelta) *call {
	if cd.Index != nil {
		c := ch.byIndex[*cd.Index]
		if c == nil {
			c = &call{}
			ch.byIndex[*cd.Index] = c
			ch.calls = append(ch.calls, c)
		}
		return c
	}
	if n := len(ch.calls); n > 0 && (cd.ID == "" || cd.ID == ch.calls[n-1].id) {
		return ch.calls[n-1]
	}
	c := &call{}
	ch.calls = append(ch.calls, c)
	return c
}

// argumentsPiece is a delta's piece of the arguments text: a JSON string
// (what the API sends), or an object some servers send whole.
func argumentsPiece(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// completed are the choices as a chat.completion has them, in index order.
func completed(choices map[int]*choice) []any {
	keys := make([]int, 0, len(choices))
	for k := range choices {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]any, 0, len(keys))
	for _, k := range keys {
		ch := choices[k]
		msg := map[string]any{"role": "assistant", "content": nil}
		if ch.hasContent || len(ch.calls) == 0 {
			msg["content"] = ch.content.String()
		}
		if ch.sawReasoningContent {
			msg["reasoning_content"] = ch.reasoningContent.String()
		}
		if ch.sawReason {
			msg["reasoning"] = ch.reasoning.String()
		}
		if ch.refusal.Len() > 0 {
			msg["refusal"] = ch.refusal.String()
		}
		if len(ch.calls) > 0 {
			calls := make([]any, 0, len(ch.calls))
			for _, c := range ch.calls {
				typ := c.typ
				if typ == "" {
					typ = "function"
				}
				calls = append(calls, map[string]any{"id": c.id, "type": typ,
					"function": map[string]any{"name": c.name, "arguments": c.args.String()}})
			}
			msg["tool_calls"] = calls
		}
		var finish any
		if ch.finish != "" {
			finish = ch.finish
		}
		out = append(out, map[string]any{"index": ch.index, "message": msg, "finish_reason": finish})
	}
	return out
}

// errorBody is an error event's payload as an error answer's body: as sent
// when it is an object with an "error", else wrapped as one.
func errorBody(payload string) []byte {
	payload = strings.TrimSpace(payload)
	var f map[string]json.RawMessage
	if json.Unmarshal([]byte(payload), &f) == nil && filled(f["error"]) {
		return []byte(payload)
	}
	var v any = payload
	if json.Valid([]byte(payload)) && payload != "" {
		v = json.RawMessage(payload)
	}
	b, _ := json.Marshal(map[string]any{"error": v}) // a string or valid JSON always marshals
	return b
}

// event is one server-sent event: its name, its data lines joined, and the
// value of a non-standard "error:" field.
type event struct{ name, data, err string }

// events yields the events of an event stream, the last one even when no
// blank line ends it.
func events(body []byte) func(func(event) bool) {
	return func(yield func(event) bool) {
		var ev event
		var lines []string
		pending := false
		flush := func() bool {
			if !pending {
				return true
			}
			ev.data = strings.Join(lines, "\n")
			ok := yield(ev)
			ev, lines, pending = event{}, nil, false
			return ok
		}
		for line := range strings.SplitSeq(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n") {
			line = strings.TrimSuffix(line, "\r")
			if line == "" {
				if !flush() {
					return
				}
				continue
			}
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "data":
				lines = append(lines, value)
				pending = true
			case "event":
				ev.name = value
				pending = true
			case "error":
				ev.err = value
				pending = true
			}
		}
		flush()
	}
}
