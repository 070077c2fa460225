package record_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/ollama"
	"github.com/coding-agent/coding-agent/internal/llm/openai"
	"github.com/coding-agent/coding-agent/internal/llm/record"
)

func noSleep(context.Context, time.Duration) error { return nil }

// open opens a recorder on a new file in a temporary folder (below a
// folder that does not exist yet) and closes it when the test ends.
func open(t *testing.T, o record.Options) (*record.Recorder, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "not", "yet", "model.jsonl")
	r, err := record.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, path
}

// client is the model's HTTP client as the app builds it: the retries
// over the recorder over the network.
func client(r *record.Recorder) *http.Client {
	return httpx.NewClient(httpx.Options{RetryUnsafe: true, JSON: true, Sleep: noSleep, Base: r.Transport(nil)})
}

func read(t *testing.T, path string) []record.Entry {
	t.Helper()
	return llmtest.ReadRecording(t, path)
}

// Every attempt is a line, the retried ones too, each with the answer as
// the server sent it and the request as it was sent, under the task of
// the request's context; on both wires.
func TestEveryAttemptIsALine(t *testing.T) {
	for _, wire := range []string{llmtest.WireOpenAI, llmtest.WireOllama} {
		t.Run(wire, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			srv.Script(llmtest.Fault{Status: 503, Body: `{"error": "loading model"}`},
				llmtest.Garbage{Body: `{"choices": [`},
				llmtest.Reply{Content: "hello", ToolCalls: []llmtest.Call{{Name: "test__echo", Args: map[string]string{"text": "<hi>"}}}})
			r, path := open(t, record.Options{})
			var m llm.Client
			var err error
			if wire == llmtest.WireOpenAI {
				m, err = openai.New(openai.Options{BaseURL: srv.OpenAIURL(), Model: "test-model", HTTPClient: client(r)})
			} else {
				m, err = ollama.New(ollama.Options{Endpoint: srv.URL(), Model: "test-model", HTTPClient: client(r)})
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx := llm.WithTask(t.Context(), "github:acme/app#12")
			resp, err := m.Chat(ctx, llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "say <hello> & go"}}})
			if err != nil || resp.Message.Content != "hello" {
				t.Fatalf("%+v, %v", resp, err)
			}
			lines := read(t, path)
			reqs := srv.Requests()
			if len(lines) != 3 || len(reqs) != 3 {
				t.Fatalf("%d lines, %d requests; want 3 each", len(lines), len(reqs))
			}
			wantStatus := []int{503, 200, 200}
			for i, e := range lines {
				if e.Task != "github:acme/app#12" || e.Wire != wire || e.Method != "POST" || e.Path != reqs[i].Path || e.V != record.Version {
					t.Errorf("line %d: task %q, wire %q, %s %s, v%d", i, e.Task, e.Wire, e.Method, e.Path, e.V)
				}
				if e.Status != wantStatus[i] || !strings.HasPrefix(e.ContentType, "application/json") || e.Error != "" {
					t.Errorf("line %d: status %d, content type %q, error %q", i, e.Status, e.ContentType, e.Error)
				}
				if !bytes.Equal(e.RequestBody(), compact(t, reqs[i].Body)) || e.RequestBytes != int64(len(reqs[i].Body)) {
					t.Errorf("line %d: request\n%s\nwant\n%s", i, e.RequestBody(), reqs[i].Body)
				}
			}
			if lines[0].Response != `{"error": "loading model"}` || lines[1].Response != `{"choices": [` {
				t.Errorf("responses %q, %q: not as sent", lines[0].Response, lines[1].Response)
			}
			if !strings.Contains(lines[2].Response, "test__echo") {
				t.Errorf("the reply's tool call is not in %q", lines[2].Response)
			}
			if !strings.Contains(string(lines[0].RequestBody()), "say \\u003chello\\u003e \\u0026 go") &&
				!strings.Contains(string(lines[0].RequestBody()), "say <hello> & go") {
				t.Errorf("request %s: the message is not as sent", lines[0].RequestBody())
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("file mode %v, %v; want 0600", fi.Mode(), err)
			}
		})
	}
}

func compact(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return out.Bytes()
}

