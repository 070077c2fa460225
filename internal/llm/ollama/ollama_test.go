package ollama_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/ollama"
)

const model = "qwen-test"

func newClient(t *testing.T, srv *llmtest.Server, mod func(*ollama.Options)) *ollama.Client {
	t.Helper()
	opts := ollama.Options{Endpoint: srv.URL(), Model: model}
	if mod != nil {
		mod(&opts)
	}
	c, err := ollama.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

var readFile = llm.Tool{
	Name:        "fs__read_file",
	Description: "Read a file.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
}

func conversation() []llm.Message {
	return []llm.Message{
		{Role: llm.System, Content: "You are a coding agent."},
		{Role: llm.User, Content: "Fix the bug."},
	}
}

// httpStatus is how callers that may not import this package read a status.
type httpStatus interface{ HTTPStatus() int }

func TestChatPlainContent(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{Content: "hello", Usage: llmtest.Usage{In: 21, Out: 4}})
	c := newClient(t, srv, nil)

	got, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	want := llm.Response{
		Message:      llm.Message{Role: llm.Assistant, Content: "hello"},
		Usage:        llm.Usage{InputTokens: 21, OutputTokens: 4},
		FinishReason: "stop",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	r := srv.Requests()[0]
	if r.Wire != llmtest.WireOllama || r.Path != "/api/chat" || r.Model != model || r.Stream {
		t.Errorf("wire %s, path %s, model %s, stream %v: want a non-streaming ollama chat", r.Wire, r.Path, r.Model, r.Stream)
	}
	if diff := cmp.Diff(conversation(), r.Messages); diff != "" {
		t.Errorf("messages sent (-want +got):\n%s", diff)
	}
	if r.ToolNames != nil || r.Options != nil {
		t.Errorf("tools %v, options %v sent without being asked for", r.ToolNames, r.Options)
	}
}

func TestChatSendsNoToolsFieldWithoutTools(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{Content: "ok"})
	c := newClient(t, srv, nil)
	if _, err := c.Chat(t.Context(), llm.Request{Messages: conversation(), Tools: []llm.Tool{}}); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(srv.Requests()[0].Body, &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["tools"]; ok {
		t.Errorf("tools field sent: %s", srv.Requests()[0].Body)
	}
}

func TestChatOptions(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{Content: "a"}, llmtest.Reply{Content: "b"})
	c := newClient(t, srv, func(o *ollama.Options) { o.MaxTokens = 256; o.ContextLength = 32768 })
	for _, limit := range []int{0, 99} {
		if _, err := c.Chat(t.Context(), llm.Request{Messages: conversation(), MaxTokens: limit}); err != nil {
			t.Fatalf("Chat: %v", err)
		}
	}
	reqs := srv.Requests()
	want := []map[string]any{
		{"num_predict": float64(256), "num_ctx": float64(32768)},
		{"num_predict": float64(99), "num_ctx": float64(32768)},
	}
	for i, r := range reqs {
		if diff := cmp.Diff(want[i], r.Options); diff != "" {
			t.Errorf("request %d options (-want +got):\n%s", i, diff)
		}
	}
}

