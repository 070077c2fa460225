package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/llm"
)

// Streamed answers Reply as a stream whatever the request asked for, as
// some servers do (a server wrapping every answer in a stream, a proxy
// that forces one): on the OpenAI wire server-sent events of
// chat.completion.chunk objects (the reasoning and the content in pieces,
// each tool call's id and name and then its arguments in pieces by index,
// the finish reason, the usage in a chunk of its own when the Reply has
// some) ending with "data: [DONE]"; on Ollama's, JSON lines (the thinking
// and the content in pieces, the calls, the closing chunk with the counts).
type Streamed struct {
	Reply Reply
	// ContentType replaces the one sent (text/event-stream on the OpenAI
	// wire, application/x-ndjson on Ollama's).
	ContentType string
	// Cut ends the stream before its end: no finish reason, no [DONE], no
	// closing chunk.
	Cut bool
}

func (Streamed) isStep() {}

// piece is how many bytes of a text go in one chunk.
const piece = 7

// pieces cuts s into chunks of about piece bytes, on rune boundaries.
func pieces(s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(piece, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func (openaiWire) stream(w http.ResponseWriter, rec Received, st Streamed) error {
	r := st.Reply
	id := fmt.Sprintf("chatcmpl-llmtest-%d", rec.N)
	var chunks []any
	add := func(delta map[string]any, finish any) {
		chunks = append(chunks, map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": rec.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		})
	}
	add(map[string]any{"role": "assistant", "content": ""}, nil)
	field := r.ReasoningField
	if field == "" {
		field = "reasoning_content"
	}
	for _, p := range pieces(r.Reasoning) {
		add(map[string]any{field: p}, nil)
	}
	for _, p := range pieces(r.Content) {
		add(map[string]any{"content": p}, nil)
	}
	for i, c := range r.ToolCalls {
		args, err := argsJSON(c.Args)
		if err != nil {
			return err
		}
		first := map[string]any{"index": i, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}
		if id := callID(rec, c, i); id != "" {
			first["id"] = id
		}
		add(map[string]any{"tool_calls": []any{first}}, nil)
		for _, p := range pieces(string(args)) {
			add(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": p}}}}, nil)
		}
	}
	if !st.Cut {
		add(map[string]any{}, finishReason(r))
		if r.Usage != (Usage{}) {
			chunks = append(chunks, map[string]any{
				"id": id, "object": "chat.completion.chunk", "created": created, "model": rec.Model, "choices": []any{},
				"usage": map[string]int{"prompt_tokens": r.Usage.In, "completion_tokens": r.Usage.Out, "total_tokens": r.Usage.In + r.Usage.Out},
			})
		}
	}
	contentType := st.ContentType
	if contentType == "" {
		contentType = "text/event-stream"
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	for _, c := range chunks {
		b, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("encoding a stream chunk: %w", err)
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return fmt.Errorf("writing a stream chunk: %w", err)
		}
		flush(w)
	}
	if !st.Cut {
		_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	}
	return nil
}

func (ollamaWire) stream(w http.ResponseWriter, rec Received, st Streamed) error {
	r := st.Reply
	var chunks []any
	add := func(msg olMessage) {
		chunks = append(chunks, map[string]any{"model": rec.Model, "created_at": createdAt, "message": msg, "done": false})
	}
	for _, p := range pieces(r.Reasoning) {
		add(olMessage{Role: llm.Assistant, Thinking: p})
	}
	for _, p := range pieces(r.Content) {
		add(olMessage{Role: llm.Assistant, Content: p})
	}
	if len(r.ToolCalls) > 0 {
		calls, err := olToolCalls(r.ToolCalls)
		if err != nil {
			return err
		}
		add(olMessage{Role: llm.Assistant, ToolCalls: calls})
	}
	if !st.Cut {
		reason := "stop"
		if r.FinishReason != "" {
			reason = r.FinishReason
		}
		chunks = append(chunks, map[string]any{
			"model": rec.Model, "created_at": createdAt, "message": olMessage{Role: llm.Assistant},
			"done": true, "done_reason": reason,
			"total_duration": 1000, "prompt_eval_count": r.Usage.In, "eval_count": r.Usage.Out,
		})
	}
	contentType := st.ContentType
	if contentType == "" {
		contentType = "application/x-ndjson"
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w) // one object per line
	for _, c := range chunks {
		if err := enc.Encode(c); err != nil {
			return fmt.Errorf("writing a stream chunk: %w", err)
		}
		flush(w)
	}
	return nil
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// mistralID is the tool call id Mistral's tokenizer takes.
var mistralID = regexp.MustCompile(`^[a-zA-Z0-9]{9}$`)

// mistralIDs is mistral_common's refusal of the first tool call id of the
// conversation that is not nine letters and digits, "" when all are.
func mistralIDs(msgs []llm.Message) string {
	for _, m := range msgs {
		ids := []string{}
		for _, c := range m.ToolCalls {
			ids = append(ids, c.ID)
		}
		if m.Role == llm.ToolRole {
			ids = append(ids, m.ToolCallID)
		}
		for _, id := range ids {
			if !mistralID.MatchString(id) {
				return fmt.Sprintf("Tool call id was %s but must be a-z, A-Z, 0-9, with a length of 9.", id)
			}
		}
	}
	return ""
}

// vllmError is vLLM's error answer.
func vllmError(msg string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": "BadRequestError", "param": nil, "code": http.StatusBadRequest,
	}})
	return string(b)
}
