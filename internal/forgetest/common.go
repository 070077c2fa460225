// Package forgetest emulates the GitHub, GitLab and Gitea REST APIs for tests: an
// httptest server per forge with in-memory issues, pull/merge requests,
// comments, labels and users, answering with the real APIs' status codes,
// pagination and rate-limit headers, plus injected faults.
package forgetest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault makes the emulator answer matching requests with an error instead of
// serving them.
type Fault struct {
	Method     string            // "" matches any method
	Path       string            // substring of the URL path; "" matches any
	Status     int               // status to answer, e.g. 502, 429, 403
	Body       string            // response body; a JSON message when empty
	Header     map[string]string // extra headers, e.g. Retry-After
	Times      int               // how many requests to fail; 0 means 1, -1 means forever
	AfterServe bool              // serve the request (side effects happen), then answer Status: an ambiguous failure
	// Truncate serves the request and answers its own status and headers
	// (the ETag of the whole answer included) with only the first half of
	// its body, ending cleanly: a 200 cut short on the way, as a proxy may
	// pass it on. Status, Body and Header are not used.
	Truncate bool
	// Arrived, when set, makes the fault serve the request (its side
	// effects happen), close Arrived, and answer nothing until the client
	// goes away (2 minutes at most): a client killed right after the
	// forge acted. Status, Body and Header are not used; Times must be 1.
	Arrived chan struct{}
}

// HTMLPage is the body of the fault HTMLFault returns.
const HTMLPage = `<!DOCTYPE html>
<html><head><title>502 Bad Gateway</title></head>
<body><h1>Bad Gateway</h1><p>The upstream server is not responding. Please try again later.</p></body></html>
`

// HTMLFault answers matching requests with 200 and an HTML page instead of
// the API's JSON, as a proxy, a captive portal or a login wall does.
func HTMLFault(method, path string, times int) Fault {
	return Fault{Method: method, Path: path, Status: http.StatusOK, Body: HTMLPage, Times: times,
		Header: map[string]string{"Content-Type": "text/html; charset=utf-8"}}
}

// Request is one request the emulator received.
type Request struct {
	Method string
	Path   string // URL path as sent (escaped)
	Query  string
	Status int // status answered
	// Conditional is true when the request carried If-None-Match or
	// If-Modified-Since.
	Conditional bool
}

// base holds what both emulators share: the request log and the faults.
type base struct {
	mu     sync.Mutex
	faults []*Fault
	log    []Request
	now    atomic.Pointer[func() time.Time]
	watch  func(Call) bool
	calls  atomic.Int64 // requests a Watch function saw
}

// Inject adds a fault. Faults are matched in the order they were added.
func (b *base) Inject(f Fault) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f.Times == 0 {
		f.Times = 1
	}
	b.faults = append(b.faults, &f)
}

// Requests returns a copy of every request received so far.
func (b *base) Requests() []Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Request(nil), b.log...)
}

// Count returns how many requests had method (any when "") and a URL path
// (as sent, escaped) containing pathSubstring.
func (b *base) Count(method, pathSubstring string) int {
	n := 0
	for _, r := range b.Requests() {
		if (method == "" || strings.EqualFold(method, r.Method)) && strings.Contains(r.Path, pathSubstring) {
			n++
		}
	}
	return n
}

// ResetRequests forgets the request log.
func (b *base) ResetRequests() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = nil
}

// SetClock makes the emulator take the time from now instead of the wall
// clock: the timestamps of what it creates from then on (issues, comments,
// notes, edits) and its rate-limit windows. Tests use it to place comments
// before and after a moment without sleeping. nil restores the wall clock.
// GitLab's emulator never hands out a timestamp earlier than one it already
// handed out, so a clock set back once something was created only takes
// effect when it passes that; set the clock before seeding.
func (b *base) SetClock(now func() time.Time) {
	if now == nil {
		b.now.Store(nil)
		return
	}
	b.now.Store(&now)
}

