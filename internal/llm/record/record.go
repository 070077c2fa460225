// Package record writes a model's HTTP traffic to a file, one JSON line per
// attempt, so that a user whose local model misbehaves can attach what the
// server really answered to a bug report, and a maintainer can replay it
// (llmtest.Server.ScriptRecording) through the engine as a test.
//
// The Recorder's transport sits below the retry layer: each attempt is one
// line, a retried 503 or a 200 whose body was garbage among them, with the
// answer as the server sent it (status, content type, body: JSON, an event
// stream, an error inside a 200). Every configured secret, and every token
// of a known shape, is replaced before it reaches the file; no header is
// written, so neither is an Authorization.
package record

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/sanitize"
)

// Version is the format of the lines written, their "v". A reader refuses
// lines of a later version rather than misreading them.
const Version = 1

// DefaultMaxBody is the most bytes of one request or answer body written.
// A request holds the whole conversation and the tool schemas: a full
// context window of the largest local models (256k tokens, about 1 MiB of
// text at 4 bytes a token) fits four times over; only a window of a
// million tokens filled to the brim is cut. An answer is bounded by the
// reply limit (a few thousand tokens: kilobytes). A larger body is cut
// here with a marker (request_cut, response_cut): redacting it and
// attaching it to a bug report would cost more than its tail tells.
const DefaultMaxBody = 4 << 20

// Wires, as a line's "wire" says them: the chat endpoint the path names.
const (
	WireOpenAI = "openai" // POST .../chat/completions: OpenAI, LM Studio, vLLM, llama.cpp, SGLang
	WireOllama = "ollama" // POST .../api/chat: Ollama's native chat
)

// Entry is one line of a recording: one attempt of one HTTP request.
type Entry struct {
	V    int       `json:"v"`
	Time time.Time `json:"time"`           // when the attempt started
	Task string    `json:"task,omitempty"` // the task ref (llm.TaskOf); "" outside a task (doctor's probes)
	Wire string    `json:"wire,omitempty"` // WireOpenAI or WireOllama; "" for another path
	// Method and Path are the request's; the host and the query are left
	// out (neither says anything of the model's behaviour, and a query
	// may carry a key).
	Method string `json:"method"`
	Path   string `json:"path"`
	// Request is the request body when, redacted and whole, it is JSON
	// (compacted); RequestText otherwise (cut, or not JSON).
	Request     json.RawMessage `json:"request,omitempty"`
	RequestText string          `json:"request_text,omitempty"`
	// RequestBytes is the body's size as sent; RequestCut says only the
	// first MaxBody bytes of it are here.
	RequestBytes int64 `json:"request_bytes"`
	RequestCut   bool  `json:"request_cut,omitempty"`
	// Status and ContentType are the answer's; Status 0 when no answer
	// came (Error says why).
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	// Response is the answer's body as text; ResponseBase64 holds it
	// instead when it is not valid UTF-8, so its bytes survive.
	Response       string `json:"response,omitempty"`
	ResponseBase64 string `json:"response_base64,omitempty"`
	// ResponseBytes is how much of the body was read; ResponseCut says
	// only the first MaxBody bytes of it are here; ResponseUnread that
	// the reader closed the body before its end (a retry discarding a
	// large error page), so the rest was never seen.
	ResponseBytes  int64 `json:"response_bytes"`
	ResponseCut    bool  `json:"response_cut,omitempty"`
	ResponseUnread bool  `json:"response_unread,omitempty"`
	// DurationMS runs from the attempt's start to the answer's end (or
	// its failure).
	DurationMS int64 `json:"duration_ms"`
	// Error is why the attempt failed: no answer (Status 0), or an answer
	// whose body broke off (a reset, a stall past the attempt's timeout).
	Error string `json:"error,omitempty"`
}

// RequestBody is the request's body as recorded.
func (e Entry) RequestBody() []byte {
	if len(e.Request) > 0 {
		return e.Request
	}
	return []byte(e.RequestText)
}

