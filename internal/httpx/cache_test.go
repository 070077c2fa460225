package httpx

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forgetest"
)

// origin is an httptest resource server: each path holds a body whose
// ETag is a version number; conditional GETs are answered 304 when the
// version matches. It counts requests and records conditional headers.
type origin struct {
	mu       sync.Mutex
	bodies   map[string]string // path → body
	versions map[string]int    // path → version, the ETag
	lastMod  bool              // validate with Last-Modified instead of ETag
	noStore  bool              // answer Cache-Control: no-store
	rate     int               // X-RateLimit-Remaining, counts down per request
	log      []seen
}

type seen struct {
	method, path, query, ifNoneMatch, ifModifiedSince, auth string
	status                                                  int
}

func newOrigin(t *testing.T) (*origin, *httptest.Server) {
	o := &origin{bodies: map[string]string{}, versions: map[string]int{}, rate: 5000}
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)
	return o, srv
}

// set changes a resource, giving it a new version.
func (o *origin) set(path, body string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.bodies[path] = body
	o.versions[path]++
}

func (o *origin) requests() []seen {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]seen(nil), o.log...)
}

func (o *origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := seen{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, ifNoneMatch: r.Header.Get("If-None-Match"),
		ifModifiedSince: r.Header.Get("If-Modified-Since"), auth: r.Header.Get("Authorization")}
	defer func() { o.log = append(o.log, s) }()
	o.rate--
	w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(o.rate))
	if r.Method != http.MethodGet {
		o.bodies[r.URL.Path] += "+" + r.Method
		o.versions[r.URL.Path]++
		s.status = http.StatusCreated
		w.WriteHeader(s.status)
		return
	}
	body, ok := o.bodies[r.URL.Path]
	if !ok {
		s.status = http.StatusNotFound
		w.WriteHeader(s.status)
		return
	}
	// The body depends on the query and the credentials, as list pages and
	// private views do.
	body += "|" + r.URL.RawQuery + "|" + r.Header.Get("Authorization")
	version := o.versions[r.URL.Path]
	etag := fmt.Sprintf(`"v%d"`, version)
	modified := time.Date(2025, 1, 1, 0, 0, version, 0, time.UTC).Format(http.TimeFormat)
	if o.lastMod {
		w.Header().Set("Last-Modified", modified)
	} else {
		w.Header().Set("ETag", etag)
	}
	if o.noStore {
		w.Header().Set("Cache-Control", "no-store")
	}
	if (!o.lastMod && r.Header.Get("If-None-Match") == etag) || (o.lastMod && r.Header.Get("If-Modified-Since") == modified) {
		s.status = http.StatusNotModified
		w.WriteHeader(s.status)
		return
	}
	s.status = http.StatusOK
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, body)
}

// fetch sends method to url through rt with an Authorization header and
// returns the status, body and header.
func fetch(t *testing.T, rt http.RoundTripper, method, url, auth string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s %s: %v", method, url, err)
	}
	return resp.StatusCode, string(b), resp.Header
}

