package httpx

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// script serves the statuses in order (then 200) and records each body.
type script struct {
	mu       sync.Mutex
	statuses []int
	headers  []http.Header
	bodies   []string
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.bodies)
	s.bodies = append(s.bodies, string(b))
	status, h := http.StatusOK, http.Header(nil)
	if n < len(s.statuses) {
		status = s.statuses[n]
		if n < len(s.headers) {
			h = s.headers[n]
		}
	}
	s.mu.Unlock()
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `{"n":`+strconv.Itoa(n)+`}`)
}

func (s *script) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(_ context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return nil
}

func newClient(t *testing.T, sc *script, o Options) (*http.Client, string, *sleeps) {
	t.Helper()
	srv := httptest.NewServer(sc)
	t.Cleanup(srv.Close)
	sl := &sleeps{}
	o.Sleep = sl.sleep
	return NewClient(o), srv.URL, sl
}

func do(t *testing.T, c *http.Client, ctx context.Context, method, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestRetriesTransient5xxAtMostThreeTimes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []int
		want     int
		attempts int
	}{
		{"recovers", []int{502, 503, 500}, 200, 4},
		{"gives up", []int{502, 502, 502, 502, 502}, 502, 4},
		{"not found is final", []int{404}, 404, 1},
		{"not implemented is final", []int{501}, 501, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &script{statuses: tc.statuses}
			c, url, sl := newClient(t, sc, Options{})
			resp := do(t, c, context.Background(), http.MethodGet, url, "")
			if resp.StatusCode != tc.want || sc.attempts() != tc.attempts {
				t.Fatalf("status %d after %d attempts, want %d after %d", resp.StatusCode, sc.attempts(), tc.want, tc.attempts)
			}
			if len(sl.d) != tc.attempts-1 {
				t.Fatalf("slept %d times, want %d", len(sl.d), tc.attempts-1)
			}
			for i := 1; i < len(sl.d); i++ {
				if sl.d[i] < time.Second<<i {
					t.Errorf("backoff %d = %s, want at least %s", i, sl.d[i], time.Second<<i)
				}
			}
		})
	}
}

func TestHonoursRetryAfterAndRateLimitReset(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		status int
		header http.Header
		want   time.Duration
	}{
		{"429 retry-after seconds", 429, http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{"429 retry-after date", 429, http.Header{"Retry-After": {now.Add(9 * time.Second).Format(http.TimeFormat)}}, 9 * time.Second},
		{"github secondary limit", 403, http.Header{"Retry-After": {"60"}}, 60 * time.Second},
		{"github primary limit", 403, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(now.Add(40*time.Second).Unix(), 10)}}, 40 * time.Second},
		{"gitlab reset", 429, http.Header{"Ratelimit-Reset": {strconv.FormatInt(now.Add(20*time.Second).Unix(), 10)}}, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &script{statuses: []int{tc.status}, headers: []http.Header{tc.header}}
			c, url, sl := newClient(t, sc, Options{Now: func() time.Time { return now }})
			resp := do(t, c, context.Background(), http.MethodGet, url, "")
			if resp.StatusCode != 200 || sc.attempts() != 2 {
				t.Fatalf("status %d after %d attempts", resp.StatusCode, sc.attempts())
			}
			if len(sl.d) != 1 || sl.d[0] < tc.want {
				t.Fatalf("waits %v, want one of at least %s", sl.d, tc.want)
			}
		})
	}
}

func TestPlainForbiddenIsNotRetried(t *testing.T) {
	sc := &script{statuses: []int{403}}
	c, url, _ := newClient(t, sc, Options{})
	if resp := do(t, c, context.Background(), http.MethodGet, url, ""); resp.StatusCode != 403 || sc.attempts() != 1 {
		t.Fatalf("status %d after %d attempts", resp.StatusCode, sc.attempts())
	}
}