// ResponseBody is the answer's body as recorded.
func (e Entry) ResponseBody() ([]byte, error) {
	if e.ResponseBase64 == "" {
		return []byte(e.Response), nil
	}
	b, err := base64.StdEncoding.DecodeString(e.ResponseBase64)
	if err != nil {
		return nil, fmt.Errorf("response_base64: %w", err)
	}
	return b, nil
}

// Options configures a Recorder. Zero values mean defaults.
type Options struct {
	// Secrets are replaced (in every form sanitize.NewRedactor finds)
	// before anything reaches the file; tokens of well-known shapes are
	// replaced whatever this holds.
	Secrets []string
	// MaxBody is the most bytes of a body written; 0 → DefaultMaxBody.
	MaxBody int
	// Logger is told, once, that the file cannot be written; nil discards.
	Logger *slog.Logger
	// Now is the clock of the lines' times and durations; nil → time.Now.
	Now func() time.Time
}

// Recorder appends the lines of a recording to one file. It is safe for
// concurrent use: each line is one write under a lock, on a descriptor
// opened with O_APPEND, so lines of concurrent tasks (and of other
// processes recording to the same file) never interleave.
type Recorder struct {
	path   string
	w      io.WriteCloser
	o      Options
	redact func(string) string
	mu     sync.Mutex
	warned atomic.Bool
}

// Open opens (creating it and its folder if need be) the file at path for
// appending, readable and writable by this user alone.
func Open(path string, o Options) (*Recorder, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("creating the folder of the model recording %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the model recording %s: %w", path, err)
	}
	// The mode given applies to a new file only: one that was there
	// (made by hand, or by an older umask) is made private too.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("making the model recording %s private (mode 0600): %w", path, err)
	}
	return newRecorder(path, f, o), nil
}

func newRecorder(path string, w io.WriteCloser, o Options) *Recorder {
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Recorder{path: path, w: w, o: o, redact: sanitize.NewRedactor(o.Secrets).Redact}
}

// Close closes the file. Attempts still under way afterwards are not
// recorded (their failure is the one warning).
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.w.Close()
}

// Transport returns a round tripper that records each request it carries
// to base (nil: http.DefaultTransport) and its answer. It belongs below
// the retry layer, so that each attempt is recorded as it went.
func (r *Recorder) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{r: r, base: base}
}

type transport struct {
	r    *Recorder
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := t.r.o.Now()
	e := &Entry{V: Version, Time: start, Task: llm.TaskOf(req.Context()), Wire: wireOf(req.URL.Path),
		Method: req.Method, Path: t.r.redact(req.URL.Path)}
	body, req, err := requestBody(req)
	if err != nil {
		e.Error = t.r.redact(err.Error())
		t.r.write(e)
		return nil, err
	}
	t.r.setRequest(e, body)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		e.DurationMS = t.r.o.Now().Sub(start).Milliseconds()
		e.Error = t.r.redact(err.Error())
		t.r.write(e)
		return nil, err
	}
	e.Status, e.ContentType = resp.StatusCode, resp.Header.Get("Content-Type")
	rb := &recordedBody{rc: resp.Body, r: t.r, e: e, start: start, empty: resp.ContentLength == 0}
	if resp.Body == nil || resp.Body == http.NoBody {
		rb.finish(nil)
		return resp, nil
	}
	resp.Body = rb
	return resp, nil
}

// wireOf is the wire format the path's chat endpoint speaks; "" for
// another path.
func wireOf(path string) string {
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return WireOpenAI
	case strings.HasSuffix(path, "/api/chat"):
		return WireOllama
	}
	return ""
}

// requestBody reads req's body without using it up: from GetBody when the
// request has it (the retry layer's attempts do), else by reading it and
// sending a copy that carries the bytes read.
func requestBody(req *http.Request) ([]byte, *http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, req, nil
	}
	if req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			b, err := io.ReadAll(rc)
			rc.Close()
			if err == nil {
				return b, req, nil
			}
		}
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the body of %s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	c := req.Clone(req.Context())
	c.Body = io.NopCloser(bytes.NewReader(b))
	c.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	c.ContentLength = int64(len(b))
	return b, c, nil
}

