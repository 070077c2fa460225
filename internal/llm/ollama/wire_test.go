package ollama_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/ollama"
)

// The wire as Ollama really speaks it, through the client the daemon
// builds: the retry layer over wire.AnswerTransport.

func withRetries(o *ollama.Options) { o.HTTPClient = llmtest.Retrying(nil) }

// /api/chat's error answer sent with status 200, alone or after a first
// chunk, is retried like a 5xx, and the error quotes the server's message.
func TestChatErrorIn200IsTheServersError(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"alone", `{"error":"model runner has unexpectedly stopped, this may be due to resource limitations"}`},
		{"after a chunk", `{"model":"qwen-test","created_at":"2023-11-14T22:13:20Z","message":{"role":"assistant","content":"Sure"},"done":false}` +
			"\n" + `{"error":"model runner has unexpectedly stopped, this may be due to resource limitations"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			for range 4 {
				srv.Script(llmtest.Garbage{Body: tc.body})
			}
			c := newClient(t, srv, withRetries)
			_, err := c.Chat(t.Context(), llm.Request{Messages: conversation()})
			want := "ollama chat (model qwen-test): the server answered status 200 with an error: " +
				"model runner has unexpectedly stopped, this may be due to resource limitations"
			if err == nil || err.Error() != want {
				t.Errorf("error %v\nwant  %s", err, want)
			}
			var se *ollama.StatusError
			if !errors.As(err, &se) || !se.InBody || se.HTTPStatus() != http.StatusOK {
				t.Errorf("error %#v: want a StatusError in the body of a 200", err)
			}
			if n := len(srv.Requests()); n != 4 {
				t.Errorf("requests = %d, want 4: retried 3 times", n)
			}
		})
	}
}

// Chunks answered to stream:false, labelled as JSON lines (as Ollama
// labels them) or as one JSON document, are read on the first attempt into
// the response the answer unstreamed gives.
func TestChatStreamedAnswerIsRead(t *testing.T) {
	reply := llmtest.Reply{Content: "Reading it. ÄÖÜ", Reasoning: "The user wants main.go.",
		ToolCalls: []llmtest.Call{{Name: "fs__read_file", Args: map[string]any{"path": "main.go"}}},
		Usage:     llmtest.Usage{In: 50, Out: 12}}
	for _, contentType := range []string{"", "application/json; charset=utf-8"} {
		t.Run("type "+contentType, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			srv.Script(reply, llmtest.Streamed{Reply: reply, ContentType: contentType})
			c := newClient(t, srv, withRetries)
			plain, err := c.Chat(t.Context(), llm.Request{Messages: conversation(), Tools: []llm.Tool{readFile}})
			if err != nil {
				t.Fatal(err)
			}
			streamed, err := c.Chat(t.Context(), llm.Request{Messages: conversation(), Tools: []llm.Tool{readFile}})
			if err != nil {
				t.Fatalf("streamed: %v", err)
			}
			if diff := cmp.Diff(plain, streamed); diff != "" {
				t.Errorf("streamed response (-plain +streamed):\n%s", diff)
			}
			r := srv.Requests()
			if len(r) != 2 || r[1].Stream {
				t.Errorf("%d requests, stream asked %v; want 2, no stream asked", len(r), r[len(r)-1].Stream)
			}
		})
	}
}

// An empty call beside a final answer is no call.
func TestChatIgnoresEmptyCall(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{Content: `{"done": true, "comment": "Fixed."}`, ToolCalls: []llmtest.Call{{}}})
	c := newClient(t, srv, nil)
	got, err := c.Chat(t.Context(), llm.Request{Messages: conversation(), Tools: []llm.Tool{readFile}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Message.ToolCalls) != 0 || got.Message.Content != `{"done": true, "comment": "Fixed."}` {
		t.Errorf("message %+v, want the answer without calls", got.Message)
	}
}

// A conversation holding a call without a name (an older checkpoint) is
// sent without it and without the tool message answering it.
func TestChatSendsNoNamelessCall(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{Content: "ok"})
	c := newClient(t, srv, nil)
	history := append(conversation(),
		llm.Message{Role: llm.Assistant, ToolCalls: []llm.ToolCall{
			{ID: "call_3_0", Arguments: json.RawMessage(`{}`)},
			{ID: "call_3_1", Name: "fs__read_file", Arguments: json.RawMessage(`{"path":"a"}`)},
		}},
		llm.Message{Role: llm.ToolRole, ToolCallID: "call_3_0", Content: "unknown tool"},
		llm.Message{Role: llm.ToolRole, ToolCallID: "call_3_1", Content: "package a"},
	)
	if _, err := c.Chat(t.Context(), llm.Request{Messages: history, Tools: []llm.Tool{readFile}}); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	sent := srv.Requests()[0].Messages
	if len(sent) != 4 || len(sent[2].ToolCalls) != 1 || sent[3].Content != "package a" || sent[3].Name != "fs__read_file" {
		t.Errorf("sent %+v", sent)
	}
}
