package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coding-agent/coding-agent/internal/forgetest"
)

// answers serves its handlers in turn, one per request, then good: a 200
// with a JSON body.
type answers struct {
	mu    sync.Mutex
	bad   []http.HandlerFunc
	calls int
}

const good = `{"ok":true}`

func (a *answers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	n := a.calls
	a.calls++
	a.mu.Unlock()
	if n < len(a.bad) {
		a.bad[n](w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, good)
}

func (a *answers) attempts() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

// answer writes status, Content-Type and body.
func answer(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// cutConnection promises 100 bytes of JSON, sends 10 and drops the
// connection.
func cutConnection(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", "100")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, `{"items":[`)
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

const htmlPage = "<!DOCTYPE html><html><body>Bad Gateway</body></html>"

// get sends a GET asking for accept through c and returns the answer's
// body, or the error.
func get(t *testing.T, c *http.Client, url, accept string) (string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return string(b), nil
}

func serveAnswers(t *testing.T, a *answers) (*http.Client, string, *sleeps) {
	t.Helper()
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	sl := &sleeps{}
	return NewClient(Options{Sleep: sl.sleep}), srv.URL, sl
}

// A success whose body is not the JSON it should be is retried like a 5xx,
// and the caller gets the good answer that follows.
func TestBadJSONAnswerIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		accept string
		bad    http.HandlerFunc
	}{
		{"cut short", "", answer(200, "application/json; charset=utf-8", `{"items":[{"id":1},{"id"`)},
		{"HTML page asked for JSON", "application/vnd.github.v3+json", answer(200, "text/html", htmlPage)},
		{"HTML page without a type", "application/json", answer(200, "", htmlPage)},
		{"NDJSON line cut", "application/x-ndjson", answer(200, "application/x-ndjson", "{\"a\":1}\n{\"done\":tr")},
		{"connection cut mid-body", "application/json", cutConnection},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &answers{bad: []http.HandlerFunc{tc.bad}}
			c, url, sl := serveAnswers(t, a)
			body, err := get(t, c, url, tc.accept)
			if err != nil || body != good {
				t.Fatalf("got %q, %v; want the good answer", body, err)
			}
			if a.attempts() != 2 || len(sl.d) != 1 {
				t.Errorf("%d attempts, %d waits; want 2 and 1", a.attempts(), len(sl.d))
			}
		})
	}
}

// With Options.JSON every success should be JSON: an HTML page answered to
// a request for a media type that does not say JSON (go-github's preview
// types) is retried too.
func TestEverySuccessShouldBeJSON(t *testing.T) {
	a := &answers{bad: []http.HandlerFunc{answer(200, "text/html", htmlPage)}}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	c := NewClient(Options{JSON: true, Sleep: (&sleeps{}).sleep})
	body, err := get(t, c, srv.URL, "application/vnd.github.squirrel-girl-preview")
	if err != nil || body != good || a.attempts() != 2 {
		t.Fatalf("got %q, %v after %d attempts; want the good answer after 2", body, err, a.attempts())
	}
}