// setRequest puts body, redacted and capped, into e.
func (r *Recorder) setRequest(e *Entry, body []byte) {
	e.RequestBytes = int64(len(body))
	kept, cut := r.capped(body)
	e.RequestCut = cut
	text := r.redact(string(kept))
	if !cut && json.Valid([]byte(text)) {
		e.Request = json.RawMessage(text)
		return
	}
	e.RequestText = strings.ToValidUTF8(text, "\uFFFD")
}

// capped is body's first MaxBody bytes (less a rune cut in two), and
// whether that is not all of it.
func (r *Recorder) capped(body []byte) ([]byte, bool) {
	if len(body) <= r.o.MaxBody {
		return body, false
	}
	kept := body[:r.o.MaxBody]
	for i := 0; i < utf8.UTFMax && len(kept) > 0 && !utf8.Valid(kept); i++ {
		kept = kept[:len(kept)-1]
	}
	if !utf8.Valid(kept) {
		kept = body[:r.o.MaxBody] // not text at all: the bytes as they are
	}
	return kept, true
}

// setResponse puts the body read, redacted and capped, into e.
func (r *Recorder) setResponse(e *Entry, body []byte, total int64) {
	e.ResponseBytes = total
	kept, cut := r.capped(body)
	e.ResponseCut = cut || total > int64(len(body))
	text := r.redact(string(kept))
	if utf8.ValidString(text) {
		e.Response = text
		return
	}
	e.ResponseBase64 = base64.StdEncoding.EncodeToString([]byte(text))
}

// write appends e as one line. A failure is logged once and never fails
// the request: the model's work goes on unrecorded.
func (r *Recorder) write(e *Entry) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the bodies' own bytes, not \u003c for each <
	err := enc.Encode(e)
	if err == nil {
		r.mu.Lock()
		_, err = r.w.Write(b.Bytes())
		r.mu.Unlock()
	}
	if err != nil && r.warned.CompareAndSwap(false, true) {
		r.o.Logger.Warn("the model recording (llm.record) cannot be written; the model's requests go on unrecorded",
			"file", r.path, "error", err)
	}
}

// recordedBody passes an answer's body on to its reader, keeping a copy
// of the first MaxBody bytes, and writes the attempt's line once the body
// ends: at its end, at a read error, or when it is closed.
type recordedBody struct {
	rc    io.ReadCloser
	r     *Recorder
	e     *Entry
	start time.Time
	empty bool // the answer said it has no body

	mu    sync.Mutex
	buf   []byte
	total int64
	once  sync.Once
}

func (b *recordedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.mu.Lock()
	b.total += int64(n)
	if room := b.r.o.MaxBody + 1 - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(n, room)]...)
	}
	b.mu.Unlock()
	switch {
	case err == io.EOF:
		b.finish(nil)
	case err != nil:
		b.finish(err)
	}
	return n, err
}

func (b *recordedBody) Close() error {
	b.once.Do(func() {
		b.mu.Lock()
		unread := !(b.empty && b.total == 0)
		b.mu.Unlock()
		b.write(nil, unread)
	})
	return b.rc.Close()
}

// finish writes the line for a body that ended, with err when it broke
// off.
func (b *recordedBody) finish(err error) {
	b.once.Do(func() { b.write(err, false) })
}

func (b *recordedBody) write(err error, unread bool) {
	b.mu.Lock()
	body, total := b.buf, b.total
	b.mu.Unlock()
	e := b.e
	b.r.setResponse(e, body, total)
	e.ResponseUnread = unread
	e.DurationMS = b.r.o.Now().Sub(b.start).Milliseconds()
	if err != nil {
		e.Error = b.r.redact(err.Error())
	}
	b.r.write(e)
}

// Read reads a recording: its lines in order. A line that is not an Entry,
// or of a later Version, is an error naming it.
func Read(rd io.Reader) ([]Entry, error) {
	dec := json.NewDecoder(rd)
	var out []Entry
	for n := 1; ; n++ {
		var e Entry
		if err := dec.Decode(&e); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("line %d of the recording: %w", n, err)
		}
		if e.V < 1 || e.V > Version {
			return nil, fmt.Errorf("line %d of the recording is of format %d; this version reads 1 to %d", n, e.V, Version)
		}
		out = append(out, e)
	}
}