func TestUnsafeMethodsAreNotRetriedBlindly(t *testing.T) {
	sc := &script{statuses: []int{502}}
	c, url, _ := newClient(t, sc, Options{})
	if resp := do(t, c, context.Background(), http.MethodPost, url, "comment"); resp.StatusCode != 502 || sc.attempts() != 1 {
		t.Fatalf("POST: status %d after %d attempts, want 502 after 1", resp.StatusCode, sc.attempts())
	}
	sc = &script{statuses: []int{429}, headers: []http.Header{{"Retry-After": {"1"}}}}
	c, url, _ = newClient(t, sc, Options{})
	if resp := do(t, c, context.Background(), http.MethodPost, url, "comment"); resp.StatusCode != 429 || sc.attempts() != 1 {
		t.Fatalf("POST 429: status %d after %d attempts, want 429 after 1 (the caller retries)", resp.StatusCode, sc.attempts())
	}

	sc = &script{statuses: []int{502}}
	c, url, _ = newClient(t, sc, Options{})
	if resp := do(t, c, Idempotent(context.Background()), http.MethodPost, url, "label"); resp.StatusCode != 200 || sc.attempts() != 2 {
		t.Fatalf("idempotent POST: status %d after %d attempts", resp.StatusCode, sc.attempts())
	}

	sc = &script{statuses: []int{500, 500}}
	c, url, _ = newClient(t, sc, Options{RetryUnsafe: true})
	if resp := do(t, c, context.Background(), http.MethodPost, url, `{"model":"m"}`); resp.StatusCode != 200 || sc.attempts() != 3 {
		t.Fatalf("RetryUnsafe POST: status %d after %d attempts", resp.StatusCode, sc.attempts())
	}
	for i, b := range sc.bodies {
		if b != `{"model":"m"}` {
			t.Errorf("attempt %d sent body %q", i+1, b)
		}
	}
}

func TestWaitLongerThanMaxWaitEndsRetries(t *testing.T) {
	sc := &script{statuses: []int{429}, headers: []http.Header{{"Retry-After": {"3600"}}}}
	c, url, sl := newClient(t, sc, Options{MaxWait: time.Minute})
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	_, err := c.Do(req)
	if !errors.Is(err, ErrWaitTooLong) {
		t.Fatalf("err = %v, want ErrWaitTooLong", err)
	}
	if sc.attempts() != 1 || len(sl.d) != 0 {
		t.Fatalf("%d attempts, %d waits; want 1 and 0", sc.attempts(), len(sl.d))
	}
}

// hangingRT blocks each of its first n attempts until the attempt's context
// ends, then answers 200.
type hangingRT struct {
	mu    sync.Mutex
	n     int
	calls int
}

func (h *hangingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.calls++
	hang := h.calls <= h.n
	h.mu.Unlock()
	if hang {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Header: http.Header{}, Request: r}, nil
}

func TestAttemptTimeoutIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &hangingRT{n: 2}
		c := NewClient(Options{Base: rt, AttemptTimeout: 30 * time.Second})
		resp := do(t, c, context.Background(), http.MethodGet, "http://model.test/v1", "")
		if resp.StatusCode != 200 || rt.calls != 3 {
			t.Fatalf("status %d after %d calls", resp.StatusCode, rt.calls)
		}
	})
}

func TestCallerCancellationStopsRetrying(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &hangingRT{n: 10}
		c := NewClient(Options{Base: rt, AttemptTimeout: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://model.test/v1", nil)
		_, err := c.Do(req)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want deadline exceeded", err)
		}
		if rt.calls != 2 {
			t.Fatalf("%d calls, want 2 (the second cut by the caller's deadline)", rt.calls)
		}
	})
}

func TestRefusedConnectionIsRetried(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	sl := &sleeps{}
	c := NewClient(Options{Sleep: sl.sleep})
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if _, err := c.Do(req); err == nil {
		t.Fatal("want an error from a closed server")
	}
	if len(sl.d) != 3 {
		t.Fatalf("slept %d times, want 3 (four attempts)", len(sl.d))
	}
}

// The waits rate-limited answers ask for are recorded for the caller, also
// when the wait ends the retries; requests without a recorder record
// nothing and fail the same way.
func TestRecordWaits(t *testing.T) {
	sc := &script{statuses: []int{429, 429}, headers: []http.Header{{"Retry-After": {"5"}}, {"Retry-After": {"3600"}}}}
	c, url, _ := newClient(t, sc, Options{MaxWait: time.Minute})
	ctx, waits := RecordWaits(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if _, err := c.Do(req); !errors.Is(err, ErrWaitTooLong) {
		t.Fatalf("err = %v, want ErrWaitTooLong", err)
	}
	if got := waits.Longest(); got != time.Hour {
		t.Errorf("Longest = %v, want 1h (the longest Retry-After)", got)
	}
	if sc.attempts() != 2 {
		t.Errorf("%d attempts, want 2", sc.attempts())
	}
	if _, fresh := RecordWaits(context.Background()); fresh.Longest() != 0 {
		t.Errorf("a new recorder starts at %v", fresh.Longest())
	}
}
