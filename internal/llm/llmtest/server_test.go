package llmtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
)

// recTB records the errors the server reports instead of failing the test.
type recTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recTB) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

const userOnly = `"messages":[{"role":"user","content":"hi"}]`

func TestExhaustedScriptFailsTheTest(t *testing.T) {
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m",` + userOnly + `}`},
		{"/api/chat", `{"model":"m","stream":false,` + userOnly + `}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			rec := &recTB{TB: t}
			srv := llmtest.NewServer(rec, llmtest.Options{})
			srv.Script(llmtest.Reply{Content: "only one"})
			if status, _ := post(t, srv.URL()+tc.path, tc.body); status != http.StatusOK {
				t.Fatalf("first request: status %d", status)
			}
			status, body := post(t, srv.URL()+tc.path, tc.body)
			if status != http.StatusInternalServerError || !strings.Contains(body, "request 2") {
				t.Errorf("second request: %d %s; want 500 naming request 2", status, body)
			}
			errs := rec.errors()
			if len(errs) != 1 || !strings.Contains(errs[0], "script exhausted") || !strings.Contains(errs[0], "request 2") {
				t.Errorf("test errors = %q, want one naming the exhausted script at request 2", errs)
			}
		})
	}
}

func TestResponderAfterScript(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{Responder: func(r llmtest.Received) llmtest.Step {
		return llmtest.Reply{ToolCalls: []llmtest.Call{{Name: r.ToolNames[len(r.ToolNames)-1]}}}
	}})
	srv.Script(llmtest.Reply{Content: "scripted"})
	body := `{"model":"m",` + userOnly + `,"tools":[` + tool("a") + `,` + tool("b") + `]}`
	_, first := post(t, srv.OpenAIURL()+"/chat/completions", body)
	_, second := post(t, srv.OpenAIURL()+"/chat/completions", body)
	if !strings.Contains(first, `"content":"scripted"`) {
		t.Errorf("first answer %s, want the scripted step", first)
	}
	if !strings.Contains(second, `"name":"b"`) || !strings.Contains(second, `"finish_reason":"tool_calls"`) {
		t.Errorf("second answer %s, want the responder's call of b", second)
	}
	if reqs := srv.Requests(); len(reqs) != 2 || reqs[1].N != 2 {
		t.Errorf("requests = %+v", reqs)
	}
}

func tool(name string) string {
	return `{"type":"function","function":{"name":"` + name + `","parameters":{"type":"object"}}}`
}

func TestToolsAbsentDiffersFromEmpty(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{}, llmtest.Reply{}, llmtest.Reply{}, llmtest.Reply{})
	for _, extra := range []string{``, `,"tools":[]`, `,"tools":null`} {
		post(t, srv.OpenAIURL()+"/chat/completions", `{"model":"m",`+userOnly+extra+`}`)
	}
	post(t, srv.URL()+"/api/chat", `{"model":"m",`+userOnly+`,"tools":[]}`)
	reqs := srv.Requests()
	if reqs[0].ToolNames != nil {
		t.Errorf("no tools field: ToolNames = %#v, want nil", reqs[0].ToolNames)
	}
	for _, r := range reqs[1:] {
		if r.ToolNames == nil || len(r.ToolNames) != 0 {
			t.Errorf("request %d: ToolNames = %#v, want empty, not nil", r.N, r.ToolNames)
		}
	}
}

func TestOpenAIRequestDecoded(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{})
	body := `{"model":"gpt","max_completion_tokens":77,"messages":[
		{"role":"system","content":"sys"},
		{"role":"user","content":[{"type":"text","text":"part one, "},{"type":"text","text":"part two"}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"result"}]}`
	if status, answer := post(t, srv.OpenAIURL()+"/chat/completions", body); status != http.StatusOK {
		t.Fatalf("status %d: %s", status, answer)
	}
	r := srv.Requests()[0]
	want := []llm.Message{
		{Role: llm.System, Content: "sys"},
		{Role: llm.User, Content: "part one, part two"},
		{Role: llm.Assistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)}}},
		{Role: llm.ToolRole, ToolCallID: "c1", Content: "result"},
	}
	if diff := cmp.Diff(want, r.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if r.Model != "gpt" || r.MaxTokens != 77 || r.Wire != llmtest.WireOpenAI {
		t.Errorf("model %q, max tokens %d, wire %q", r.Model, r.MaxTokens, r.Wire)
	}
}

func TestInvalidRequestsFailTheTest(t *testing.T) {
	cases := map[string]string{
		"orphan tool message": `{"model":"m","messages":[{"role":"tool","tool_call_id":"nope","content":"x"}]}`,
		"bad tool name":       `{"model":"m",` + userOnly + `,"tools":[` + tool("server/tool") + `]}`,
		"no model":            `{` + userOnly + `}`,
		"not json":            `{"model":`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			rec := &recTB{TB: t}
			srv := llmtest.NewServer(rec, llmtest.Options{})
			srv.Script(llmtest.Reply{})
			if status, _ := post(t, srv.OpenAIURL()+"/chat/completions", body); status != http.StatusBadRequest {
				t.Errorf("status %d, want 400", status)
			}
			if len(rec.errors()) != 1 || srv.Remaining() != 1 {
				t.Errorf("errors %q, remaining %d: want one error and the step kept", rec.errors(), srv.Remaining())
			}
		})
	}
}

func TestUnknownPathFailsTheTest(t *testing.T) {
	rec := &recTB{TB: t}
	srv := llmtest.NewServer(rec, llmtest.Options{})
	if status, _ := post(t, srv.URL()+"/v1/completions", `{}`); status != http.StatusNotFound {
		t.Errorf("status %d, want 404", status)
	}
	if len(rec.errors()) != 1 {
		t.Errorf("errors = %q, want one", rec.errors())
	}
}

func TestFaultAnswer(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Fault{Status: http.StatusTooManyRequests, RetryAfter: "7"})
	resp, err := http.Post(srv.OpenAIURL()+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m",`+userOnly+`}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Message string } `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" ||
		!strings.Contains(body.Error.Message, "request 1") {
		t.Errorf("answer %d, Retry-After %q, message %q", resp.StatusCode, resp.Header.Get("Retry-After"), body.Error.Message)
	}
}

func TestSlowStepEndsWithTheServer(t *testing.T) {
	done := make(chan error, 1)
	t.Run("server", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.Options{})
		arrived := make(chan struct{})
		srv.Script(llmtest.Slow{Arrived: arrived})
		go func() {
			resp, err := http.Post(srv.URL()+"/api/chat", "application/json",
				strings.NewReader(`{"model":"m",`+userOnly+`}`))
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		<-arrived
	}) // the cleanup must not wait for the client
	if err := <-done; err == nil {
		t.Error("the held request got an answer, want the connection closed")
	}
}

// A Stall step sends the status, the headers and the first half of the
// answer, then nothing until the client gives up.
func TestStallStepSendsHalfAnAnswer(t *testing.T) {
	for _, path := range []string{"/v1/chat/completions", "/api/chat"} {
		t.Run(path, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			arrived := make(chan struct{})
			srv.Script(llmtest.Stall{Then: llmtest.Reply{Content: "Writing hello.txt now, as asked."}, Arrived: arrived})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL()+path,
				strings.NewReader(`{"model":"m","stream":false,`+userOnly+`}`))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			<-arrived
			buf := make([]byte, 4096)
			n, err := resp.Body.Read(buf)
			head := buf[:n]
			if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" ||
				n == 0 || head[0] != '{' || json.Valid(head) {
				t.Fatalf("first read: %d %q, %q, %v; want the start of a JSON answer", resp.StatusCode,
					resp.Header.Get("Content-Type"), head, err)
			}
			cancel() // the client gives up
			if rest, err := io.ReadAll(resp.Body); err == nil {
				t.Errorf("the rest came (%q), want the read cut", rest)
			}
		})
	}
}
