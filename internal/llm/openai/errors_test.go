package openai_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/openai"
)

// httpStatus is how callers that may not import this package read a status.
type httpStatus interface{ HTTPStatus() int }

func TestChatFaultIsOneRequest(t *testing.T) {
	cases := []llmtest.Fault{
		{Status: http.StatusInternalServerError},
		{Status: http.StatusTooManyRequests, RetryAfter: "0"},
		{Status: http.StatusServiceUnavailable},
	}
	for _, fault := range cases {
		t.Run(http.StatusText(fault.Status), func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			srv.Script(fault)
			c := newClient(t, srv, func(o *openai.Options) { o.HTTPClient = &http.Client{} })
			_, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
			if err == nil {
				t.Fatal("Chat succeeded on a fault")
			}
			var hs httpStatus
			if !errors.As(err, &hs) || hs.HTTPStatus() != fault.Status {
				t.Errorf("error %v: want HTTP status %d visible", err, fault.Status)
			}
			if !strings.HasPrefix(err.Error(), "openai chat completion (model gpt-test): ") {
				t.Errorf("error %q does not name the action", err)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("requests = %d, want 1: the library must not retry", n)
			}
		})
	}
}

func TestChatErrorBodyNotJSON(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Fault{Status: http.StatusBadGateway, Body: "<html>bad gateway</html>"})
	c := newClient(t, srv, nil)
	_, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
	var se *openai.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusBadGateway || !strings.Contains(se.Message, "bad gateway") {
		t.Errorf("error = %v, want a 502 StatusError with the body", err)
	}
}

func TestChatGarbageBody(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Garbage{})
	c := newClient(t, srv, nil)
	_, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
	if err == nil {
		t.Fatal("Chat succeeded on garbage")
	}
	var hs httpStatus
	if errors.Is(err, llm.ErrEmptyReply) || errors.As(err, &hs) {
		t.Errorf("error = %v, want a decoding error", err)
	}
}

func TestChatNoChoiceIsEmptyReply(t *testing.T) {
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

func TestChatSlowReplyReleased(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	arrived, release := make(chan struct{}), make(chan struct{})
	srv.Script(llmtest.Slow{Arrived: arrived, Release: release, Then: llmtest.Reply{Content: "late"}})
	c := newClient(t, srv, nil)
	go func() {
		<-arrived
		close(release)
	}()
	resp, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
	if err != nil || resp.Message.Content != "late" {
		t.Errorf("Chat = %q, %v; want the released reply", resp.Message.Content, err)
	}
}

func TestChatAPIKeyNotInErrors(t *testing.T) {
	const key = "sk-secret-0123456789"
	t.Run("echoed by a 401", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.Options{APIKey: "sk-the-right-one"})
		c := newClient(t, srv, func(o *openai.Options) { o.APIKey = key })
		_, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
		var se *openai.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
			t.Fatalf("error = %v, want a 401 StatusError", err)
		}
		if strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "Incorrect API key provided: [redacted]") {
			t.Errorf("error %q leaks the key or lost the message", err)
		}
	})
	t.Run("echoed in a plain body", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.Options{})
		srv.Script(llmtest.Fault{Status: http.StatusForbidden, Body: "denied for Bearer " + key})
		c := newClient(t, srv, func(o *openai.Options) { o.APIKey = key })
		_, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
		if err == nil || strings.Contains(err.Error(), key) {
			t.Errorf("error %v leaks the key", err)
		}
	})
	t.Run("transport error", func(t *testing.T) {
		c, err := openai.New(openai.Options{BaseURL: "http://127.0.0.1:1/v1", APIKey: key, Model: model})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Chat(t.Context(), llm.Request{Messages: conversation()})
		if err == nil || strings.Contains(err.Error(), key) {
			t.Errorf("error %v leaks the key", err)
		}
	})
}

func TestChatRejectsBadMessages(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	c := newClient(t, srv, nil)
	bad := [][]llm.Message{
		{{Role: "wizard", Content: "hi"}},
		{{Role: llm.ToolRole, Content: "result"}},
	}
	for _, msgs := range bad {
		if _, err := c.Chat(t.Context(), llm.Request{Messages: msgs}); err == nil {
			t.Errorf("Chat(%+v) succeeded", msgs)
		}
	}
	if _, err := c.Chat(t.Context(), llm.Request{Messages: conversation(),
		Tools: []llm.Tool{{Name: "t", Parameters: []byte(`[1]`)}}}); err == nil {
		t.Error("Chat with a non-object schema succeeded")
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("requests = %d, want none sent", n)
	}
}

func TestNewValidates(t *testing.T) {
	bad := []openai.Options{
		{BaseURL: "http://localhost:1234/v1"},
		{Model: "m", BaseURL: "localhost:1234"},
		{Model: "m", BaseURL: "ftp://x/v1"},
		{Model: "m", MaxTokens: -1},
	}
	for _, o := range bad {
		if _, err := openai.New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

// A request over the context window, as OpenAI answers it (HTTP 400, code
// context_length_exceeded) and as vLLM does (a 400 whose message names the
// maximum context length), is llm.ErrContextLength; another 400 is not.
func TestContextLengthExceeded(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       bool
	}{
		{"openai", `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, true},
		{"vllm", `{"object":"error","message":"This model's maximum context length is 16384 tokens. However, you requested 17000 tokens (15000 in the messages, 2000 in the completion).","type":"BadRequestError","param":null,"code":400}`, true},
		{"other 400", `{"error":{"message":"Invalid value for 'messages'","type":"invalid_request_error","code":"invalid_value"}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			srv.Script(llmtest.Fault{Status: http.StatusBadRequest, Body: tc.body})
			c := newClient(t, srv, nil)
			_, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
			if got := errors.Is(err, llm.ErrContextLength); got != tc.want {
				t.Errorf("errors.Is(%v, ErrContextLength) = %v, want %v", err, got, tc.want)
			}
		})
	}
}
