package openai_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/openai"
)

const model = "gpt-test"

func newClient(t *testing.T, srv *llmtest.Server, mod func(*openai.Options)) *openai.Client {
	t.Helper()
	opts := openai.Options{BaseURL: srv.OpenAIURL(), APIKey: "sk-test-key", Model: model}
	if mod != nil {
		mod(&opts)
	}
	c, err := openai.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

var readFile = llm.Tool{
	Name:        "fs__read_file",
	Description: "Read a file.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},` +
		`"lines":{"type":"array","items":{"type":"integer"}}},"required":["path"]}`),
}

func conversation() []llm.Message {
	return []llm.Message{
		{Role: llm.System, Content: "You are a coding agent."},
		{Role: llm.User, Content: "Fix the bug."},
	}
}

func TestChatPlainContent(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{Content: "hello", Usage: llmtest.Usage{In: 12, Out: 3}})
	c := newClient(t, srv, nil)

	got, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	want := llm.Response{
		Message:      llm.Message{Role: llm.Assistant, Content: "hello"},
		Usage:        llm.Usage{InputTokens: 12, OutputTokens: 3},
		FinishReason: "stop",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("requests = %d, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Wire != llmtest.WireOpenAI || r.Model != model {
		t.Errorf("wire, model = %q, %q; want openai, %q", r.Wire, r.Model, model)
	}
	if diff := cmp.Diff(conversation(), r.Messages); diff != "" {
		t.Errorf("messages sent (-want +got):\n%s", diff)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test-key" {
		t.Errorf("Authorization = %q, want the bearer key", got)
	}
	if r.MaxTokens != 0 || strings.Contains(string(r.Body), "max_") {
		t.Errorf("a token limit was sent without being asked for: %s", r.Body)
	}
}

func TestChatSendsNoToolsFieldWithoutTools(t *testing.T) {
	for name, tools := range map[string][]llm.Tool{"nil": nil, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			srv.Script(llmtest.Reply{Content: "ok"})
			c := newClient(t, srv, nil)
			if _, err := c.Chat(t.Context(), llm.Request{Messages: conversation(), Tools: tools}); err != nil {
				t.Fatalf("Chat: %v", err)
			}
			r := srv.Requests()[0]
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(r.Body, &fields); err != nil {
				t.Fatal(err)
			}
			if _, ok := fields["tools"]; ok || r.ToolNames != nil {
				t.Errorf("tools field sent: %s", r.Body)
			}
		})
	}
}

func TestChatToolCallRoundTrip(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(
		llmtest.Reply{Content: "Reading it.", ToolCalls: []llmtest.Call{
			{ID: "abc123XYZ", Name: "fs__read_file", Args: map[string]any{"path": "main.go"}},
		}, Usage: llmtest.Usage{In: 40, Out: 9}},
		llmtest.Reply{Content: `{"done": true, "comment": "fixed"}`},
	)
	c := newClient(t, srv, nil)
	ctx := t.Context()

	first, err := c.Chat(ctx, llm.Request{Messages: conversation(), Tools: []llm.Tool{readFile}})
	if err != nil {
		t.Fatalf("first Chat: %v", err)
	}
	wantCall := llm.ToolCall{ID: "abc123XYZ", Name: "fs__read_file", Arguments: json.RawMessage(`{"path":"main.go"}`)}
	wantAssistant := llm.Message{Role: llm.Assistant, Content: "Reading it.", ToolCalls: []llm.ToolCall{wantCall}}
	if diff := cmp.Diff(wantAssistant, first.Message); diff != "" {
		t.Errorf("assistant message (-want +got):\n%s", diff)
	}
	if first.Usage != (llm.Usage{InputTokens: 40, OutputTokens: 9}) {
		t.Errorf("usage = %+v", first.Usage)
	}

	history := append(conversation(), first.Message,
		llm.Message{Role: llm.ToolRole, ToolCallID: "abc123XYZ", Name: "fs__read_file", Content: "package main"})
	if _, err := c.Chat(ctx, llm.Request{Messages: history, Tools: []llm.Tool{readFile}}); err != nil {
		t.Fatalf("second Chat: %v", err)
	}

	reqs := srv.Requests()
	if diff := cmp.Diff([]string{"fs__read_file"}, reqs[0].ToolNames); diff != "" {
		t.Errorf("tools offered (-want +got):\n%s", diff)
	}
	assertSameJSON(t, readFile.Parameters, reqs[0].Tools[0].Parameters)
	if reqs[0].Tools[0].Description != readFile.Description {
		t.Errorf("description = %q", reqs[0].Tools[0].Description)
	}
	// The tool message carries no name on the OpenAI wire.
	wantHistory := append(conversation(), wantAssistant,
		llm.Message{Role: llm.ToolRole, ToolCallID: "abc123XYZ", Content: "package main"})
	if diff := cmp.Diff(wantHistory, reqs[1].Messages); diff != "" {
		t.Errorf("second request messages (-want +got):\n%s", diff)
	}
}