func TestCacheRevalidatesUnchangedResource(t *testing.T) {
	for _, lastMod := range []bool{false, true} {
		t.Run(fmt.Sprintf("lastModified=%v", lastMod), func(t *testing.T) {
			o, srv := newOrigin(t)
			o.lastMod = lastMod
			o.set("/issues/1", "issue one")
			c := NewCache(nil, 10)

			status, first, h1 := fetch(t, c, "GET", srv.URL+"/issues/1", "Bearer a")
			if status != 200 || h1.Get(CacheHeader) != "" {
				t.Fatalf("first GET: %d, marker %q", status, h1.Get(CacheHeader))
			}
			status, second, h2 := fetch(t, c, "GET", srv.URL+"/issues/1", "Bearer a")
			if status != 200 || second != first || h2.Get(CacheHeader) != CacheRevalidated {
				t.Fatalf("second GET: %d %q (want %q), marker %q", status, second, first, h2.Get(CacheHeader))
			}
			if h2.Get("Content-Type") != "text/plain" {
				t.Errorf("stored Content-Type lost: %q", h2.Get("Content-Type"))
			}
			reqs := o.requests()
			if len(reqs) != 2 || reqs[1].status != http.StatusNotModified {
				t.Fatalf("server saw %+v, want a 200 then a 304", reqs)
			}
			if lastMod {
				if reqs[1].ifModifiedSince == "" || reqs[1].ifNoneMatch != "" {
					t.Errorf("second GET sent If-Modified-Since %q, If-None-Match %q", reqs[1].ifModifiedSince, reqs[1].ifNoneMatch)
				}
			} else if reqs[1].ifNoneMatch != `"v1"` {
				t.Errorf("second GET sent If-None-Match %q, want %q", reqs[1].ifNoneMatch, `"v1"`)
			}
			if reqs[0].ifNoneMatch != "" || reqs[0].ifModifiedSince != "" {
				t.Errorf("first GET was conditional: %+v", reqs[0])
			}
			if s := c.Stats(); s.Revalidated != 1 || s.Stored != 1 || s.Entries != 1 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

func TestCacheRateLimitHeadersOf304Win(t *testing.T) {
	o, srv := newOrigin(t)
	o.set("/issues/1", "issue one")
	c := NewCache(nil, 10)
	_, _, h1 := fetch(t, c, "GET", srv.URL+"/issues/1", "Bearer a")
	_, _, h2 := fetch(t, c, "GET", srv.URL+"/issues/1", "Bearer a")
	if h1.Get("X-RateLimit-Remaining") != "4999" || h2.Get("X-RateLimit-Remaining") != "4998" {
		t.Fatalf("X-RateLimit-Remaining: first %q, revalidated %q; want 4999 then the 304's 4998",
			h1.Get("X-RateLimit-Remaining"), h2.Get("X-RateLimit-Remaining"))
	}
	_, _, h3 := fetch(t, c, "GET", srv.URL+"/issues/1", "Bearer a")
	if h3.Get("X-RateLimit-Remaining") != "4997" || h3.Get(CacheHeader) != CacheRevalidated {
		t.Errorf("third GET: remaining %q, marker %q", h3.Get("X-RateLimit-Remaining"), h3.Get(CacheHeader))
	}
}

func TestCacheChangedResourceReplacesEntry(t *testing.T) {
	o, srv := newOrigin(t)
	o.set("/issues/1", "old")
	c := NewCache(nil, 10)
	fetch(t, c, "GET", srv.URL+"/issues/1", "Bearer a")
	o.set("/issues/1", "new")
	status, body, h := fetch(t, c, "GET", srv.URL+"/issues/1", "Bearer a")
	if status != 200 || !strings.HasPrefix(body, "new|") || h.Get(CacheHeader) != "" {
		t.Fatalf("after change: %d %q marker %q, want the new body from the server", status, body, h.Get(CacheHeader))
	}
	_, body, h = fetch(t, c, "GET", srv.URL+"/issues/1", "Bearer a")
	if !strings.HasPrefix(body, "new|") || h.Get(CacheHeader) != CacheRevalidated {
		t.Fatalf("third GET: %q marker %q, want the new body revalidated", body, h.Get(CacheHeader))
	}
	reqs := o.requests()
	if reqs[1].ifNoneMatch != `"v1"` || reqs[1].status != 200 || reqs[2].ifNoneMatch != `"v2"` || reqs[2].status != 304 {
		t.Errorf("server saw %+v", reqs)
	}
	if s := c.Stats(); s.Stored != 2 || s.Entries != 1 || s.Revalidated != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestCacheCredentialsDoNotShareEntries(t *testing.T) {
	o, srv := newOrigin(t)
	o.set("/issues/1", "issue")
	c := NewCache(nil, 10)
	const tokenA, tokenB = "ghp_secretAAAA", "glpat-secretBBBB"
	_, bodyA, _ := fetch(t, c, "GET", srv.URL+"/issues/1", "Bearer "+tokenA)
	_, bodyB, hB := fetch(t, c, "GET", srv.URL+"/issues/1", "Bearer "+tokenB)
	if bodyB == bodyA || hB.Get(CacheHeader) != "" {
		t.Fatalf("token B got %q (marker %q), token A's answer was %q", bodyB, hB.Get(CacheHeader), bodyA)
	}
	_, again, hA := fetch(t, c, "GET", srv.URL+"/issues/1", "Bearer "+tokenA)
	if again != bodyA || hA.Get(CacheHeader) != CacheRevalidated {
		t.Errorf("token A again: %q marker %q", again, hA.Get(CacheHeader))
	}
	// A GitLab token header and a password in the URL vary the key too.
	req, _ := http.NewRequest("GET", srv.URL+"/issues/1", nil)
	req.Header.Set("Private-Token", tokenB)
	keyPrivate := cacheKey(req)
	req.Header.Del("Private-Token")
	plain := cacheKey(req)
	withPassword, _ := http.NewRequest("GET", strings.Replace(srv.URL, "://", "://u:"+tokenA+"@", 1)+"/issues/1", nil)
	if keyPrivate == plain || cacheKey(withPassword) == plain {
		t.Error("Private-Token or URL user info did not vary the key")
	}

	reqs := o.requests()
	if reqs[1].ifNoneMatch != "" {
		t.Errorf("token B's first GET was conditional on token A's entry: %+v", reqs[1])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) != 2 {
		t.Fatalf("%d entries, want one per token", len(c.entries))
	}
	for key, e := range c.entries {
		ent := e.Value.(*cacheEntry)
		for _, s := range []string{key, ent.key, ent.origin, ent.path, keyPrivate, cacheKey(withPassword)} {
			if strings.Contains(s, tokenA) || strings.Contains(s, tokenB) {
				t.Errorf("a token appears in the cache: %q", s)
			}
		}
	}
}

func TestCacheWritesInvalidate(t *testing.T) {
	cases := []struct {
		name, method, write string
		stale, kept         []string // GETs (path?query) dropped / still conditional
	}{
		{name: "post to a collection", method: "POST", write: "/repos/o/r/issues/1/comments",
			stale: []string{"/repos/o/r/issues/1/comments?per_page=100", "/repos/o/r/issues/1/comments?page=2"},
			kept:  []string{"/repos/o/r/issues/10/comments?per_page=100", "/repos/o/r/issues/1"}},
		{name: "delete below a resource", method: "DELETE", write: "/repos/o/r/issues/1/labels",
			stale: []string{"/repos/o/r/issues/1/labels", "/repos/o/r/issues/1/labels/bug"},
			kept:  []string{"/repos/o/r/issues/1/comments", "/repos/o/r/issues/1/labels-extra"}},
		{name: "patch a comment", method: "PATCH", write: "/repos/o/r/issues/comments/5",
			stale: []string{"/repos/o/r/issues/comments/5"},
			kept:  []string{"/repos/o/r/issues/1/comments"}},
		{name: "head changes nothing", method: "HEAD", write: "/repos/o/r/issues/1",
			kept: []string{"/repos/o/r/issues/1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, srv := newOrigin(t)
			c := NewCache(nil, 100)
			all := append(append([]string(nil), tc.stale...), tc.kept...)
			for _, u := range all {
				path, _, _ := strings.Cut(u, "?")
				o.set(path, path)
				fetch(t, c, "GET", srv.URL+u, "Bearer a")
			}
			fetch(t, c, tc.method, srv.URL+tc.write, "Bearer a")
			n := len(o.requests())
			for _, u := range all {
				fetch(t, c, "GET", srv.URL+u, "Bearer a")
			}
			after := o.requests()[n:]
			for i, u := range all {
				conditional := after[i].ifNoneMatch != ""
				if wantStale := i < len(tc.stale); conditional == wantStale {
					t.Errorf("GET %s after %s %s: conditional=%v, want %v", u, tc.method, tc.write, conditional, !wantStale)
				}
			}
			if s := c.Stats(); s.Invalidated != int64(len(tc.stale)) {
				t.Errorf("invalidated %d, want %d", s.Invalidated, len(tc.stale))
			}
		})
	}
}

// TestCacheWriteRacingGet checks that no answer read around a write
// outlives it: one answered while the write was in flight is not stored,
// and one stored while the write was in flight is dropped when it ends.
func TestCacheWriteRacingGet(t *testing.T) {
	for _, blocked := range []string{"GET", "POST"} {
		t.Run(blocked+" in flight", func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == blocked {
					entered <- struct{}{}
					<-release
				}
				if r.Method != "GET" {
					w.WriteHeader(http.StatusCreated)
					return
				}
				w.Header().Set("ETag", `"v1"`)
				_, _ = io.WriteString(w, "list")
			}))
			defer srv.Close()
			c := NewCache(nil, 10)
			other := map[string]string{"GET": "POST", "POST": "GET"}[blocked]
			done := make(chan struct{})
			go func() {
				defer close(done)
				req, _ := http.NewRequest(blocked, srv.URL+"/issues/1/comments", nil)
				if resp, err := c.RoundTrip(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
			<-entered
			fetch(t, c, other, srv.URL+"/issues/1/comments", "")
			close(release)
			<-done
			if s := c.Stats(); s.Entries != 0 {
				t.Errorf("an answer read around the write was kept: %+v", s)
			}
		})
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	o, srv := newOrigin(t)
	for _, p := range []string{"/a", "/b", "/c"} {
		o.set(p, p)
	}
	c := NewCache(nil, 2)
	fetch(t, c, "GET", srv.URL+"/a", "")
	fetch(t, c, "GET", srv.URL+"/b", "")
	fetch(t, c, "GET", srv.URL+"/a", "") // a is now the most recently used
	fetch(t, c, "GET", srv.URL+"/c", "") // evicts b
	if s := c.Stats(); s.Evicted != 1 || s.Entries != 2 {
		t.Fatalf("stats %+v, want one eviction and two entries", s)
	}
	n := len(o.requests())
	_, _, ha := fetch(t, c, "GET", srv.URL+"/a", "")
	_, _, hb := fetch(t, c, "GET", srv.URL+"/b", "")
	reqs := o.requests()[n:]
	if reqs[0].ifNoneMatch == "" || ha.Get(CacheHeader) != CacheRevalidated {
		t.Errorf("/a was evicted: %+v", reqs[0])
	}
	if reqs[1].ifNoneMatch != "" || hb.Get(CacheHeader) != "" {
		t.Errorf("/b was kept: %+v", reqs[1])
	}
}

func TestCachePassesThrough(t *testing.T) {
	t.Run("304 without a stored entry", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", `"x"`)
			w.WriteHeader(http.StatusNotModified)
		}))
		defer srv.Close()
		c := NewCache(nil, 10)
		status, body, h := fetch(t, c, "GET", srv.URL+"/x", "")
		if status != http.StatusNotModified || body != "" || h.Get(CacheHeader) != "" {
			t.Fatalf("got %d %q marker %q, want the 304 as is", status, body, h.Get(CacheHeader))
		}
		if s := c.Stats(); s.Revalidated != 0 || s.Stored != 0 {
			t.Errorf("stats %+v", s)
		}
	})
	t.Run("caller's own conditional request", func(t *testing.T) {
		o, srv := newOrigin(t)
		o.set("/x", "x")
		c := NewCache(nil, 10)
		fetch(t, c, "GET", srv.URL+"/x", "")
		req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
		req.Header.Set("If-None-Match", `"mine"`)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := o.requests()[1].ifNoneMatch; got != `"mine"` || resp.StatusCode != 200 || resp.Header.Get(CacheHeader) != "" {
			t.Errorf("sent If-None-Match %q, got %d marker %q", got, resp.StatusCode, resp.Header.Get(CacheHeader))
		}
		req.Header.Set("If-None-Match", `"v1"`)
		resp, err = c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			t.Errorf("caller's matching conditional GET got %d, want the 304 as is", resp.StatusCode)
		}
	})
	t.Run("no-store and non-GET are not stored", func(t *testing.T) {
		o, srv := newOrigin(t)
		o.noStore = true
		o.set("/x", "x")
		c := NewCache(nil, 10)
		fetch(t, c, "GET", srv.URL+"/x", "")
		fetch(t, c, "GET", srv.URL+"/x", "")
		fetch(t, c, "POST", srv.URL+"/x", "")
		if got := o.requests()[1].ifNoneMatch; got != "" || c.Stats().Stored != 0 {
			t.Errorf("no-store answer was stored: If-None-Match %q, stats %+v", got, c.Stats())
		}
	})
	t.Run("no validator", func(t *testing.T) {
		var conditional int
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("If-None-Match")+r.Header.Get("If-Modified-Since") != "" {
				conditional++
			}
			_, _ = io.WriteString(w, "plain")
		}))
		defer srv.Close()
		c := NewCache(nil, 10)
		fetch(t, c, "GET", srv.URL, "")
		if _, body, _ := fetch(t, c, "GET", srv.URL, ""); body != "plain" || conditional != 0 || c.Stats().Stored != 0 {
			t.Errorf("body %q, %d conditional requests, stats %+v", body, conditional, c.Stats())
		}
	})
	t.Run("body over the cap", func(t *testing.T) {
		big := strings.Repeat("x", maxCachedBody+1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", `"big"`)
			_, _ = io.WriteString(w, big)
		}))
		defer srv.Close()
		c := NewCache(nil, 10)
		if _, body, _ := fetch(t, c, "GET", srv.URL, ""); body != big || c.Stats().Stored != 0 {
			t.Errorf("got %d bytes of %d, stats %+v", len(body), len(big), c.Stats())
		}
	})
}

