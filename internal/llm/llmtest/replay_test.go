package llmtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/openai"
	"github.com/coding-agent/coding-agent/internal/llm/record"
)

// writeRecording writes entries as a recording in a temporary folder.
func writeRecording(t *testing.T, entries ...record.Entry) string {
	t.Helper()
	var b strings.Builder
	for _, e := range entries {
		e.V = record.Version
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "model.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const reply = `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hello"}}]}`

// A replayed attempt that got no answer, and one whose answer broke off,
// fail as they did (the retry layer tries again); the other task's lines
// and the lines outside a task are not replayed; the answer that came is
// given as it was.
func TestReplayGivesEachAttemptAsItWent(t *testing.T) {
	const task = "github:acme/app#3"
	path := writeRecording(t,
		record.Entry{Wire: record.WireOpenAI, Method: "GET", Path: "/v1/models", Status: 200, Response: `{"data":[]}`},
		record.Entry{Task: task, Wire: record.WireOpenAI, Error: "read: connection reset by peer"},
		record.Entry{Task: "github:acme/app#4", Wire: record.WireOpenAI, Status: 200, Response: "other task"},
		record.Entry{Task: task, Wire: record.WireOpenAI, Status: 200, ContentType: "application/json",
			Response: reply[:40], Error: "unexpected EOF"},
		record.Entry{Task: task, Wire: record.WireOpenAI, Status: 200, ContentType: "application/json", Response: reply},
	)
	srv := llmtest.NewServer(t, llmtest.Options{})
	if got := srv.ScriptRecording(path, task); len(got) != 3 {
		t.Fatalf("%d lines scripted, want the task's 3", len(got))
	}
	hc := httpx.NewClient(httpx.Options{RetryUnsafe: true, JSON: true,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	m, err := openai.New(openai.Options{BaseURL: srv.OpenAIURL(), Model: "m", HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "hi"}}})
	if err != nil || resp.Message.Content != "hello" {
		t.Fatalf("%+v, %v", resp, err)
	}
	if n := len(srv.Requests()); n != 3 || srv.Remaining() != 0 {
		t.Errorf("%d requests, %d answers left; want 3 and none", n, srv.Remaining())
	}
}

// A broken-off answer reaches the client as far as it was recorded and
// then ends in an error; a recording made on one wire refuses the other.
func TestReplayDropsAndWires(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Raw{Status: 200, ContentType: "text/event-stream", Body: []byte("data: {\"a\""), Drop: true})
	resp, err := http.Post(srv.OpenAIURL()+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m",`+userOnly+`}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "data: {\"a\"" || !errors.Is(err, io.ErrUnexpectedEOF) || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("body %q, %v, content type %q; want the part, then unexpected EOF", body, err, resp.Header.Get("Content-Type"))
	}

	rec := &recTB{TB: t}
	other := llmtest.NewServer(rec, llmtest.Options{})
	other.Script(llmtest.Raw{Wire: llmtest.WireOllama, Status: 200, Body: []byte(reply)})
	if code, _ := post(t, other.OpenAIURL()+"/chat/completions", `{"model":"m",`+userOnly+`}`); code != 500 {
		t.Errorf("status %d, want 500", code)
	}
	if errs := rec.errors(); len(errs) != 1 || !strings.Contains(errs[0], "of the ollama wire") {
		t.Errorf("errors %q, want the wire named", errs)
	}
}