func TestChatToolCallRoundTrip(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(
		llmtest.Reply{ToolCalls: []llmtest.Call{
			{Name: "fs__read_file", Args: map[string]any{"path": "main.go"}},
			{ID: "server-id", Name: "fs__read_file", Args: map[string]any{"path": "go.mod"}},
		}, Usage: llmtest.Usage{In: 50, Out: 12}},
		llmtest.Reply{Content: `{"done": true, "comment": "fixed"}`},
	)
	c := newClient(t, srv, nil)
	ctx := t.Context()

	first, err := c.Chat(ctx, llm.Request{Messages: conversation(), Tools: []llm.Tool{readFile}})
	if err != nil {
		t.Fatalf("first Chat: %v", err)
	}
	wantAssistant := llm.Message{Role: llm.Assistant, ToolCalls: []llm.ToolCall{
		{ID: "call_2_0", Name: "fs__read_file", Arguments: json.RawMessage(`{"path":"main.go"}`)},
		{ID: "server-id", Name: "fs__read_file", Arguments: json.RawMessage(`{"path":"go.mod"}`)},
	}}
	if diff := cmp.Diff(wantAssistant, first.Message); diff != "" {
		t.Errorf("assistant message (-want +got):\n%s", diff)
	}
	if first.Usage != (llm.Usage{InputTokens: 50, OutputTokens: 12}) {
		t.Errorf("usage = %+v", first.Usage)
	}

	// The first result carries no name: the provider finds it from the call.
	history := append(conversation(), first.Message,
		llm.Message{Role: llm.ToolRole, ToolCallID: "call_2_0", Content: "package main"},
		llm.Message{Role: llm.ToolRole, ToolCallID: "server-id", Name: "fs__read_file", Content: "module x"})
	second, err := c.Chat(ctx, llm.Request{Messages: history, Tools: []llm.Tool{readFile}})
	if err != nil {
		t.Fatalf("second Chat: %v", err)
	}
	if second.Message.Content != `{"done": true, "comment": "fixed"}` {
		t.Errorf("second reply = %q", second.Message.Content)
	}

	reqs := srv.Requests()
	if diff := cmp.Diff([]string{"fs__read_file"}, reqs[0].ToolNames); diff != "" {
		t.Errorf("tools offered (-want +got):\n%s", diff)
	}
	wantHistory := append(conversation(), wantAssistant,
		llm.Message{Role: llm.ToolRole, ToolCallID: "call_2_0", Name: "fs__read_file", Content: "package main"},
		llm.Message{Role: llm.ToolRole, ToolCallID: "server-id", Name: "fs__read_file", Content: "module x"})
	if diff := cmp.Diff(wantHistory, reqs[1].Messages); diff != "" {
		t.Errorf("second request messages (-want +got):\n%s", diff)
	}
}

func TestChatFaultIsOneRequest(t *testing.T) {
	cases := map[string]llmtest.Fault{
		"json body":  {Status: http.StatusInternalServerError},
		"empty body": {Status: http.StatusServiceUnavailable, NoBody: true},
		"text body":  {Status: http.StatusBadGateway, Body: "<html>bad gateway</html>"},
	}
	for name, fault := range cases {
		t.Run(name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			srv.Script(fault)
			c := newClient(t, srv, func(o *ollama.Options) { o.HTTPClient = &http.Client{} })
			_, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
			var hs httpStatus
			if !errors.As(err, &hs) || hs.HTTPStatus() != fault.Status {
				t.Errorf("error %v: want HTTP status %d visible", err, fault.Status)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "ollama chat (model qwen-test): ") {
				t.Errorf("error %q does not name the action", err)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("requests = %d, want 1", n)
			}
		})
	}
}

func TestChatBadReplies(t *testing.T) {
	long := `{"model": "` + strings.Repeat("x", 5000)
	cases := map[string]llmtest.Step{
		"garbage":      llmtest.Garbage{},
		"long garbage": llmtest.Garbage{Body: long},
		"never done":   llmtest.Garbage{Body: `{"model":"m","message":{"role":"assistant","content":"hi"},"done":false}`},
		"error line":   llmtest.Garbage{Body: `{"error":"model crashed"}`},
	}
	for name, step := range cases {
		t.Run(name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			srv.Script(step)
			c := newClient(t, srv, nil)
			_, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
			if err == nil {
				t.Fatal("Chat succeeded on a bad reply")
			}
			if errors.Is(err, llm.ErrEmptyReply) || len(err.Error()) > 1000 {
				t.Errorf("error = %.200q (%d bytes), want a short decoding error", err, len(err.Error()))
			}
		})
	}
}