// Four bad answers in a row spend the retries; the error says what was
// wrong with the last.
func TestBadJSONAnswerFourTimesFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  http.HandlerFunc
		want []string
	}{
		{"cut short", answer(200, "application/json", `{"items":[{"id":1},{"id"`), []string{"200 OK with 24 bytes of application/json", "cut short"}},
		{"HTML page", answer(200, "text/html", htmlPage), []string{"text/html", "invalid character '<'", `"<!DOCTYPE html>`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &answers{bad: []http.HandlerFunc{tc.bad, tc.bad, tc.bad, tc.bad, tc.bad}}
			c, url, _ := serveAnswers(t, a)
			_, err := get(t, c, url, "application/json")
			if !errors.Is(err, ErrBadBody) {
				t.Fatalf("err = %v, want ErrBadBody", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if a.attempts() != 4 {
				t.Errorf("%d attempts, want 4", a.attempts())
			}
		})
	}
}

// What is not a success that should be JSON is handed on as it came, on the
// first attempt: a body nobody said was JSON, an empty one, an error
// status, or an answer to a request that is not retried.
func TestAnswersNotJudgedAsJSON(t *testing.T) {
	for _, tc := range []struct {
		name, method, accept string
		bad                  http.HandlerFunc
		want                 string
	}{
		{"plain text asked for anything", "GET", "", answer(200, "text/plain", "Ollama is running"), "Ollama is running"},
		{"any type accepted", "GET", "application/json, */*", answer(200, "text/html", htmlPage), htmlPage},
		{"empty", "GET", "application/json", answer(200, "application/json", ""), ""},
		{"client error page", "GET", "application/json", answer(404, "text/html", htmlPage), htmlPage},
		{"POST left to the caller", "POST", "application/json", answer(201, "application/json", `{"id":`), `{"id":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &answers{bad: []http.HandlerFunc{tc.bad}}
			c, url, _ := serveAnswers(t, a)
			req, _ := http.NewRequest(tc.method, url, strings.NewReader("{}"))
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != tc.want || a.attempts() != 1 {
				t.Errorf("got %q after %d attempts, want %q after 1", b, a.attempts(), tc.want)
			}
		})
	}
}

// stallingRT answers 200 with the first part of a JSON body on each of its
// first n calls and then sends nothing more until the attempt's context
// ends, as a model server that stalls mid-answer; later calls answer whole.
type stallingRT struct {
	mu    sync.Mutex
	n     int
	calls int
}

func (s *stallingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.calls++
	stall := s.calls <= s.n
	s.mu.Unlock()
	h := http.Header{"Content-Type": {"application/json"}}
	if !stall {
		return &http.Response{StatusCode: 200, Status: "200 OK", Header: h, Body: io.NopCloser(strings.NewReader(good)), Request: r}, nil
	}
	body := io.MultiReader(strings.NewReader(`{"choices":[{"message":{"content":"Wri`), ctxReader{r.Context()})
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: h, Body: io.NopCloser(body), Request: r}, nil
}

// ctxReader blocks until its context ends.
type ctxReader struct{ ctx context.Context }

func (c ctxReader) Read([]byte) (int, error) {
	<-c.ctx.Done()
	return 0, c.ctx.Err()
}

// An answer that stalls mid-body is cut by the attempt timeout and retried
// (a model completion: POST with RetryUnsafe); four in a row fail naming
// the timeout.
func TestStalledAnswerIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &stallingRT{n: 1}
		c := NewClient(Options{Base: rt, AttemptTimeout: 30 * time.Second, RetryUnsafe: true})
		req, _ := http.NewRequest(http.MethodPost, "http://model.test/v1/chat/completions", strings.NewReader("{}"))
		req.Header.Set("Accept", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != good || rt.calls != 2 {
			t.Fatalf("got %q after %d calls, want the whole answer after 2", b, rt.calls)
		}

		rt = &stallingRT{n: 10}
		c = NewClient(Options{Base: rt, AttemptTimeout: 30 * time.Second, RetryUnsafe: true})
		req, _ = http.NewRequest(http.MethodPost, "http://model.test/v1/chat/completions", strings.NewReader("{}"))
		_, err = c.Do(req)
		if !errors.Is(err, errAttemptTimeout) || !strings.Contains(err.Error(), "in the middle of the answer") || rt.calls != 4 {
			t.Fatalf("err = %v after %d calls, want the attempt timeout mid-answer after 4", err, rt.calls)
		}
	})
}

// A cut-short answer carries the whole answer's ETag: stored, it would
// turn every retry's 304 into the same cut answer. The cache keeps none,
// so the retry asks in full, and the good answer is the one kept.
func TestCacheKeepsNoBadAnswer(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "Fix it", Body: "please"})
	cache := NewCache(g.Client().Transport, 100)
	client := NewClient(Options{Base: cache, Sleep: func(context.Context, time.Duration) error { return nil }})
	issue := fmt.Sprintf("/repos/acme/app/issues/%d", n)
	read := func() string {
		t.Helper()
		req, _ := http.NewRequest("GET", g.URL()+issue, nil)
		req.Header.Set("Authorization", "Bearer "+g.Token)
		req.Header.Set("Accept", "application/vnd.github.v3+json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", issue, err)
		}
		defer resp.Body.Close()
		var v struct {
			State string `json:"state"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("decoding %s: %v", issue, err)
		}
		return v.State
	}
	if state := read(); state != "open" { // stored
		t.Fatalf("state %q", state)
	}
	g.SetState("acme/app", n, "closed")
	g.Inject(forgetest.Fault{Method: "GET", Path: issue, Truncate: true, Times: 2})
	if state := read(); state != "closed" {
		t.Fatalf("state %q after the cut answers, want the new one", state)
	}
	if state := read(); state != "closed" {
		t.Fatalf("state %q when polled again", state)
	}
	var got []string
	for _, r := range g.Requests() {
		got = append(got, fmt.Sprintf("%t %d", r.Conditional, r.Status))
	}
	// The first read; two cut answers, the second asked in full; the
	// whole answer; then a 304 for the stored good one.
	want := []string{"false 200", "true 200", "false 200", "false 200", "true 304"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("requests (conditional, status) %v, want %v", got, want)
	}
}