func assertSameJSON(t *testing.T, want, got json.RawMessage) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want: %v", err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got %s: %v", got, err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
}

func TestChatKeepsInvalidArgumentsVisible(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(
		llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "fs__read_file", Args: json.RawMessage(`{"path": `)}}},
		llmtest.Reply{Content: "sorry"},
	)
	c := newClient(t, srv, nil)
	resp, err := c.Chat(t.Context(), llm.Request{Messages: conversation(), Tools: []llm.Tool{readFile}})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	call := resp.Message.ToolCalls[0]
	if string(call.Arguments) != `"{\"path\": "` {
		t.Errorf("arguments = %s, want the text as a JSON string", call.Arguments)
	}
	if call.ID != "call_1_0" || resp.Message.Content != "" {
		t.Errorf("id, content = %q, %q", call.ID, resp.Message.Content)
	}
	history := append(conversation(), resp.Message,
		llm.Message{Role: llm.ToolRole, ToolCallID: call.ID, Content: "invalid arguments"})
	if _, err := c.Chat(t.Context(), llm.Request{Messages: history}); err != nil {
		t.Fatalf("second Chat: %v", err)
	}
	sent := srv.Requests()[1].Messages[2].ToolCalls[0].Arguments
	if string(sent) != `{"path": ` {
		t.Errorf("arguments sent back = %s, want the model's own text", sent)
	}
}

func TestChatMaxTokens(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{Content: "a"}, llmtest.Reply{Content: "b"})
	c := newClient(t, srv, func(o *openai.Options) { o.MaxTokens = 50 })
	for _, limit := range []int{0, 99} {
		if _, err := c.Chat(t.Context(), llm.Request{Messages: conversation(), MaxTokens: limit}); err != nil {
			t.Fatalf("Chat: %v", err)
		}
	}
	reqs := srv.Requests()
	if reqs[0].MaxTokens != 50 || reqs[1].MaxTokens != 99 {
		t.Errorf("max tokens = %d, %d; want 50 (options), 99 (request)", reqs[0].MaxTokens, reqs[1].MaxTokens)
	}
	if !strings.Contains(string(reqs[0].Body), `"max_tokens":50`) {
		t.Errorf("an OpenAI-compatible server should get max_tokens: %s", reqs[0].Body)
	}
}

// redirect sends every request to the test server, as if it were the host
// named in the URL.
type redirect struct{ to *url.URL }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = r.to.Scheme, r.to.Host
	return http.DefaultTransport.RoundTrip(req)
}

func TestChatUsesMaxCompletionTokensWithOpenAI(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{Content: "a"})
	to, _ := url.Parse(srv.URL())
	c := newClient(t, srv, func(o *openai.Options) {
		o.BaseURL = "" // the default, api.openai.com
		o.MaxTokens = 64
		o.HTTPClient = &http.Client{Transport: redirect{to: to}}
	})
	if _, err := c.Chat(t.Context(), llm.Request{Messages: conversation()}); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	r := srv.Requests()[0]
	if r.Path != "/v1/chat/completions" || !strings.Contains(string(r.Body), `"max_completion_tokens":64`) {
		t.Errorf("path %s, body %s: want max_completion_tokens on OpenAI's /v1", r.Path, r.Body)
	}
}

func TestChatReadsNoEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{Content: "a"})
	c := newClient(t, srv, func(o *openai.Options) { o.APIKey = "" })
	if _, err := c.Chat(t.Context(), llm.Request{Messages: conversation()}); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none: the key was not configured", got)
	}
}

