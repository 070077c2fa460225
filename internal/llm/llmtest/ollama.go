package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/coding-agent/coding-agent/internal/llm"
)

type ollamaWire struct{}

type olRequest struct {
	Model    string          `json:"model"`
	Messages []olMessage     `json:"messages"`
	Tools    []oaTool        `json:"tools"` // same shape as OpenAI's
	Stream   *bool           `json:"stream"`
	Options  map[string]any  `json:"options"`
	Format   json.RawMessage `json:"format"`
}

type olMessage struct {
	Role       string       `json:"role"`
	Content    string       `json:"content"`
	Thinking   string       `json:"thinking,omitempty"`
	ToolCalls  []olToolCall `json:"tool_calls,omitempty"`
	ToolName   string       `json:"tool_name,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type olToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

func (ollamaWire) name() string { return WireOllama }

func (ollamaWire) decode(body []byte, rec *Received) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return fmt.Errorf("body is not a JSON object: %w", err)
	}
	var req olRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("decoding body: %w", err)
	}
	if req.Model == "" {
		return errors.New("model is missing")
	}
	rec.Model = req.Model
	rec.Stream = req.Stream == nil || *req.Stream
	if f := bytes.TrimSpace(req.Format); len(f) > 0 && f[0] == '{' {
		if _, err := resolve(f); err != nil {
			return fmt.Errorf("format: %w", err)
		}
		rec.Format = req.Format
	}
	rec.Options = req.Options
	if n, ok := req.Options["num_predict"].(float64); ok {
		rec.MaxTokens = int(n)
	}
	if _, ok := fields["tools"]; ok {
		rec.ToolNames = []string{}
	}
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return fmt.Errorf("tools[%d]: type function and a name are required", i)
		}
		rec.ToolNames = append(rec.ToolNames, t.Function.Name)
		rec.Tools = append(rec.Tools, llm.Tool{
			Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters,
		})
	}
	for i, m := range req.Messages {
		msg := llm.Message{Role: m.Role, Content: m.Content, Name: m.ToolName, ToolCallID: m.ToolCallID}
		switch m.Role {
		case llm.System, llm.User, llm.Assistant, llm.ToolRole:
		default:
			return fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
		for j, tc := range m.ToolCalls {
			args := tc.Function.Arguments
			if len(args) == 0 || args[0] != '{' {
				return fmt.Errorf("messages[%d].tool_calls[%d]: arguments must be an object, got %s", i, j, args)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, args); err != nil {
				return fmt.Errorf("messages[%d].tool_calls[%d]: %w", i, j, err)
			}
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{
				ID: tc.ID, Name: tc.Function.Name, Arguments: compact.Bytes(),
			})
		}
		rec.Messages = append(rec.Messages, msg)
	}
	if len(rec.Messages) == 0 {
		return errors.New("messages is empty")
	}
	return nil
}

func (ollamaWire) reply(w http.ResponseWriter, rec Received, r Reply) error {
	calls, err := olToolCalls(r.ToolCalls)
	if err != nil {
		return err
	}
	msg := olMessage{Role: llm.Assistant, Content: r.Content, Thinking: r.Reasoning, ToolCalls: calls}
	reason := "stop"
	if r.FinishReason != "" {
		reason = r.FinishReason
	}
	final := map[string]any{
		"model": rec.Model, "created_at": createdAt, "message": msg,
		"done": true, "done_reason": reason,
		"total_duration": 1000, "prompt_eval_count": r.Usage.In, "eval_count": r.Usage.Out,
	}
	if !rec.Stream {
		writeJSON(w, http.StatusOK, final)
		return nil
	}
	// Streaming: the message in one chunk, then the closing chunk with
	// the counts, as NDJSON.
	first := map[string]any{"model": rec.Model, "created_at": createdAt, "message": msg, "done": false}
	final["message"] = olMessage{Role: llm.Assistant}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w) // one object per line
	for _, chunk := range []any{first, final} {
		if err := enc.Encode(chunk); err != nil {
			return fmt.Errorf("writing stream chunk: %w", err)
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	return nil
}

func (ollamaWire) empty(w http.ResponseWriter, _ Received) {
	writeRaw(w, http.StatusOK, "")
}

func (ollamaWire) errorBody(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}

func (ollamaWire) garbage() string {
	return `{"model": "test-model", "message": {"role": "assist`
}

// olToolCalls are a Reply's calls as Ollama sends them.
func olToolCalls(calls []Call) ([]olToolCall, error) {
	var out []olToolCall
	for i, c := range calls {
		args, err := argsJSON(c.Args)
		if err != nil {
			return nil, err
		}
		var tc olToolCall
		tc.ID = c.ID
		tc.Function.Index = i
		tc.Function.Name = c.Name
		tc.Function.Arguments = args
		out = append(out, tc)
	}
	return out, nil
}
