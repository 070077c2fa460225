// Package llmtest is a scripted model server for tests: one httptest server
// that speaks OpenAI chat completions (POST /v1/chat/completions) and
// Ollama's native chat (POST /api/chat), answers each request with the next
// step of a script (a reply, a fault, garbage, an empty answer, a slow one,
// one that stalls mid-body, or a stream nobody asked for), and records every
// request decoded into llm terms.
//
// A request that finds the script exhausted (and no Responder) is answered
// 500 and fails the test, so a test that over-calls the model fails. So does
// a request that is not valid for its wire format, or one to an unknown path.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/coding-agent/coding-agent/internal/llm"
)

// Wire formats, as recorded in Received.Wire.
const (
	WireOpenAI = "openai"
	WireOllama = "ollama"
)

// Options configures a Server. The zero value is a server that only replays
// its script.
type Options struct {
	// Responder answers requests once the script is exhausted; returning
	// nil counts as exhaustion. It runs on the server's goroutines.
	Responder func(Received) Step
	// APIKey, when set, is the only key OpenAI-wire requests may carry
	// ("Authorization: Bearer <key>"). Others are answered 401 with an
	// error message that quotes the key received, as a careless provider
	// might; such requests are recorded but consume no step.
	APIKey string
	// Models are listed by GET /v1/models and GET /api/tags; nil means
	// {"test-model"}.
	Models []string
	// EnforceFormat makes the server enforce a request's reply schema
	// (Received.Format) as a grammar would: a Reply whose content does
	// not match it fails the test (the model could not have written it)
	// and is answered 500.
	EnforceFormat bool
	// HonourToolChoice makes the server honour tool_choice "required": a
	// Reply without a tool call to such a request fails the test and is
	// answered 500.
	HonourToolChoice bool
	// MistralToolCallIDs refuses, on the OpenAI wire, a request holding a
	// tool call id that is not nine letters and digits, as vLLM serving a
	// Mistral model does (400, "Tool call id was call_3_0 but must be a-z,
	// A-Z, 0-9, with a length of 9."). Such requests are recorded but
	// consume no step.
	MistralToolCallIDs bool
}

// Received is one chat request, decoded into llm terms.
type Received struct {
	N        int    // 1-based request number across both wire formats
	Wire     string // WireOpenAI or WireOllama
	Path     string
	Header   http.Header
	Model    string
	Messages []llm.Message
	// ToolNames are the names of the tools offered, in order. Nil when the
	// request had no tools field at all; empty (not nil) when the field was
	// present but empty or null.
	ToolNames []string
	Tools     []llm.Tool
	// MaxTokens is max_completion_tokens or max_tokens (OpenAI) or
	// options.num_predict (Ollama); 0 when absent.
	MaxTokens int
	// Options is Ollama's options object (num_ctx, num_predict, ...).
	Options map[string]any
	Stream  bool   // Ollama: true unless "stream": false was sent
	Body    []byte // the raw request body
	// Format is the JSON schema the reply must match: Ollama's format when
	// it is a schema, or OpenAI's response_format.json_schema.schema; nil
	// when none was sent.
	Format json.RawMessage
	// ToolChoice is OpenAI's tool_choice when it is a string ("required",
	// "auto", "none"), or its JSON when it names a function; "" when none
	// was sent. Ollama's API has none.
	ToolChoice string
}

// Server is a scripted model server. Its methods are safe for concurrent use.
type Server struct {
	t    testing.TB
	opts Options
	ts   *httptest.Server
	done chan struct{} // closed at cleanup: releases Slow steps

	mu       sync.Mutex
	script   []Step
	next     int
	received []Received
}

// NewServer starts a server that is closed when the test ends.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Models == nil {
		opts.Models = []string{"test-model"}
	}
	s := &Server{t: t, opts: opts, done: make(chan struct{})}
	s.ts = httptest.NewServer(s.routes())
	t.Cleanup(func() {
		close(s.done)
		s.ts.Close()
	})
	return s
}

// URL is the server root: Ollama's endpoint.
func (s *Server) URL() string { return s.ts.URL }

// OpenAIURL is the OpenAI base URL, URL()+"/v1".
func (s *Server) OpenAIURL() string { return s.ts.URL + "/v1" }

// Script appends steps; each chat request consumes the next one.
func (s *Server) Script(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, steps...)
}

// Requests returns the chat requests received so far, in arrival order.
func (s *Server) Requests() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.received)
}

// Remaining is the number of scripted steps not consumed yet.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script) - s.next
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat(openaiWire{}))
	mux.HandleFunc("POST /api/chat", s.chat(ollamaWire{}))
	mux.HandleFunc("GET /v1/models", s.listOpenAIModels)
	mux.HandleFunc("GET /api/tags", s.listOllamaModels)
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": "0.34.0"})
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "Ollama is running")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.t.Errorf("llmtest: unexpected request %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	return mux
}

// wire is one wire format: how requests decode and answers encode.
type wire interface {
	name() string
	// decode fills the model, messages, tools and limits of rec from body,
	// or says why the request is invalid for the wire format.
	decode(body []byte, rec *Received) error
	reply(w http.ResponseWriter, rec Received, r Reply) error
	empty(w http.ResponseWriter, rec Received)
	errorBody(msg string) string
	garbage() string
	// stream answers a Streamed step.
	stream(w http.ResponseWriter, rec Received, st Streamed) error
}

