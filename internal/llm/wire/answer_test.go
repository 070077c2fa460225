package wire_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/wire"
)

// canned answers every request with one status, content type and body.
type canned struct {
	status      int
	contentType string
	body        string
}

func (c canned) RoundTrip(req *http.Request) (*http.Response, error) {
	h := http.Header{}
	if c.contentType != "" {
		h.Set("Content-Type", c.contentType)
	}
	return &http.Response{StatusCode: c.status, Status: http.StatusText(c.status), Header: h,
		Body: io.NopCloser(strings.NewReader(c.body)), Request: req}, nil
}

func roundTrip(t *testing.T, c canned) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://model.test/v1/chat/completions", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := wire.AnswerTransport{Next: c}.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b), nil
}

// The error answers servers send with status 200 become 502s carrying the
// same body and saying so; answers beside an "error" field stay answers.
func TestAnswerTransportErrorInBody(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		isError    bool
	}{
		{"openai-style object", `{"error": {"message": "Upstream provider failed", "type": "server_error", "code": 502}}`, true},
		{"ollama string", `{"error": "model runner has unexpectedly stopped"}`, true},
		{"vllm object", `{"object": "error", "message": "The model is overloaded", "type": "ServiceUnavailable", "code": 503}`, true},
		{"empty choices beside the error", `{"choices": [], "error": {"message": "blocked"}}`, true},
		{"ollama error line after a chunk", "{\"message\":{\"role\":\"assistant\",\"content\":\"he\"},\"done\":false}\n{\"error\":\"out of memory\"}\n", true},
		{"answer with a null error", `{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}], "error": null}`, false},
		{"ollama answer", `{"model": "m", "message": {"role": "assistant", "content": "hi"}, "done": true}`, false},
		{"empty error", `{"error": "", "choices": []}`, false},
		{"not JSON", `<html>proxy login</html>`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, err := roundTrip(t, canned{status: 200, contentType: "application/json", body: tc.body})
			if err != nil {
				t.Fatal(err)
			}
			got := resp.StatusCode == http.StatusBadGateway && resp.Header.Get(llm.ErrorInBody) == "200"
			if got != tc.isError {
				t.Fatalf("status %d, %s %q; want an error answer: %v", resp.StatusCode, llm.ErrorInBody, resp.Header.Get(llm.ErrorInBody), tc.isError)
			}
			if tc.isError && !strings.Contains(tc.body, body) {
				t.Errorf("body %q, want the error document of %q", body, tc.body)
			}
			if !tc.isError && body != tc.body {
				t.Errorf("body %q changed", body)
			}
		})
	}
}

// An answer with another status is not looked at.
func TestAnswerTransportLeavesErrorsAlone(t *testing.T) {
	resp, body, err := roundTrip(t, canned{status: 500, contentType: "application/json", body: `{"error": "boom"}`})
	if err != nil || resp.StatusCode != 500 || resp.Header.Get(llm.ErrorInBody) != "" || body != `{"error": "boom"}` {
		t.Errorf("got %v, %d, %q", err, resp.StatusCode, body)
	}
}

// Chunks of a chat completion, as servers stream them, add up to the
// completion a non-streamed answer would have been.
func TestAnswerTransportAssemblesEventStream(t *testing.T) {
	stream := strings.Join([]string{
		`: keep-alive`,
		``,
		`data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		``,
		`data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"Let me "},"finish_reason":null}]}`,
		``,
		`data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"think."},"finish_reason":null}]}`,
		``,
		`data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"Reading "},"finish_reason":null}]}`,
		``,
		`data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"both."},"finish_reason":null}]}`,
		``,
		`data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read","arguments":""}}]},"finish_reason":null}]}`,
		``,
		`data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"read","arguments":"{\"pa"}}]},"finish_reason":null}]}`,
		``,
		`data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\": \"a.go\"}"}}]},"finish_reason":null}]}`,
		``,
		`data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"th\": \"b.go\"}"}}]},"finish_reason":null}]}`,
		``,
		`data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		``,
		`data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42}}`,
		``,
		`data: [DONE]`,
		``,
	}, "\r\n")
	resp, body, err := roundTrip(t, canned{status: 200, contentType: "text/event-stream; charset=utf-8", body: stream})
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" || resp.StatusCode != 200 {
		t.Errorf("status %d, content type %q; want a 200 of JSON", resp.StatusCode, ct)
	}
	want := `{"id":"c1","object":"chat.completion","created":7,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
		"message":{"role":"assistant","content":"Reading both.","reasoning_content":"Let me think.","tool_calls":[
			{"id":"call_a","type":"function","function":{"name":"read","arguments":"{\"path\": \"a.go\"}"}},
			{"id":"call_b","type":"function","function":{"name":"read","arguments":"{\"path\": \"b.go\"}"}}]}}],
		"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42}}`
	sameJSON(t, want, body)
}