// No secret reaches the file, whether the request or the answer holds it,
// and no header is written: the API key the client sends is nowhere.
func TestSecretsAreReplaced(t *testing.T) {
	const (
		apiKey = "sk-proj-Zq81hWm2Kd93LxPq0aRt"
		token  = "my-forge-token-4f9a2c7e1b"
	)
	srv := llmtest.NewServer(t, llmtest.Options{APIKey: apiKey})
	srv.Script(llmtest.Reply{Content: "the token is " + token + " and the key " + apiKey})
	r, path := open(t, record.Options{Secrets: []string{apiKey, token}})
	m, err := openai.New(openai.Options{BaseURL: srv.OpenAIURL(), APIKey: apiKey, Model: "test-model", HTTPClient: client(r)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "use " + token}}}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{apiKey, token, "Bearer", "Authorization"} {
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("the recording holds %q:\n%s", s, data)
		}
	}
	if n := bytes.Count(data, []byte("[REDACTED]")); n != 3 {
		t.Errorf("%d [REDACTED] in\n%s\nwant 3 (the request's token, the reply's token and key)", n, data)
	}
	lines := read(t, path)
	if len(lines) != 1 || len(lines[0].Request) == 0 {
		t.Fatalf("%+v: want one line whose redacted request is still JSON", lines)
	}
}

// A body larger than MaxBody is cut there, and says so; a request cut is
// kept as text (it is no longer JSON), with its size as sent.
func TestBodiesAreCapped(t *testing.T) {
	big := strings.Repeat("é", 100) // two bytes each: the cut falls inside one
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, big)
	}))
	defer ts.Close()
	r, path := open(t, record.Options{MaxBody: 51})
	body := `{"text": "` + big + `"}`
	resp, err := (&http.Client{Transport: r.Transport(nil)}).Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != big {
		t.Fatalf("the reader got %d bytes, want the whole body (%d)", len(got), len(big))
	}
	e := read(t, path)[0]
	if !e.RequestCut || e.Request != nil || e.RequestBytes != int64(len(body)) || len(e.RequestText) != 50 ||
		!strings.HasPrefix(body, e.RequestText) {
		t.Errorf("request: cut %v, json %s, %d bytes, text %q", e.RequestCut, e.Request, e.RequestBytes, e.RequestText)
	}
	if !e.ResponseCut || e.ResponseBytes != int64(len(big)) || e.Response != big[:50] {
		t.Errorf("response: cut %v, %d bytes, text %q", e.ResponseCut, e.ResponseBytes, e.Response)
	}
}

// Bytes that are not UTF-8 survive, in base64; a round trip that got no
// answer is a line with its error and no status; an answer closed before
// its end says so.
func TestOddAnswers(t *testing.T) {
	binary := []byte{0xff, 0xfe, 'x', 0x00, 0x80}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/chat":
			_, _ = w.Write(binary)
		case "/drop":
			panic(http.ErrAbortHandler)
		default:
			_, _ = w.Write(bytes.Repeat([]byte("a"), 1<<16))
		}
	}))
	defer ts.Close()
	r, path := open(t, record.Options{})
	hc := &http.Client{Transport: r.Transport(nil)}
	resp, err := hc.Get(ts.URL + "/api/chat")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, err := hc.Get(ts.URL + "/drop"); err == nil {
		t.Fatal("the dropped connection was answered")
	}
	resp, err = hc.Get(ts.URL + "/long")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = resp.Body.Read(make([]byte, 10))
	resp.Body.Close()

	lines := read(t, path)
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	if got, err := lines[0].ResponseBody(); err != nil || !bytes.Equal(got, binary) || lines[0].Response != "" || lines[0].Wire != record.WireOllama {
		t.Errorf("binary answer: %q, %v (text %q, wire %q)", got, err, lines[0].Response, lines[0].Wire)
	}
	if e := lines[1]; e.Status != 0 || e.Error == "" || e.Wire != "" {
		t.Errorf("dropped: status %d, error %q, wire %q", e.Status, e.Error, e.Wire)
	}
	if e := lines[2]; !e.ResponseUnread || e.ResponseBytes >= 1<<16 || e.Error != "" {
		t.Errorf("closed early: unread %v, %d bytes, error %q", e.ResponseUnread, e.ResponseBytes, e.Error)
	}
}