func (s *Server) chat(wf wire) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			s.t.Errorf("llmtest: reading %s request body: %v", wf.name(), err)
			return
		}
		rec := Received{Wire: wf.name(), Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
		decErr := wf.decode(body, &rec)
		s.mu.Lock()
		rec.N = len(s.received) + 1
		s.received = append(s.received, rec)
		s.mu.Unlock()

		if decErr != nil {
			msg := fmt.Sprintf("llmtest: request %d (%s) is invalid: %v", rec.N, wf.name(), decErr)
			s.t.Errorf("%s", msg)
			writeRaw(w, http.StatusBadRequest, wf.errorBody(msg))
			return
		}
		if wf.name() == WireOpenAI && s.opts.APIKey != "" {
			if got := bearer(r); got != s.opts.APIKey {
				msg := fmt.Sprintf("Incorrect API key provided: %s.", got)
				writeRaw(w, http.StatusUnauthorized, wf.errorBody(msg))
				return
			}
		}
		if wf.name() == WireOpenAI && s.opts.MistralToolCallIDs {
			if msg := mistralIDs(rec.Messages); msg != "" {
				writeRaw(w, http.StatusBadRequest, vllmError(msg))
				return
			}
		}
		step := s.nextStep(rec)
		if step == nil {
			msg := fmt.Sprintf("llmtest: script exhausted: request %d (%s %s) has no scripted step",
				rec.N, wf.name(), r.URL.Path)
			s.t.Errorf("%s", msg)
			writeRaw(w, http.StatusInternalServerError, wf.errorBody(msg))
			return
		}
		s.answer(w, r, wf, rec, step)
	}
}

func (s *Server) nextStep(rec Received) Step {
	s.mu.Lock()
	if s.next < len(s.script) {
		st := s.script[s.next]
		s.next++
		s.mu.Unlock()
		return st
	}
	s.mu.Unlock()
	if s.opts.Responder != nil {
		return s.opts.Responder(rec)
	}
	return nil
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, wf wire, rec Received, step Step) {
	switch st := step.(type) {
	case Reply:
		if why := s.refused(rec, st); why != "" {
			msg := fmt.Sprintf("llmtest: request %d: %s", rec.N, why)
			s.t.Errorf("%s", msg)
			writeRaw(w, http.StatusInternalServerError, wf.errorBody(msg))
			return
		}
		if err := wf.reply(w, rec, st); err != nil {
			s.t.Errorf("llmtest: request %d: %v", rec.N, err)
		}
	case Fault:
		status, body := st.Status, st.Body
		if status == 0 {
			status = http.StatusInternalServerError
		}
		if body == "" && !st.NoBody {
			body = wf.errorBody(fmt.Sprintf("llmtest: scripted fault %d at request %d", status, rec.N))
		}
		if st.RetryAfter != "" {
			w.Header().Set("Retry-After", st.RetryAfter)
		}
		writeRaw(w, status, body)
	case Garbage:
		body := st.Body
		if body == "" {
			body = wf.garbage()
		}
		writeRaw(w, http.StatusOK, body)
	case Empty:
		wf.empty(w, rec)
	case Slow:
		s.slow(w, r, wf, rec, st)
	case Stall:
		s.stall(w, r, wf, rec, st)
	case Raw:
		s.raw(w, rec, st)
	case Streamed:
		if err := wf.stream(w, rec, st); err != nil {
			s.t.Errorf("llmtest: request %d: %v", rec.N, err)
		}
	default:
		s.t.Errorf("llmtest: request %d: unknown step type %T", rec.N, step)
		writeRaw(w, http.StatusInternalServerError, wf.errorBody("llmtest: unknown step"))
	}
}

// refused says why a server that enforces what rec asks for could not have
// answered r ("" when it could).
func (s *Server) refused(rec Received, r Reply) string {
	if s.opts.EnforceFormat && rec.Format != nil {
		if err := Matches(rec.Format, r.Content); err != nil {
			return fmt.Sprintf("the scripted reply does not match the reply schema the request sent, "+
				"so a server enforcing it could not have answered it: %v\ncontent: %s\nschema: %s", err, r.Content, rec.Format)
		}
	}
	if s.opts.HonourToolChoice && rec.ToolChoice == "required" && len(rec.Tools) > 0 && len(r.ToolCalls) == 0 {
		return "the scripted reply calls no tool, and the request sent tool_choice \"required\""
	}
	return ""
}

func (s *Server) slow(w http.ResponseWriter, r *http.Request, wf wire, rec Received, st Slow) {
	if st.Arrived != nil {
		close(st.Arrived)
	}
	select {
	case <-r.Context().Done():
	case <-s.done:
		panic(http.ErrAbortHandler) // the test is over: drop the connection unanswered
	case <-st.Release:
		then := st.Then
		if then == nil {
			then = Reply{}
		}
		s.answer(w, r, wf, rec, then)
	}
}

func (s *Server) stall(w http.ResponseWriter, r *http.Request, wf wire, rec Received, st Stall) {
	then := st.Then
	if then == nil {
		then = Reply{}
	}
	whole := httptest.NewRecorder()
	s.answer(whole, r, wf, rec, then)
	for k, v := range whole.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(whole.Code)
	body := whole.Body.Bytes()
	_, _ = w.Write(body[:len(body)/2])
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if st.Arrived != nil {
		close(st.Arrived)
	}
	select {
	case <-r.Context().Done():
	case <-s.done:
		panic(http.ErrAbortHandler) // the test is over: drop the connection
	}
}

func (s *Server) listOpenAIModels(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	data := make([]model, 0, len(s.opts.Models))
	for _, m := range s.opts.Models {
		data = append(data, model{ID: m, Object: "model", Created: created, OwnedBy: "llmtest"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) listOllamaModels(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		Name       string `json:"name"`
		Model      string `json:"model"`
		ModifiedAt string `json:"modified_at"`
		Size       int64  `json:"size"`
	}
	models := make([]model, 0, len(s.opts.Models))
	for _, m := range s.opts.Models {
		models = append(models, model{Name: m, Model: m, ModifiedAt: createdAt, Size: 1})
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": models})
}