// Servers that leave out the index of a call's deltas, send the name in
// pieces or the arguments as an object, or send whole messages in their
// chunks, are read too.
func TestAnswerTransportLooseChunks(t *testing.T) {
	stream := "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"x1\",\"function\":{\"name\":\"fs__\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"read\",\"arguments\":{\"path\":\"a\"}}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"x2\",\"function\":{\"name\":\"fs__list\",\"arguments\":\"{}\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":1,\"message\":{\"content\":\"second choice\"},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
	_, body, err := roundTrip(t, canned{status: 200, contentType: "application/json", body: stream})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"","object":"chat.completion","created":0,"model":"","choices":[
		{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"x1","type":"function","function":{"name":"fs__read","arguments":"{\"path\":\"a\"}"}},
			{"id":"x2","type":"function","function":{"name":"fs__list","arguments":"{}"}}]}},
		{"index":1,"finish_reason":"stop","message":{"role":"assistant","content":"second choice"}}]}`
	sameJSON(t, want, body)
}

// An error in a stream, in each of the forms servers send it, is an error
// answer; a stream cut before its end is a failure to read, which the
// retry layer retries.
func TestAnswerTransportEventStreamErrors(t *testing.T) {
	first := `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}` + "\n\n"
	for _, tc := range []struct{ name, stream, want string }{
		{"data object", first + `data: {"error":{"message":"quota exceeded","type":"insufficient_quota"}}` + "\n\ndata: [DONE]\n\n",
			`{"error":{"message":"quota exceeded","type":"insufficient_quota"}}`},
		{"llama.cpp error field", `error: {"code":400,"message":"the request exceeds the available context size","type":"invalid_request_error"}` + "\n\ndata: [DONE]\n\n",
			`{"error":{"code":400,"message":"the request exceeds the available context size","type":"invalid_request_error"}}`},
		{"error event", first + "event: error\ndata: upstream connection lost\n\n", `{"error":"upstream connection lost"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, err := roundTrip(t, canned{status: 200, contentType: "text/event-stream", body: tc.stream})
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(llm.ErrorInBody) != "200" {
				t.Errorf("status %d, want an error answer", resp.StatusCode)
			}
			sameJSON(t, tc.want, body)
		})
	}
	t.Run("cut", func(t *testing.T) {
		_, _, err := roundTrip(t, canned{status: 200, contentType: "text/event-stream", body: first})
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("error %v, want a cut read", err)
		}
	})
	t.Run("not chunks", func(t *testing.T) {
		_, body, err := roundTrip(t, canned{status: 200, contentType: "text/event-stream", body: "data: hello\n\n"})
		if err != nil || body != "data: hello\n\n" {
			t.Errorf("got %q, %v; want the stream passed on for the retry layer to refuse", body, err)
		}
	})
}

// JSON lines labelled as one JSON document are labelled as lines.
func TestAnswerTransportLabelsJSONLines(t *testing.T) {
	lines := "{\"message\":{\"role\":\"assistant\",\"content\":\"he\"},\"done\":false}\n{\"message\":{\"role\":\"assistant\",\"content\":\"llo\"},\"done\":true}\n"
	resp, body, err := roundTrip(t, canned{status: 200, contentType: "application/json; charset=utf-8", body: lines})
	if err != nil || body != lines || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Errorf("got %v, %q, %q", err, resp.Header.Get("Content-Type"), body)
	}
}

func sameJSON(t *testing.T, want, got string) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want: %v", err)
	}
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got %s: %v", got, err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
}
