package openai_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/openai"
)

// The wire as servers really speak it, through the client the daemon
// builds: the retry layer over wire.AnswerTransport.

func withRetries(o *openai.Options) { o.HTTPClient = llmtest.Retrying(nil) }

// An error a server sends with status 200 (an OpenAI-style error object, a
// proxy's string, vLLM's error object) is retried like a 5xx, and when the
// retries are spent the error quotes the server's message and says it came
// with a 200.
func TestChatErrorIn200IsTheServersError(t *testing.T) {
	for _, tc := range []struct{ name, body, message string }{
		{"error object", `{"error":{"message":"Upstream provider failed: overloaded","type":"server_error","code":502}}`,
			"Upstream provider failed: overloaded"},
		{"error string", `{"error":"model runner crashed: CUDA error: out of memory"}`, "model runner crashed: CUDA error: out of memory"},
		{"vllm error object", `{"object":"error","message":"The engine is dead","type":"EngineDeadError","param":null,"code":500}`,
			"The engine is dead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			for range 4 {
				srv.Script(llmtest.Garbage{Body: tc.body})
			}
			c := newClient(t, srv, withRetries)
			_, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
			if err == nil {
				t.Fatal("Chat succeeded on an error")
			}
			want := "openai chat completion (model gpt-test): the server answered status 200 with an error: " + tc.message
			if err.Error() != want {
				t.Errorf("error %q\nwant  %q", err, want)
			}
			var se *openai.StatusError
			if !errors.As(err, &se) || !se.InBody || se.HTTPStatus() != http.StatusOK || errors.Is(err, llm.ErrEmptyReply) {
				t.Errorf("error %#v: want a StatusError in the body of a 200", err)
			}
			if n := len(srv.Requests()); n != 4 {
				t.Errorf("requests = %d, want 4: retried 3 times", n)
			}
		})
	}
}

// A server error in a 200 that goes away is retried to the answer.
func TestChatErrorIn200ThenAnswer(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Garbage{Body: `{"error":{"message":"try again"}}`}, llmtest.Reply{Content: "hello"})
	c := newClient(t, srv, withRetries)
	got, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
	if err != nil || got.Message.Content != "hello" || len(srv.Requests()) != 2 {
		t.Errorf("Chat = %q, %v after %d requests; want hello after 2", got.Message.Content, err, len(srv.Requests()))
	}
}

// A server's 200 with a context length error in its body is
// llm.ErrContextLength, as the same error with a 400 is.
func TestChatContextLengthIn200(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	body := `{"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}}`
	for range 4 {
		srv.Script(llmtest.Garbage{Body: body})
	}
	c := newClient(t, srv, withRetries)
	if _, err := c.Chat(t.Context(), llm.Request{Messages: conversation()}); !errors.Is(err, llm.ErrContextLength) {
		t.Errorf("error %v, want ErrContextLength", err)
	}
}

// A server that streams although no stream was asked for is read on the
// first attempt: the same response as the answer unstreamed, reasoning,
// content, calls (arguments in pieces), finish reason and usage.
func TestChatStreamedAnswerIsRead(t *testing.T) {
	reply := llmtest.Reply{
		Content: "Reading both files. ÄÖÜ", Reasoning: "The user wants both files read.",
		ToolCalls: []llmtest.Call{
			{ID: "call_x1", Name: "fs__read_file", Args: map[string]any{"path": "main.go", "lines": []int{1, 20}}},
			{Name: "fs__read_file", Args: map[string]any{"path": "go.mod"}},
		},
		Usage: llmtest.Usage{In: 120, Out: 33},
	}
	for _, field := range []string{"reasoning_content", "reasoning"} {
		t.Run(field, func(t *testing.T) {
			reply := reply
			reply.ReasoningField = field
			srv := llmtest.NewServer(t, llmtest.Options{})
			srv.Script(reply, llmtest.Streamed{Reply: reply})
			c := newClient(t, srv, withRetries)
			plain, err := c.Chat(t.Context(), llm.Request{Messages: conversation(), Tools: []llm.Tool{readFile}})
			if err != nil {
				t.Fatal(err)
			}
			streamed, err := c.Chat(t.Context(), llm.Request{Messages: conversation(), Tools: []llm.Tool{readFile}})
			if err != nil {
				t.Fatalf("streamed: %v", err)
			}
			// The ids a server makes for calls without one differ by request.
			plain.Message.ToolCalls[1].ID = streamed.Message.ToolCalls[1].ID
			if diff := cmp.Diff(plain, streamed); diff != "" {
				t.Errorf("streamed response (-plain +streamed):\n%s", diff)
			}
			if n := len(srv.Requests()); n != 2 {
				t.Errorf("requests = %d, want 2: the stream read on its first attempt", n)
			}
		})
	}
}