func TestChatEmptyBodyIsEmptyReply(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Empty{})
	c := newClient(t, srv, nil)
	_, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
	if !errors.Is(err, llm.ErrEmptyReply) {
		t.Errorf("error = %v, want ErrEmptyReply", err)
	}
}

func TestChatSlowReplyCancelled(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	arrived := make(chan struct{})
	srv.Script(llmtest.Slow{Arrived: arrived})
	c := newClient(t, srv, nil)

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Chat(ctx, llm.Request{Messages: conversation()})
		errc <- err
	}()
	<-arrived
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}

func TestChatRejectsBadInput(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	c := newClient(t, srv, nil)
	bad := []llm.Request{
		{Messages: []llm.Message{{Role: "wizard"}}},
		{Messages: conversation(), Tools: []llm.Tool{{Name: "t", Parameters: json.RawMessage(`[1]`)}}},
	}
	for _, req := range bad {
		if _, err := c.Chat(t.Context(), req); err == nil {
			t.Errorf("Chat(%+v) succeeded", req)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("requests = %d, want none sent", n)
	}
}

func TestNewValidates(t *testing.T) {
	bad := []ollama.Options{
		{Endpoint: "http://localhost:11434"},
		{Model: "m", Endpoint: "localhost:11434"},
		{Model: "m", MaxTokens: -1},
		{Model: "m", ContextLength: -1},
	}
	for _, o := range bad {
		if _, err := ollama.New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

// Ollama returns a thinking model's trace in message.thinking
// (https://docs.ollama.com/capabilities/thinking); it is kept apart from
// the content and never sent back. A reply cut by num_predict says
// done_reason "length", with the content empty when the thinking used the
// budget (ollama/ollama#16184).
func TestChatReadsThinkingApartAndTheFinishReason(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(
		llmtest.Reply{Content: "42", Reasoning: "Let me think."},
		llmtest.Reply{Reasoning: "Thinking at length", FinishReason: "length"},
	)
	c := newClient(t, srv, nil)
	got, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if got.Message.Content != "42" || got.Message.Reasoning != "Let me think." || got.FinishReason != "stop" {
		t.Errorf("content %q, reasoning %q, finish %q", got.Message.Content, got.Message.Reasoning, got.FinishReason)
	}
	cut, err := c.Chat(t.Context(), llm.Request{Messages: append(conversation(), got.Message)})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if cut.FinishReason != llm.FinishLength || cut.Message.Content != "" {
		t.Errorf("finish %q, content %q; want length and no content", cut.FinishReason, cut.Message.Content)
	}
	if body := string(srv.Requests()[1].Body); strings.Contains(body, "Let me think") {
		t.Errorf("the thinking was sent back: %s", body)
	}
}

// A reply schema goes as format; tool_choice is not part of Ollama's API
// and is not sent.
func TestChatSendsTheReplySchemaAsFormat(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"done":{"const":true}},"required":["done"]}`)
	srv := llmtest.NewServer(t, llmtest.Options{EnforceFormat: true})
	srv.Script(llmtest.Reply{Content: `{"done": true}`}, llmtest.Reply{Content: "plain"})
	c := newClient(t, srv, nil)
	for _, req := range []llm.Request{
		{Messages: conversation(), Format: schema},
		{Messages: conversation(), Tools: []llm.Tool{readFile}, ToolChoice: llm.ToolChoiceRequired},
	} {
		if _, err := c.Chat(t.Context(), req); err != nil {
			t.Fatalf("Chat: %v", err)
		}
	}
	reqs := srv.Requests()
	if diff := cmp.Diff(string(schema), string(reqs[0].Format)); diff != "" {
		t.Errorf("format sent (-want +got):\n%s", diff)
	}
	if strings.Contains(string(reqs[1].Body), "tool_choice") || strings.Contains(string(reqs[1].Body), "format") {
		t.Errorf("request 2 sent what Ollama has no use for: %s", reqs[1].Body)
	}
}