// Some OpenAI-compatible servers send tool calls without ids, and a refusal
// comes in its own field.
func TestChatFillsMissingIDsAndRefusals(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(
		llmtest.Garbage{Body: `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,
			"message":{"role":"assistant","content":null,"tool_calls":[
				{"type":"function","function":{"name":"a","arguments":""}},
				{"type":"function","function":{"name":"b","arguments":"{\"k\":[1,2]}"}}]},
			"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`},
		llmtest.Garbage{Body: `{"id":"y","object":"chat.completion","model":"m","choices":[{"index":0,
			"message":{"role":"assistant","content":null,"refusal":"I cannot help with that."},
			"finish_reason":"stop"}]}`},
	)
	c := newClient(t, srv, nil)
	resp, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	want := []llm.ToolCall{
		{ID: "call_2_0", Name: "a", Arguments: json.RawMessage(`{}`)},
		{ID: "call_2_1", Name: "b", Arguments: json.RawMessage(`{"k":[1,2]}`)},
	}
	if diff := cmp.Diff(want, resp.Message.ToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	resp, err = c.Chat(t.Context(), llm.Request{Messages: conversation()})
	if err != nil || resp.Message.Content != "I cannot help with that." {
		t.Errorf("Chat = %q, %v; want the refusal as content", resp.Message.Content, err)
	}
}

// OpenAI-compatible servers return a reasoning trace beside the answer:
// reasoning_content (llama.cpp, LM Studio, vLLM before 0.11,
// https://docs.vllm.ai/en/v0.10.0/features/reasoning_outputs.html) or
// reasoning (vLLM since,
// https://docs.vllm.ai/en/stable/features/reasoning_outputs/). It is kept
// apart from the content and never sent back.
func TestChatReadsReasoningApart(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		t.Run(field, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			srv.Script(
				llmtest.Reply{Content: "42", Reasoning: "Let me think.", ReasoningField: field},
				llmtest.Reply{Content: "ok"},
			)
			c := newClient(t, srv, nil)
			got, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if got.Message.Content != "42" || got.Message.Reasoning != "Let me think." {
				t.Errorf("content %q, reasoning %q", got.Message.Content, got.Message.Reasoning)
			}
			if _, err := c.Chat(t.Context(), llm.Request{Messages: append(conversation(), got.Message)}); err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if body := string(srv.Requests()[1].Body); strings.Contains(body, "Let me think") {
				t.Errorf("the reasoning was sent back: %s", body)
			}
		})
	}
}

// A reply cut at the token limit says so: finish_reason "length".
func TestChatReportsFinishReason(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{Content: "", Reasoning: "Long thoughts", FinishReason: "length"})
	c := newClient(t, srv, nil)
	got, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if got.FinishReason != llm.FinishLength || got.Message.Content != "" {
		t.Errorf("finish %q, content %q; want length and no content", got.FinishReason, got.Message.Content)
	}
}

// llama-server may send a call's arguments as a JSON object where the OpenAI
// wire has a string (ggml-org/llama.cpp#20198): they arrive as the same object.
func TestChatAcceptsArgumentsAsObject(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Garbage{Body: `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,
		"message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"c1","type":"function","function":{"name":"a","arguments":{"path":"x"}}}]},
		"finish_reason":"tool_calls"}]}`})
	c := newClient(t, srv, nil)
	got, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if len(got.Message.ToolCalls) != 1 {
		t.Fatalf("tool calls %+v", got.Message.ToolCalls)
	}
	assertSameJSON(t, json.RawMessage(`{"path":"x"}`), got.Message.ToolCalls[0].Arguments)
}

// A reply schema goes as response_format json_schema, named, without
// "strict" (api.openai.com would refuse the open "args" object under
// strict, and strict false turns vLLM's grammar off); tool_choice
// "required" goes with tools only; neither is sent when not asked for.
func TestChatSendsTheReplySchemaAndToolChoice(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"done":{"const":true}},"required":["done"]}`)
	srv := llmtest.NewServer(t, llmtest.Options{EnforceFormat: true, HonourToolChoice: true})
	srv.Script(llmtest.Reply{Content: `{"done": true}`},
		llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "fs__read_file", Args: map[string]string{"path": "a"}}}},
		llmtest.Reply{Content: "plain"}, llmtest.Reply{Content: "plain"})
	c := newClient(t, srv, nil)
	for _, req := range []llm.Request{
		{Messages: conversation(), Format: schema},
		{Messages: conversation(), Tools: []llm.Tool{readFile}, ToolChoice: llm.ToolChoiceRequired},
		{Messages: conversation(), ToolChoice: llm.ToolChoiceRequired},
		{Messages: conversation()},
	} {
		if _, err := c.Chat(t.Context(), req); err != nil {
			t.Fatalf("Chat: %v", err)
		}
	}
	reqs := srv.Requests()
	var first struct {
		ResponseFormat map[string]json.RawMessage `json:"response_format"`
	}
	if err := json.Unmarshal(reqs[0].Body, &first); err != nil {
		t.Fatal(err)
	}
	if string(first.ResponseFormat["type"]) != `"json_schema"` || strings.Contains(string(reqs[0].Body), "strict") {
		t.Errorf("response_format %s, want json_schema without strict", reqs[0].Body)
	}
	if diff := cmp.Diff(string(schema), string(reqs[0].Format)); diff != "" {
		t.Errorf("schema sent (-want +got):\n%s", diff)
	}
	if reqs[1].ToolChoice != "required" || reqs[1].Format != nil {
		t.Errorf("request 2: tool_choice %q, format %s", reqs[1].ToolChoice, reqs[1].Format)
	}
	for _, r := range reqs[2:] {
		if strings.Contains(string(r.Body), "tool_choice") || strings.Contains(string(r.Body), "response_format") {
			t.Errorf("request %d sent what it was not asked for: %s", r.N, r.Body)
		}
	}
}