// Clock is a time source for SetClock that stands still until Set moves
// it, so that a test places what the emulator creates before and after a
// moment without sleeping. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the time the clock was last set to.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, forward or back.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (b *base) clock() time.Time {
	if now := b.now.Load(); now != nil {
		return (*now)()
	}
	return time.Now().UTC()
}

// takeFault returns the first fault matching r and consumes one use of it.
func (b *base) takeFault(r *http.Request) *Fault {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, f := range b.faults {
		if f.Method != "" && !strings.EqualFold(f.Method, r.Method) {
			continue
		}
		if f.Path != "" && !strings.Contains(r.URL.EscapedPath(), f.Path) {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				b.faults = append(b.faults[:i], b.faults[i+1:]...)
			}
		}
		c := *f
		return &c
	}
	return nil
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// discardWriter serves a request whose answer is replaced by a fault.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// Call is a request the emulator is serving, as a Watch function sees it.
type Call struct {
	Seq    int64 // the request's number, the same in both calls
	Method string
	Path   string // URL path as sent (escaped)
	Body   []byte
	// Served: false before the request is served; true once it was
	// (faults applied, its side effects made), its answer not yet sent.
	Served bool
}

// Watch has fn see every request twice: before it is served, and once
// served, before its answer is sent. fn returning false drops the request
// there: not served at all, or served with its answer never sent; the
// connection is closed either way. A test kills the client from fn, to
// leave the forge as a crash at that very moment would: before a request
// did anything, or after it took effect without the client hearing so.
// fn runs on the request's goroutine, outside the emulator's locks. nil
// stops watching.
func (b *base) Watch(fn func(Call) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.watch = fn
}

func (b *base) watcher() func(Call) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.watch
}

// wrap applies faults and records requests around next, and lets a Watch
// function see them. errBody renders a fault's default body in the
// forge's error format.
func (b *base) wrap(next http.Handler, errBody func(status int) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			b.mu.Lock()
			b.log = append(b.log, Request{
				Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Status: rec.status,
				Conditional: r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "",
			})
			b.mu.Unlock()
		}()
		watch := b.watcher()
		if watch == nil {
			b.serve(rec, r, next, errBody)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		c := Call{Seq: b.calls.Add(1), Method: r.Method, Path: r.URL.EscapedPath(), Body: body}
		if !watch(c) {
			panic(http.ErrAbortHandler)
		}
		held := httptest.NewRecorder()
		b.serve(held, r, next, errBody)
		c.Served = true
		if !watch(c) {
			panic(http.ErrAbortHandler)
		}
		for k, v := range held.Header() {
			rec.Header()[k] = v
		}
		rec.WriteHeader(held.Code)
		_, _ = rec.Write(held.Body.Bytes())
	})
}

// serve serves r with next, or answers the first fault matching it.
func (b *base) serve(w http.ResponseWriter, r *http.Request, next http.Handler, errBody func(status int) string) {
	f := b.takeFault(r)
	if f == nil {
		next.ServeHTTP(w, r)
		return
	}
	if f.Truncate {
		truncate(w, r, next)
		return
	}
	if f.Arrived != nil {
		next.ServeHTTP(&discardWriter{h: http.Header{}}, r)
		close(f.Arrived)
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Minute): // a client never killed must not hang the server's Close
		}
		return
	}
	if f.AfterServe {
		next.ServeHTTP(&discardWriter{h: http.Header{}}, r)
	}
	w.Header().Set("Content-Type", "application/json")
	for k, v := range f.Header {
		w.Header().Set(k, v)
	}
	body := f.Body
	if body == "" {
		body = errBody(f.Status)
	}
	w.WriteHeader(f.Status)
	_, _ = w.Write([]byte(body))
}

// truncate serves r and passes on the first half of the answer's body
// under its own status and headers, without a Content-Length, so that the
// answer ends cleanly where it was cut.
func truncate(w http.ResponseWriter, r *http.Request, next http.Handler) {
	whole := httptest.NewRecorder()
	next.ServeHTTP(whole, r)
	for k, v := range whole.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(whole.Code)
	body := whole.Body.Bytes()
	_, _ = w.Write(body[:len(body)/2])
}