func TestCacheDropsEntryOfVanishedResource(t *testing.T) {
	o, srv := newOrigin(t)
	o.set("/x", "x")
	c := NewCache(nil, 10)
	fetch(t, c, "GET", srv.URL+"/x", "")
	o.mu.Lock()
	delete(o.bodies, "/x")
	o.mu.Unlock()
	if status, _, _ := fetch(t, c, "GET", srv.URL+"/x", ""); status != http.StatusNotFound {
		t.Fatalf("got %d, want the server's 404", status)
	}
	if s := c.Stats(); s.Entries != 0 {
		t.Errorf("entry of a 404 kept: %+v", s)
	}
}

func TestCacheConcurrentUse(t *testing.T) {
	o, srv := newOrigin(t)
	paths := []string{"/r/1/comments", "/r/2/comments", "/r/3/comments", "/r/4/comments"}
	for _, p := range paths {
		o.set(p, p)
	}
	c := NewCache(nil, 3) // fewer entries than paths: eviction under load
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				p := paths[(g+i)%len(paths)]
				method := "GET"
				if i%10 == 9 {
					method = "POST"
				}
				req, _ := http.NewRequest(method, srv.URL+p, nil)
				req.Header.Set("Authorization", "Bearer "+strconv.Itoa(g%2))
				resp, err := c.RoundTrip(req)
				if err != nil {
					errs <- err
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					errs <- err
					continue
				}
				if method == "GET" && (resp.StatusCode != 200 || !strings.HasPrefix(string(b), p)) {
					errs <- fmt.Errorf("GET %s: %d %q", p, resp.StatusCode, b)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := c.Stats(); s.Entries > 3 || s.Revalidated == 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestCacheUnderRetryAgainstGitHubEmulator stacks retry → cache → network
// as the app does and polls an issue and its comments on the GitHub
// emulator with raw API calls.
func TestCacheUnderRetryAgainstGitHubEmulator(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "Fix it", Body: "please", Labels: []string{"coding agent"}})
	cache := NewCache(g.Client().Transport, 100)
	client := NewClient(Options{Base: cache, Sleep: func(context.Context, time.Duration) error { return nil }})
	issueURL := fmt.Sprintf("%s/repos/acme/app/issues/%d", g.URL(), n)
	get := func(url string) (map[string]any, []any, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+g.Token)
		req.Header.Set("Accept", "application/vnd.github+json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s", url, resp.Status)
		}
		var v any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("decoding %s: %v", url, err)
		}
		obj, _ := v.(map[string]any)
		list, _ := v.([]any)
		return obj, list, resp.Header
	}

	first, _, _ := get(issueURL)
	spent := 5000 - g.RateRemaining("core")
	get(g.URL() + "/user") // spends one more request, so the 304's rate headers differ from the stored ones
	g.Inject(forgetest.Fault{Method: "GET", Path: fmt.Sprintf("/issues/%d", n), Status: 502})
	second, _, h := get(issueURL)
	if second["title"] != "Fix it" || second["updated_at"] != first["updated_at"] || h.Get(CacheHeader) != CacheRevalidated {
		t.Fatalf("second GET: %v (marker %q), want the stored issue", second, h.Get(CacheHeader))
	}
	if got, want := h.Get("X-RateLimit-Remaining"), strconv.Itoa(g.RateRemaining("core")); got != want {
		t.Errorf("X-RateLimit-Remaining %s, want the 304's %s", got, want)
	}
	if spentNow := 5000 - g.RateRemaining("core"); spentNow != spent+1 {
		t.Errorf("the revalidation spent rate limit: %d used, want %d", spentNow, spent+1)
	}
	var issueGets []forgetest.Request
	for _, r := range g.Requests() {
		if r.Method == "GET" && strings.HasSuffix(r.Path, fmt.Sprintf("/issues/%d", n)) {
			issueGets = append(issueGets, r)
		}
	}
	if len(issueGets) != 3 || issueGets[0].Conditional || issueGets[0].Status != 200 ||
		!issueGets[1].Conditional || issueGets[1].Status != 502 || !issueGets[2].Conditional || issueGets[2].Status != 304 {
		t.Fatalf("issue GETs %+v, want a 200, then a conditional 502 retried into a conditional 304", issueGets)
	}

	// A comment posted through the API makes the next list read in full;
	// the one after that is revalidated.
	commentsURL := issueURL + "/comments?per_page=100"
	if _, list, _ := get(commentsURL); len(list) != 0 {
		t.Fatalf("comments before posting: %v", list)
	}
	req, _ := http.NewRequest("POST", issueURL+"/comments", strings.NewReader(`{"body":"on it"}`))
	req.Header.Set("Authorization", "Bearer "+g.Token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("posting a comment: %s", resp.Status)
	}
	_, list, h := get(commentsURL)
	if len(list) != 1 || h.Get(CacheHeader) != "" {
		t.Fatalf("comments after posting: %v (marker %q), want the new comment from the server", list, h.Get(CacheHeader))
	}
	_, list, h = get(commentsURL)
	if len(list) != 1 || h.Get(CacheHeader) != CacheRevalidated {
		t.Fatalf("comments polled again: %v (marker %q)", list, h.Get(CacheHeader))
	}
	log := g.Requests()
	if last := log[len(log)-1]; !last.Conditional || last.Status != http.StatusNotModified {
		t.Errorf("last poll %+v, want a conditional 304", last)
	}
	if before := log[len(log)-2]; before.Conditional {
		t.Errorf("first list after the POST was conditional: %+v", before)
	}
}