// Lines of concurrent requests never interleave: each is whole JSON.
func TestConcurrentLinesStayWhole(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	defer ts.Close()
	r, path := open(t, record.Options{})
	hc := &http.Client{Transport: r.Transport(nil)}
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx := llm.WithTask(context.Background(), fmt.Sprintf("task-%d", w))
			for i := range each {
				body := fmt.Sprintf(`{"n": %d, "pad": %q}`, i, strings.Repeat("x", 20000+w))
				req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", strings.NewReader(body))
				resp, err := hc.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	lines := read(t, path)
	if len(lines) != workers*each {
		t.Fatalf("%d lines, want %d", len(lines), workers*each)
	}
	per := map[string]int{}
	for _, e := range lines {
		if !bytes.Equal(compact(t, []byte(e.Response)), e.Request) {
			t.Fatalf("line of %s: the answer is not its request's echo", e.Task)
		}
		per[e.Task]++
	}
	for task, n := range per {
		if n != each {
			t.Errorf("%s: %d lines, want %d", task, n, each)
		}
	}
}

// A file that cannot be written is told once, and the model's requests go
// on: their answers are untouched.
func TestWriteFailureNeverFailsTheRequest(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{Content: "one"}, llmtest.Reply{Content: "two"})
	var logged bytes.Buffer
	r, _ := open(t, record.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err := r.Close(); err != nil { // every write fails from now on
		t.Fatal(err)
	}
	m, err := openai.New(openai.Options{BaseURL: srv.OpenAIURL(), Model: "test-model", HTTPClient: client(r)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"one", "two"} {
		resp, err := m.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "hi"}}})
		if err != nil || resp.Message.Content != want {
			t.Fatalf("%+v, %v; want %q", resp, err, want)
		}
	}
	if n := strings.Count(logged.String(), "cannot be written"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logged.String())
	}
}

// A file that is there already is appended to and made private.
func TestOpenAppendsAndMakesPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.jsonl")
	if err := os.WriteFile(path, []byte("{\"v\":1,\"time\":\"2026-01-01T00:00:00Z\",\"method\":\"GET\",\"path\":\"/\",\"request_bytes\":0,\"response_bytes\":0,\"duration_ms\":0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := record.Open(path, record.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer ts.Close()
	resp, err := (&http.Client{Transport: r.Transport(nil)}).Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r.Close()
	if lines := read(t, path); len(lines) != 2 || lines[1].ResponseUnread {
		t.Errorf("%+v: want the old line and a new one (an empty body is read whole)", lines)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	if _, err := record.Open(filepath.Join(path, "below-a-file.jsonl"), record.Options{}); err == nil ||
		!strings.Contains(err.Error(), "creating the folder of the model recording") {
		t.Errorf("a folder that is a file: %v", err)
	}
}

// A line of a later format is refused, naming its line.
func TestReadRefusesLaterFormats(t *testing.T) {
	_, err := record.Read(strings.NewReader(`{"v": 1, "method": "POST", "path": "/api/chat"}` + "\n" + `{"v": 99}` + "\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("%v, want line 2 refused", err)
	}
	if _, err := record.Read(strings.NewReader("{\"v\": 1}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("%v, want line 2 refused", err)
	}
}

// An event stream where JSON was asked for, and an error inside a 200, are
// kept as the server sent them, content type and all.
func TestServersOwnShapesAreKept(t *testing.T) {
	const (
		sse     = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"
		errBody = `{"error": {"message": "model 'qwen3' not found, try pulling it first"}}`
	)
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Raw{Status: 200, ContentType: "text/event-stream", Body: []byte(sse)},
		llmtest.Raw{Status: 200, ContentType: "application/json", Body: []byte(errBody)})
	r, path := open(t, record.Options{})
	hc := &http.Client{Transport: r.Transport(nil)}
	for range 2 {
		resp, err := hc.Post(srv.OpenAIURL()+"/chat/completions", "application/json",
			strings.NewReader(`{"model": "test-model", "messages": [{"role": "user", "content": "hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	lines := read(t, path)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2", len(lines))
	}
	if e := lines[0]; e.Status != 200 || e.ContentType != "text/event-stream" || e.Response != sse {
		t.Errorf("event stream: %d %q %q", e.Status, e.ContentType, e.Response)
	}
	if e := lines[1]; e.Status != 200 || e.ContentType != "application/json" || e.Response != errBody {
		t.Errorf("error in a 200: %d %q %q", e.Status, e.ContentType, e.Response)
	}
}
