package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ghforge "github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/task"
)

type noEvents struct{}

func (noEvents) Labelled(task.Ref)  {}
func (noEvents) Commented(task.Ref) {}

// Bodies being read at once are capped (Options.Reading): while two
// deliveries trickle in, a third is answered 503 with Retry-After without
// its body being read; once they are done, the next is read again.
func TestBodiesBeingReadAreCapped(t *testing.T) {
	h := New(Options{Webhooks: []Webhook{{Forge: task.GitHub, Secret: "whsec", Hooks: ghforge.Hooks{}}}, Reading: 2, Events: noEvents{}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(body io.Reader) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/github", body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("X-GitHub-Event", "issues")
		req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
		return srv.Client().Do(req)
	}
	type answer struct {
		status int
		err    error
	}
	var writers []*io.PipeWriter
	answers := make(chan answer, 2)
	for range 2 {
		r, w := io.Pipe()
		writers = append(writers, w)
		go func() {
			resp, err := post(r)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			resp.Body.Close()
			answers <- answer{status: resp.StatusCode}
		}()
		if _, err := w.Write([]byte(`{"action":`)); err != nil {
			t.Fatal(err)
		}
	}
	reading := func(n int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for len(h.reading) != n {
			if time.Now().After(deadline) {
				t.Fatalf("waited a minute for %d bodies being read; %d are", n, len(h.reading))
			}
			time.Sleep(time.Millisecond)
		}
	}
	reading(2)
	resp, err := post(strings.NewReader(`{"action":"labeled"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != busyRetry || !strings.Contains(string(b), "busy") {
		t.Fatalf("a third delivery while two are read: %d, Retry-After %q, %q; want 503 busy with Retry-After %s",
			resp.StatusCode, resp.Header.Get("Retry-After"), b, busyRetry)
	}
	for _, w := range writers {
		w.Close()
	}
	for range 2 {
		if a := <-answers; a.err != nil || a.status != http.StatusUnauthorized {
			t.Errorf("a trickled delivery: %d, %v; want 401 (its signature is wrong)", a.status, a.err)
		}
	}
	reading(0)
	resp, err = post(strings.NewReader(`{"action":"labeled"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a delivery once they are done: %d, want 401 (read and verified)", resp.StatusCode)
	}
}
