// Package wire reads model servers' answers as they are really sent, below
// the retry layer: an error in a 200 becomes an error answer the retries
// see, and an event stream no one asked for becomes the one answer.
package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/llm"
)

// maxAnswer is the largest answer read whole to be looked at; a larger one
// is passed on as it came.
const maxAnswer = 32 << 20

// AnswerTransport reads model servers' answers as they are really sent. It
// sits below the retry layer (httpx: the Base of its transport), so that
// what it makes of an answer is retried or read like any other:
//
//   - a 200 whose body holds only an error ({"error": ...} with no choices
//     and no message, as OpenAI-compatible servers, proxies in front of them
//     and Ollama's /api/chat send one) becomes a 502 with the same body and
//     the llm.ErrorInBody header: retried like any 5xx, and when the retries are
//     spent the provider quotes the server's message;
//   - an event stream of chat.completion.chunk objects (a server that
//     streams although no stream was asked for) becomes the one
//     chat.completion it adds up to, so that it is read on the first
//     attempt; an error event in it is an error answer as above, and a
//     stream cut before its end is a read failure, retried;
//   - JSON lines (Ollama's chunks) labelled as one JSON document are
//     labelled application/x-ndjson, so that the retry layer checks them
//     line by line instead of refusing them.
//
// Answers other than a 200, and those it finds nothing wrong with, are
// passed on unchanged.
type AnswerTransport struct {
	Next http.RoundTripper // nil: http.DefaultTransport
}

// RoundTrip sends req and reads the answer as the type says.
func (t AnswerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || req.Method == http.MethodHead ||
		resp.Header.Get("Content-Encoding") != "" { // compressed and left so: not ours to read
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		resp.Body.Close()
		return nil, httpx.ReadFailed(err)
	}
	if len(body) > maxAnswer {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return resp, nil
	}
	resp.Body.Close()
	return answer(resp, body)
}

// answer makes resp carry body, read as the type says.
func answer(resp *http.Response, body []byte) (*http.Response, error) {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	trimmed := bytes.TrimSpace(body)
	switch {
	case mt == "text/event-stream" || eventLike(trimmed):
		whole, failed, err := assemble(body)
		switch {
		case err != nil:
			return nil, err
		case failed != nil:
			return errorAnswer(resp, failed), nil
		case whole != nil:
			resp.Header.Set("Content-Type", "application/json")
			return withBody(resp, whole), nil
		}
	case errorOnly(trimmed):
		return errorAnswer(resp, trimmed), nil
	case len(trimmed) > 0 && !json.Valid(trimmed):
		if lines, failed := jsonLines(trimmed); failed != nil {
			return errorAnswer(resp, failed), nil
		} else if lines && mt != "application/x-ndjson" {
			resp.Header.Set("Content-Type", "application/x-ndjson")
		}
	}
	return withBody(resp, body), nil
}

// eventLike reports whether body begins as an event stream does, whatever
// its type says: a comment or a field of the stream's.
func eventLike(body []byte) bool {
	if bytes.HasPrefix(body, []byte(":")) {
		return true
	}
	field, _, ok := bytes.Cut(body, []byte(":"))
	switch string(field) {
	case "data", "event", "error", "id", "retry":
		return ok
	}
	return false
}

// jsonLines reports whether body is one JSON document per line, and the
// first of them that holds only an error (nil when none does).
func jsonLines(body []byte) (bool, []byte) {
	for line := range bytes.SplitSeq(body, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if !json.Valid(line) {
			return false, nil
		}
		if errorOnly(line) {
			return true, line
		}
	}
	return true, nil
}

// errorOnly reports whether doc is an error answer: an object with an
// "error" that is not empty (or vLLM's {"object": "error", "message": ...})
// and no answer beside it (no choices, no message object).
func errorOnly(doc []byte) bool {
	if len(doc) == 0 || doc[0] != '{' {
		return false
	}
	var f map[string]json.RawMessage
	if json.Unmarshal(doc, &f) != nil {
		return false
	}
	if filled(f["choices"]) || (len(f["message"]) > 0 && f["message"][0] == '{') {
		return false
	}
	return filled(f["error"]) || string(f["object"]) == `"error"`
}

// filled reports whether a JSON value holds something: not absent, null,
// "", {} or [].
func filled(v json.RawMessage) bool {
	switch string(bytes.Join(bytes.Fields(v), nil)) {
	case "", "null", `""`, "{}", "[]":
		return false
	}
	return true
}

// errorAnswer turns a 200 carrying an error into a 502 carrying it, which
// the retry layer retries and the providers read as an error answer.
func errorAnswer(resp *http.Response, body []byte) *http.Response {
	resp.Header.Set(llm.ErrorInBody, strconv.Itoa(resp.StatusCode))
	resp.Header.Set("Content-Type", "application/json")
	resp.StatusCode = http.StatusBadGateway
	resp.Status = "502 Bad Gateway"
	return withBody(resp, body)
}

func withBody(resp *http.Response, body []byte) *http.Response {
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	resp.TransferEncoding = nil
	return resp
}
