package llmtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/coding-agent/coding-agent/internal/llm"
)

// Fixed timestamps keep answers deterministic.
const (
	created   = 1700000000
	createdAt = "2023-11-14T22:13:20Z"
)

// toolName is what OpenAI accepts as a function name.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

type openaiWire struct{}

type oaRequest struct {
	Model               string      `json:"model"`
	Messages            []oaMessage `json:"messages"`
	Tools               []oaTool    `json:"tools"`
	MaxTokens           *int        `json:"max_tokens"`
	MaxCompletionTokens *int        `json:"max_completion_tokens"`
	Stream              bool        `json:"stream"`
	ResponseFormat      *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []oaToolCall    `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Name       string          `json:"name,omitempty"`
	Refusal    *string         `json:"refusal,omitempty"`
}

type oaToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

func (openaiWire) name() string { return WireOpenAI }

func (openaiWire) decode(body []byte, rec *Received) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return fmt.Errorf("body is not a JSON object: %w", err)
	}
	var req oaRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("decoding body: %w", err)
	}
	if req.Model == "" {
		return errors.New("model is missing")
	}
	if req.Stream {
		return errors.New("streaming is not supported by llmtest")
	}
	rec.Model = req.Model
	if err := oaConstraints(req, rec); err != nil {
		return err
	}
	if req.MaxCompletionTokens != nil {
		rec.MaxTokens = *req.MaxCompletionTokens
	} else if req.MaxTokens != nil {
		rec.MaxTokens = *req.MaxTokens
	}
	if _, ok := fields["tools"]; ok {
		rec.ToolNames = []string{}
	}
	for i, t := range req.Tools {
		if t.Type != "function" {
			return fmt.Errorf("tools[%d]: type %q, want function", i, t.Type)
		}
		if !toolName.MatchString(t.Function.Name) {
			return fmt.Errorf("tools[%d]: invalid function name %q", i, t.Function.Name)
		}
		rec.ToolNames = append(rec.ToolNames, t.Function.Name)
		rec.Tools = append(rec.Tools, llm.Tool{
			Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters,
		})
	}
	msgs, err := oaMessages(req.Messages)
	if err != nil {
		return err
	}
	rec.Messages = msgs
	return nil
}

// oaConstraints reads response_format and tool_choice, checking what
// OpenAI checks: a json_schema format has a name and a schema, and
// tool_choice "required" comes with tools.
func oaConstraints(req oaRequest, rec *Received) error {
	if f := req.ResponseFormat; f != nil {
		switch f.Type {
		case "text", "json_object":
		case "json_schema":
			if f.JSONSchema == nil || !toolName.MatchString(f.JSONSchema.Name) || len(f.JSONSchema.Schema) == 0 {
				return errors.New("response_format json_schema needs json_schema.name (^[a-zA-Z0-9_-]{1,64}$) and json_schema.schema")
			}
			if _, err := resolve(f.JSONSchema.Schema); err != nil {
				return fmt.Errorf("response_format json_schema.schema: %w", err)
			}
			rec.Format = f.JSONSchema.Schema
		default:
			return fmt.Errorf("response_format type %q, want text, json_object or json_schema", f.Type)
		}
	}
	if len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null" {
		var s string
		if json.Unmarshal(req.ToolChoice, &s) == nil {
			rec.ToolChoice = s
		} else {
			rec.ToolChoice = string(req.ToolChoice)
		}
		if s == "required" && len(req.Tools) == 0 {
			return errors.New(`tool_choice "required" without tools`)
		}
	}
	return nil
}

// oaMessages decodes the conversation and checks what OpenAI checks: known
// roles, and tool messages answering a call of an earlier assistant message.
func oaMessages(in []oaMessage) ([]llm.Message, error) {
	if len(in) == 0 {
		return nil, errors.New("messages is empty")
	}
	calls := map[string]bool{}
	out := make([]llm.Message, 0, len(in))
	for i, m := range in {
		content, err := oaContent(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		msg := llm.Message{Role: m.Role, Content: content, Name: m.Name, ToolCallID: m.ToolCallID}
		switch m.Role {
		case llm.System, llm.User, "developer":
		case llm.Assistant:
			for j, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Type != "function" || tc.Function.Name == "" {
					return nil, fmt.Errorf("messages[%d].tool_calls[%d]: id, type function and name are required", i, j)
				}
				calls[tc.ID] = true
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{
					ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments),
				})
			}
		case llm.ToolRole:
			if !calls[m.ToolCallID] {
				return nil, fmt.Errorf("messages[%d]: tool message answers unknown tool_call_id %q", i, m.ToolCallID)
			}
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
		out = append(out, msg)
	}
	return out, nil
}

// oaContent reads a content field: a string, null, or an array of parts of
// which the text ones are joined.
func oaContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor an array of parts: %w", err)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

func (openaiWire) reply(w http.ResponseWriter, rec Received, r Reply) error {
	msg := map[string]any{"role": "assistant", "content": r.Content, "refusal": nil}
	if r.Reasoning != "" {
		field := r.ReasoningField
		if field == "" {
			field = "reasoning_content"
		}
		msg[field] = r.Reasoning
	}
	if len(r.ToolCalls) > 0 {
		calls := make([]map[string]any, 0, len(r.ToolCalls))
		for i, c := range r.ToolCalls {
			args, err := argsJSON(c.Args)
			if err != nil {
				return err
			}
			call := map[string]any{
				"type":     "function",
				"function": map[string]any{"name": c.Name, "arguments": string(args)},
			}
			if id := callID(rec, c, i); id != "" {
				call["id"] = id
			}
			calls = append(calls, call)
		}
		msg["tool_calls"] = calls
		if r.Content == "" {
			msg["content"] = nil
		}
	}
	choice := map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finishReason(r)}
	writeJSON(w, http.StatusOK, oaCompletion(rec, []any{choice}, r.Usage))
	return nil
}

// callID is the id an OpenAI answer gives call i: its own, or
// "call_<request>_<index>", or none with NoID.
func callID(rec Received, c Call, i int) string {
	switch {
	case c.ID != "":
		return c.ID
	case c.NoID:
		return ""
	}
	return fmt.Sprintf("call_%d_%d", rec.N, i)
}

func (openaiWire) empty(w http.ResponseWriter, rec Received) {
	writeJSON(w, http.StatusOK, oaCompletion(rec, []any{}, Usage{}))
}

func oaCompletion(rec Received, choices []any, u Usage) map[string]any {
	return map[string]any{
		"id":      fmt.Sprintf("chatcmpl-llmtest-%d", rec.N),
		"object":  "chat.completion",
		"created": created,
		"model":   rec.Model,
		"choices": choices,
		"usage": map[string]int{
			"prompt_tokens": u.In, "completion_tokens": u.Out, "total_tokens": u.In + u.Out,
		},
	}
}

func (openaiWire) errorBody(msg string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": "llmtest_error", "param": nil, "code": nil,
	}})
	return string(b)
}

func (openaiWire) garbage() string {
	return `{"id": "chatcmpl-garbage", "object": "chat.completion", "choices": [{"index": 0, "mess`
}

func bearer(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeRaw(w, status, string(b))
}

func writeRaw(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}
