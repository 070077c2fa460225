package gitlab_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/forge/gitlab"
	"github.com/coding-agent/coding-agent/internal/forgetest"
)

func seedIssue(t *testing.T) *forgetest.GitLab {
	t.Helper()
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	return g
}

func bodies(g *forgetest.GitLab) []string {
	var out []string
	for _, n := range g.Notes("acme/app", forgetest.KindIssue, 1) {
		out = append(out, n.Author+": "+n.Body)
	}
	return out
}

func TestPostCommentAfterAmbiguous502DoesNotDuplicate(t *testing.T) {
	g := seedIssue(t)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/notes", Status: 502, AfterServe: true})
	c, s := newClient(t, g, nil)
	got, err := c.PostComment(t.Context(), issueRef("acme/app", 1), "progress report")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"coding-agent-bot: progress report"}, bodies(g)); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	notes := g.Notes("acme/app", forgetest.KindIssue, 1)
	if got.ID != notes[0].ID || got.Author != "coding-agent-bot" {
		t.Errorf("returned comment %+v, want note %d", got, notes[0].ID)
	}
	if n := g.Count("POST", "/notes"); n != 1 {
		t.Errorf("%d POSTs, want 1", n)
	}
	if len(s.got()) != 1 {
		t.Errorf("waits %v, want one before the check", s.got())
	}
}

func TestPostCommentAfter502ThatDidNotLandPostsAgain(t *testing.T) {
	g := seedIssue(t)
	// Someone else wrote the same words: that is not the bot's note.
	g.AddNote("acme/app", forgetest.KindIssue, 1, "alice", "same words", false)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/notes", Status: 502})
	c, s := newClient(t, g, nil)
	if _, err := c.PostComment(t.Context(), issueRef("acme/app", 1), "same words"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"alice: same words", "coding-agent-bot: same words"}, bodies(g)); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	if n := g.Count("POST", "/notes"); n != 2 {
		t.Errorf("%d POSTs, want 2", n)
	}
	if diff := cmp.Diff([]time.Duration{time.Second}, s.got()); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

// resetOnce answers the first POST with a reset connection after the
// server has handled it.
type resetOnce struct {
	next http.RoundTripper
	done atomic.Bool
}

func (r *resetOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil && req.Method == "POST" && r.done.CompareAndSwap(false, true) {
		resp.Body.Close()
		return nil, syscall.ECONNRESET
	}
	return resp, err
}

func TestPostCommentAfterConnectionResetDoesNotDuplicate(t *testing.T) {
	g := seedIssue(t)
	hc := &http.Client{Transport: &resetOnce{next: g.Client().Transport}}
	c, _ := newClient(t, g, func(o *gitlab.Options) { o.HTTPClient = hc })
	if _, err := c.PostComment(t.Context(), issueRef("acme/app", 1), "done"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"coding-agent-bot: done"}, bodies(g)); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
}

func TestPostComment429HonoursRetryAfter(t *testing.T) {
	g := seedIssue(t)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/notes", Status: 429, Header: map[string]string{"Retry-After": "7"}})
	c, s := newClient(t, g, nil)
	if _, err := c.PostComment(t.Context(), issueRef("acme/app", 1), "hi"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]time.Duration{7 * time.Second}, s.got()); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	// A 429 posted nothing: no need to look before posting again.
	if n := g.Count("GET", "/notes"); n != 0 {
		t.Errorf("%d note listings after a 429, want 0", n)
	}
	if n := g.Count("POST", "/notes"); n != 2 || len(bodies(g)) != 1 {
		t.Errorf("%d POSTs, notes %v", n, bodies(g))
	}
}

func TestPostCommentGivesUpAfterFourAttempts(t *testing.T) {
	g := seedIssue(t)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/notes", Status: 503, Times: -1})
	c, s := newClient(t, g, nil)
	_, err := c.PostComment(t.Context(), issueRef("acme/app", 1), "hi")
	if err == nil || !strings.Contains(err.Error(), "posting comment on acme/app#1") {
		t.Fatalf("error %v", err)
	}
	if n := g.Count("POST", "/notes"); n != 4 {
		t.Errorf("%d POSTs, want 4", n)
	}
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, s.got()); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

func TestPostCommentChecksAfterTheLastAmbiguousAttempt(t *testing.T) {
	g := seedIssue(t)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/notes", Status: 503, Times: 3})
	g.Inject(forgetest.Fault{Method: "POST", Path: "/notes", Status: 502, AfterServe: true})
	c, _ := newClient(t, g, nil)
	if _, err := c.PostComment(t.Context(), issueRef("acme/app", 1), "hi"); err != nil {
		t.Fatalf("the fourth attempt landed, yet: %v", err)
	}
	if n := g.Count("POST", "/notes"); n != 4 || len(bodies(g)) != 1 {
		t.Errorf("%d POSTs, notes %v; want 4 and one note", n, bodies(g))
	}
}

func TestPostCommentRefusesAnOverlongWait(t *testing.T) {
	g := seedIssue(t)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/notes", Status: 429, Header: map[string]string{"Retry-After": "3600"}})
	c, s := newClient(t, g, nil)
	if _, err := c.PostComment(t.Context(), issueRef("acme/app", 1), "hi"); err == nil {
		t.Fatal("no error")
	}
	if len(s.got()) != 0 || len(bodies(g)) != 0 {
		t.Errorf("waits %v, notes %v", s.got(), bodies(g))
	}
}

func TestPostCommentOtherErrorsAreFinal(t *testing.T) {
	g := seedIssue(t)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/notes", Status: 403})
	c, _ := newClient(t, g, nil)
	if _, err := c.PostComment(t.Context(), issueRef("acme/app", 1), "hi"); err == nil {
		t.Fatal("no error")
	}
	if n := g.Count("POST", "/notes"); n != 1 {
		t.Errorf("%d POSTs, want 1", n)
	}
}

// TestLibraryRetriesAreOff checks that each failure reaches the caller after
// exactly one request: the HTTP client given in Options is the only retry
// layer.
func TestLibraryRetriesAreOff(t *testing.T) {
	g := seedIssue(t)
	c, _ := newClient(t, g, nil)
	ctx := t.Context()
	cases := []struct {
		method, path string
		status       int
		call         func() error
	}{
		{"GET", "/user", 502, func() error { _, err := c.BotUser(ctx); return err }},
		{"GET", "/issues/1", 429, func() error { _, err := c.Get(ctx, issueRef("acme/app", 1)); return err }},
		{"PUT", "/issues/1", 503, func() error { return c.AddLabel(ctx, issueRef("acme/app", 1), "x") }},
		{"GET", "/notes", 500, func() error { _, err := c.Comments(ctx, issueRef("acme/app", 1)); return err }},
	}
	for _, tc := range cases {
		g.ResetRequests()
		g.Inject(forgetest.Fault{Method: tc.method, Path: tc.path, Status: tc.status})
		if err := tc.call(); err == nil {
			t.Errorf("%s %s: no error after a %d", tc.method, tc.path, tc.status)
		}
		if n := g.Count(tc.method, tc.path); n != 1 {
			t.Errorf("%s %s after a %d: %d requests, want 1", tc.method, tc.path, tc.status, n)
		}
	}
}

func TestNewNeedsAToken(t *testing.T) {
	if _, err := gitlab.New(gitlab.Options{}); err == nil {
		t.Error("no error without a token")
	}
}
