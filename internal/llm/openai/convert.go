package openai

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/coding-agent/coding-agent/internal/llm"
)

// toMessages maps the conversation onto the wire. Tool call ids are sent
// in the one shape every server takes (callIDs). A call without a name
// cannot be sent (servers refuse it, and no tool has it): it is left out
// with the tool message answering it, so that a conversation holding one (a
// checkpoint written before such calls were dropped on arrival) is still
// sent.
func toMessages(in []llm.Message) ([]oa.ChatCompletionMessageParamUnion, error) {
	out := make([]oa.ChatCompletionMessageParamUnion, 0, len(in))
	ids := newCallIDs()
	for i, m := range in {
		switch m.Role {
		case llm.System:
			out = append(out, oa.SystemMessage(m.Content))
		case llm.User:
			out = append(out, oa.UserMessage(m.Content))
		case llm.Assistant:
			out = append(out, assistantMessage(m, ids))
		case llm.ToolRole:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("message %d: tool message has no tool call id", i)
			}
			if id, ok := ids.result(m.ToolCallID); ok {
				out = append(out, oa.ToolMessage(m.Content, id))
			}
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

func assistantMessage(m llm.Message, ids *callIDs) oa.ChatCompletionMessageParamUnion {
	var a oa.ChatCompletionAssistantMessageParam
	ids.assistant()
	for _, tc := range m.ToolCalls {
		if tc.Name == "" {
			ids.drop(tc.ID)
			continue
		}
		a.ToolCalls = append(a.ToolCalls, oa.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{
				ID: ids.call(tc.ID),
				Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{
					Name: tc.Name, Arguments: argumentsText(tc.Arguments),
				},
			},
		})
	}
	if m.Content != "" || len(a.ToolCalls) == 0 {
		a.Content.OfString = oa.String(m.Content)
	}
	return oa.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

// toTools maps tool definitions; nil when there are none, so that no tools
// field is sent. The schema's top-level keys are kept with their values
// verbatim (in their original order below the top level).
func toTools(in []llm.Tool) ([]oa.ChatCompletionToolUnionParam, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]oa.ChatCompletionToolUnionParam, 0, len(in))
	for _, t := range in {
		params := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
		if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
			var top map[string]json.RawMessage
			if err := json.Unmarshal(t.Parameters, &top); err != nil {
				return nil, fmt.Errorf("tool %q: parameters are not a JSON object: %w", t.Name, err)
			}
			params = make(shared.FunctionParameters, len(top))
			for k, v := range top {
				params[k] = v
			}
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			fd.Description = oa.String(t.Description)
		}
		out = append(out, oa.ChatCompletionFunctionTool(fd))
	}
	return out, nil
}

// fromMessage maps the model's message back. Tool calls without an id get a
// stable one made of the conversation length and the call's index. A call
// without a name is left out: nothing can run it, and a server that sends
// an empty one beside a final answer (no name, no id, no arguments) means
// no call at all.
func fromMessage(m oa.ChatCompletionMessage, turn int, log *slog.Logger) llm.Message {
	out := llm.Message{Role: llm.Assistant, Content: m.Content, Reasoning: reasoning(m)}
	if out.Content == "" && m.Refusal != "" {
		out.Content = m.Refusal
	}
	for i, tc := range m.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			log.Warn("ignoring tool call of unsupported type", "type", tc.Type, "id", tc.ID)
			continue
		}
		if tc.Function.Name == "" {
			if tc.ID != "" || !blank(tc.Function.Arguments) {
				log.Warn("ignoring a tool call without a function name", "id", tc.ID, "arguments", len(tc.Function.Arguments))
			}
			continue
		}
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", turn, i)
		}
		out.ToolCalls = append(out.ToolCalls, llm.ToolCall{
			ID: id, Name: tc.Function.Name, Arguments: argumentsJSON(tc.Function.Arguments),
		})
	}
	return out
}

// reasoningFields are where OpenAI-compatible servers put a reasoning trace
// beside the answer: reasoning_content (DeepSeek, llama.cpp, LM Studio,
// vLLM before 0.11) and reasoning (vLLM since, Ollama's /v1).
var reasoningFields = []string{"reasoning_content", "reasoning"}

// reasoning is the message's reasoning trace, "" when it has none. OpenAI's
// own API has no such field: the servers that add it are read from the
// message's extra fields.
func reasoning(m oa.ChatCompletionMessage) string {
	for _, name := range reasoningFields {
		f, ok := m.JSON.ExtraFields[name]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// argumentsJSON turns the arguments text a model wrote into JSON: verbatim
// when valid, {} when blank, and otherwise the text as a JSON string, so
// that the caller sees it is not an object and the message stays valid JSON.
func argumentsJSON(s string) json.RawMessage {
	switch {
	case strings.TrimSpace(s) == "":
		return json.RawMessage("{}")
	case json.Valid([]byte(s)):
		return json.RawMessage(s)
	default:
		b, _ := json.Marshal(s) // a string always marshals
		return b
	}
}

// blank reports whether arguments text says nothing: empty, or {}.
func blank(s string) bool {
	s = strings.Join(strings.Fields(s), "")
	return s == "" || s == "{}" || s == "null"
}

// argumentsText is the inverse of argumentsJSON: what goes back on the wire.
func argumentsText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