// A streamed error, in each form servers send it, is retried and quoted; a
// stream cut before its end is retried.
func TestChatStreamedErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, message string }{
		{"data", "data: {\"error\":{\"message\":\"quota exceeded\"}}\n\ndata: [DONE]\n\n", "quota exceeded"},
		{"llama.cpp error field", "error: {\"code\":500,\"message\":\"slot unavailable\",\"type\":\"server_error\"}\n\ndata: [DONE]\n\n", "slot unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			for range 4 {
				srv.Script(llmtest.Garbage{Body: tc.body})
			}
			c := newClient(t, srv, withRetries)
			_, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
			if err == nil || !strings.HasSuffix(err.Error(), "the server answered status 200 with an error: "+tc.message) {
				t.Errorf("error %v, want the server's message", err)
			}
			if n := len(srv.Requests()); n != 4 {
				t.Errorf("requests = %d, want 4", n)
			}
		})
	}
	t.Run("cut", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.Options{})
		srv.Script(llmtest.Streamed{Reply: llmtest.Reply{Content: "a long answer"}, Cut: true}, llmtest.Reply{Content: "whole"})
		c := newClient(t, srv, withRetries)
		got, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
		if err != nil || got.Message.Content != "whole" || len(srv.Requests()) != 2 {
			t.Errorf("Chat = %q, %v after %d requests; want the retried answer", got.Message.Content, err, len(srv.Requests()))
		}
	})
}

// An empty call (no name, no id, no arguments) beside a final answer is
// no call, streamed or not.
func TestChatIgnoresEmptyCall(t *testing.T) {
	reply := llmtest.Reply{Content: `{"done": true, "comment": "Fixed."}`, ToolCalls: []llmtest.Call{{NoID: true}}}
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(reply, llmtest.Streamed{Reply: reply})
	c := newClient(t, srv, withRetries)
	for range 2 {
		got, err := c.Chat(t.Context(), llm.Request{Messages: conversation(), Tools: []llm.Tool{readFile}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Message.ToolCalls) != 0 || got.Message.Content != reply.Content {
			t.Errorf("message %+v, want the answer without calls", got.Message)
		}
	}
}

// A conversation holding a call without a name (a checkpoint written before
// such calls were dropped on arrival) is sent without it and without the
// tool message answering it.
func TestChatSendsNoNamelessCall(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{Content: "ok"})
	c := newClient(t, srv, nil)
	history := append(conversation(),
		llm.Message{Role: llm.Assistant, Content: "Looking.", ToolCalls: []llm.ToolCall{
			{ID: "call_3_0", Arguments: json.RawMessage(`{}`)},
			{ID: "call_3_1", Name: "fs__read_file", Arguments: json.RawMessage(`{"path":"a"}`)},
		}},
		llm.Message{Role: llm.ToolRole, ToolCallID: "call_3_0", Content: "unknown tool"},
		llm.Message{Role: llm.ToolRole, ToolCallID: "call_3_1", Content: "package a"},
		llm.Message{Role: llm.Assistant, ToolCalls: []llm.ToolCall{{ID: "call_6_0"}}},
		llm.Message{Role: llm.ToolRole, ToolCallID: "call_6_0", Content: "unknown tool"},
	)
	if _, err := c.Chat(t.Context(), llm.Request{Messages: history, Tools: []llm.Tool{readFile}}); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	sent := srv.Requests()[0].Messages
	if len(sent) != 5 || len(sent[2].ToolCalls) != 1 || sent[2].ToolCalls[0].Name != "fs__read_file" ||
		sent[3].Content != "package a" || sent[4].Role != llm.Assistant || len(sent[4].ToolCalls) != 0 {
		t.Errorf("sent %+v", sent)
	}
}

