package ollama

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ollama/ollama/api"

	"github.com/coding-agent/coding-agent/internal/llm"
)

// toMessages maps the conversation onto the wire. A tool message without
// a name takes the name of the call it answers: Ollama ties results to
// calls by tool_name. A call without a name cannot be sent: it is left out
// with the tool message answering it, so that a conversation holding one (a
// checkpoint written before such calls were dropped on arrival) is still
// sent. Ids go as they are: Ollama's templates check none (its own are
// "call_" and eight characters).
func toMessages(in []llm.Message) ([]api.Message, error) {
	names := map[string]string{} // tool call id → function name
	out := make([]api.Message, 0, len(in))
	for i, m := range in {
		msg := api.Message{Role: m.Role, Content: m.Content}
		switch m.Role {
		case llm.System, llm.User:
		case llm.Assistant:
			for j, tc := range m.ToolCalls {
				if tc.Name == "" {
					if _, named := names[tc.ID]; !named {
						names[tc.ID] = ""
					}
					continue
				}
				names[tc.ID] = tc.Name
				msg.ToolCalls = append(msg.ToolCalls, api.ToolCall{
					ID:       tc.ID,
					Function: api.ToolCallFunction{Index: j, Name: tc.Name, Arguments: arguments(tc.Arguments)},
				})
			}
		case llm.ToolRole:
			msg.ToolCallID = m.ToolCallID
			msg.ToolName = m.Name
			if msg.ToolName == "" {
				name, known := names[m.ToolCallID]
				if known && name == "" {
					continue // it answers a call left out
				}
				msg.ToolName = name
			}
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
		out = append(out, msg)
	}
	return out, nil
}

// arguments decodes a call's arguments; what is not a JSON object (a
// model's invalid output kept as a string) is sent as {}.
func arguments(raw json.RawMessage) api.ToolCallFunctionArguments {
	var args api.ToolCallFunctionArguments
	if len(raw) == 0 || args.UnmarshalJSON(raw) != nil {
		return api.NewToolCallFunctionArguments()
	}
	return args
}

// toTools maps tool definitions; nil when there are none, so that no tools
// field is sent.
func toTools(in []llm.Tool) (api.Tools, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(api.Tools, 0, len(in))
	for _, t := range in {
		params, err := toParameters(t.Parameters)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		out = append(out, api.Tool{
			Type:     "function",
			Function: api.ToolFunction{Name: t.Name, Description: t.Description, Parameters: params},
		})
	}
	return out, nil
}

// reply puts the answer together from the chunks received (one when not
// streaming).
type reply struct {
	chunks   int
	content  strings.Builder
	thinking strings.Builder
	calls    []api.ToolCall
	done     bool
	reason   string
	in, out  int
}

func (r *reply) add(resp api.ChatResponse) error {
	r.chunks++
	r.content.WriteString(resp.Message.Content)
	r.thinking.WriteString(resp.Message.Thinking)
	r.calls = append(r.calls, resp.Message.ToolCalls...)
	if resp.Done {
		r.done = true
		r.reason = resp.DoneReason
		r.in, r.out = resp.PromptEvalCount, resp.EvalCount
	}
	return nil
}

// message is the assistant message, its thinking apart from its content.
// Calls without an id get a stable one made of the conversation length and
// the call's index, unique within a conversation. A call without a name is
// left out (nameless counts them): nothing can run it, and an empty one
// beside a final answer means no call at all.
func (r *reply) message(turn int) (msg llm.Message, nameless int) {
	msg = llm.Message{Role: llm.Assistant, Content: r.content.String(), Reasoning: r.thinking.String()}
	for i, tc := range r.calls {
		if tc.Function.Name == "" {
			if tc.ID != "" || tc.Function.Arguments.Len() > 0 {
				nameless++
			}
			continue
		}
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", turn, i)
		}
		args, err := tc.Function.Arguments.MarshalJSON()
		if err != nil {
			args = []byte("{}")
		}
		msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: id, Name: tc.Function.Name, Arguments: args})
	}
	return msg, nameless
}