var mistralShape = regexp.MustCompile(`^[a-zA-Z0-9]{9}$`)

// Tool call ids go back in the one shape Mistral's tokenizer takes: ours,
// a server's longer ones and repeated ones are mapped, each call's answer
// follows it, every id of a request is unique, and the same history makes
// the same request. A server's own id of that shape is kept.
func TestChatSendsToolCallIDsMistralTakes(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{MistralToolCallIDs: true})
	srv.Script(llmtest.Reply{Content: "a"}, llmtest.Reply{Content: "b"})
	c := newClient(t, srv, nil)
	call := func(id, path string) llm.ToolCall {
		return llm.ToolCall{ID: id, Name: "fs__read_file", Arguments: json.RawMessage(`{"path":"` + path + `"}`)}
	}
	result := func(id, text string) llm.Message {
		return llm.Message{Role: llm.ToolRole, ToolCallID: id, Content: text}
	}
	history := append(conversation(),
		llm.Message{Role: llm.Assistant, ToolCalls: []llm.ToolCall{call("call_2_0", "a"), call("chatcmpl-tool-e5add885dbb342de950be95dd89b71e7", "b")}},
		result("call_2_0", "A"), result("chatcmpl-tool-e5add885dbb342de950be95dd89b71e7", "B"),
		llm.Message{Role: llm.Assistant, ToolCalls: []llm.ToolCall{call("abc123XYZ", "c")}},
		result("abc123XYZ", "C"),
		// A server that numbers its calls per reply repeats ids.
		llm.Message{Role: llm.Assistant, ToolCalls: []llm.ToolCall{call("abc123XYZ", "d"), call("0", "e")}},
		result("abc123XYZ", "D"), result("0", "E"),
		llm.Message{Role: llm.Assistant, ToolCalls: []llm.ToolCall{call("0", "f")}},
		result("0", "F"),
	)
	for range 2 {
		if _, err := c.Chat(t.Context(), llm.Request{Messages: history, Tools: []llm.Tool{readFile}}); err != nil {
			t.Fatalf("Chat: %v", err)
		}
	}
	reqs := srv.Requests()
	if string(reqs[0].Body) != string(reqs[1].Body) {
		t.Errorf("the same history made two requests:\n%s\n%s", reqs[0].Body, reqs[1].Body)
	}
	seen := map[string]bool{}
	byPath := map[string]string{} // the path a call read → its wire id
	var pending []string
	for _, m := range reqs[0].Messages {
		for _, tc := range m.ToolCalls {
			if !mistralShape.MatchString(tc.ID) || seen[tc.ID] {
				t.Errorf("call id %q is not nine letters and digits, or is repeated", tc.ID)
			}
			seen[tc.ID] = true
			var args struct{ Path string }
			_ = json.Unmarshal(tc.Arguments, &args)
			byPath[args.Path] = tc.ID
			pending = append(pending, tc.ID)
		}
		if m.Role == llm.ToolRole {
			if len(pending) == 0 || m.ToolCallID != pending[0] {
				t.Errorf("tool message %q answers %q, want the call before it (%v)", m.Content, m.ToolCallID, pending)
			} else {
				pending = pending[1:]
			}
		}
	}
	if byPath["c"] != "abc123XYZ" || len(byPath) != 6 {
		t.Errorf("ids by path %v: want the server's own valid id kept for c, and six calls", byPath)
	}
}
