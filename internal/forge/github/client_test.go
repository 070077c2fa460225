package github_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// sleeper records the waits asked of it and returns at once.
type sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
	return ctx.Err()
}

func (s *sleeper) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.waits)
}

// newClient builds a client on the emulator; opts may adjust the options.
func newClient(t *testing.T, g *forgetest.GitHub, opts ...func(*github.Options)) (*github.Client, *sleeper) {
	t.Helper()
	s := &sleeper{}
	o := github.Options{APIURL: g.URL(), Token: g.Token, Repositories: []string{"acme/app"}, HTTPClient: g.Client(), Sleep: s.sleep}
	for _, f := range opts {
		f(&o)
	}
	c, err := github.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

func ref(kind task.Kind, repo string, n int) task.Ref {
	return task.Ref{Forge: task.GitHub, Repo: repo, Kind: kind, Number: n}
}

func TestNewValidatesOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    github.Options
		want string
	}{
		{"bad scheme", github.Options{APIURL: "ftp://x", Token: "t", Owner: "acme"}, "http(s)"},
		{"no host", github.Options{APIURL: "https://", Token: "t", Owner: "acme"}, "host"},
		{"query", github.Options{APIURL: "https://ghe.example/api/v3?x=1", Token: "t", Owner: "acme"}, "query"},
		{"no token", github.Options{Owner: "acme"}, "token"},
		{"no scope", github.Options{Token: "t"}, "owner or repositories"},
		{"bad repo", github.Options{Token: "t", Repositories: []string{"acme"}}, "owner/name"},
		{"bad owner", github.Options{Token: "t", Owner: "acme/app"}, "owner"},
	} {
		_, err := github.New(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
	if _, err := github.New(github.Options{Token: "t", Owner: "acme"}); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestGetIssueAndPullRequest(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "Fix it", Body: "details", Author: "alice",
		Labels: []string{"coding agent"}, Assignees: []string{"bob"}})
	p := g.AddPull("acme/app", forgetest.PullSeed{IssueSeed: forgetest.IssueSeed{Title: "PR"}, Head: "fix-1", Base: "release"})
	c, _ := newClient(t, g)

	got, err := c.Get(t.Context(), ref(task.Issue, "acme/app", n))
	if err != nil {
		t.Fatal(err)
	}
	if got.Ref != ref(task.Issue, "acme/app", n) || got.Title != "Fix it" || got.Body != "details" || got.Author != "alice" ||
		got.State != "open" || !slices.Equal(got.Labels, []string{"coding agent"}) || !slices.Equal(got.Assignees, []string{"bob"}) ||
		!strings.HasSuffix(got.URL, "/acme/app/issues/1") || got.CreatedAt.IsZero() || got.HeadBranch != "" {
		t.Errorf("issue = %+v", got)
	}
	got, err = c.Get(t.Context(), ref(task.PullRequest, "acme/app", p))
	if err != nil {
		t.Fatal(err)
	}
	if got.Ref.Kind != task.PullRequest || got.HeadBranch != "fix-1" || got.BaseBranch != "release" {
		t.Errorf("pull request = %+v", got)
	}
	if g.Count("GET", "/pulls/") != 1 {
		t.Errorf("GET pulls/{n} sent %d times, want once (for the pull request only)", g.Count("GET", "/pulls/"))
	}
}

func TestNotFoundIsErrNotFound(t *testing.T) {
	g := forgetest.NewGitHub(t)
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	c, _ := newClient(t, g)
	ctx := t.Context()
	missing := ref(task.Issue, "acme/app", 42)
	_, err := c.Get(ctx, missing)
	if !errors.Is(err, forge.ErrNotFound) || !strings.Contains(err.Error(), "getting acme/app#42") {
		t.Errorf("Get of a missing issue: %v", err)
	}
	if _, err := c.Comments(ctx, ref(task.Issue, "acme/nope", 1)); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("Comments in a missing repo: %v", err)
	}
	if _, err := c.PostComment(ctx, missing, "x"); !errors.Is(err, forge.ErrNotFound) ||
		!strings.Contains(err.Error(), "posting comment on acme/app#42") {
		t.Errorf("PostComment on a missing issue: %v", err)
	}
	if g.Count("POST", "/comments") != 1 {
		t.Errorf("a 404 was retried: %d POSTs", g.Count("POST", "/comments"))
	}
	if err := c.AddLabel(ctx, missing, "x"); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("AddLabel on a missing issue: %v", err)
	}
	if err := c.RemoveLabel(ctx, missing, "x"); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("RemoveLabel on a missing issue: %v (a missing issue is not a missing label)", err)
	}
	if _, err := c.Get(ctx, task.Ref{Forge: task.GitLab, Repo: "acme/app", Number: 1}); err == nil {
		t.Error("a gitlab ref was accepted")
	}
}

func TestCommentsAllPagesInOrder(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	for i := range 250 {
		g.AddComment("acme/app", n, "alice", fmt.Sprint("c", i))
	}
	c, _ := newClient(t, g)
	cs, err := c.Comments(t.Context(), ref(task.Issue, "acme/app", n))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 250 {
		t.Fatalf("got %d comments, want 250", len(cs))
	}
	for i, cm := range cs {
		if cm.Body != fmt.Sprint("c", i) || cm.Author != "alice" || cm.ID == 0 || cm.CreatedAt.IsZero() {
			t.Fatalf("comment %d = %+v", i, cm)
		}
	}
	if got := g.Count("GET", "/issues/1/comments"); got != 3 {
		t.Errorf("%d requests for 250 comments, want 3 pages of 100", got)
	}
}

func TestLabelsOneByOneKeepOthers(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a", Labels: []string{"coding agent"}})
	c, _ := newClient(t, g)
	ctx := t.Context()
	r := ref(task.Issue, "acme/app", n)

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, l := range []string{"coding agent processing", "area/ci?x#y", "needs review"} {
		wg.Go(func() { errs <- c.AddLabel(ctx, r, l) })
	}
	wg.Go(func() { g.AddLabelDirect("acme/app", n, "set by a person") })
	wg.Go(func() { errs <- c.RemoveLabel(ctx, r, "coding agent") })
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := g.Labels("acme/app", n)
	slices.Sort(got)
	want := []string{"area/ci?x#y", "coding agent processing", "needs review", "set by a person"}
	if !slices.Equal(got, want) {
		t.Errorf("labels %q, want %q", got, want)
	}
	if err := c.RemoveLabel(ctx, r, "area/ci?x#y"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveLabel(ctx, r, "coding agent"); err != nil {
		t.Errorf("removing an absent label: %v, want nil", err)
	}
	if got := g.Labels("acme/app", n); slices.Contains(got, "area/ci?x#y") || len(got) != 3 {
		t.Errorf("after removing area/ci?x#y: %q", got)
	}
	if g.Count("PUT", "/labels") != 0 || g.Count("POST", "/labels") != 3 || g.Count("DELETE", "/labels/") != 3 {
		t.Errorf("label requests: PUT %d POST %d DELETE %d, want 0, 3, 3",
			g.Count("PUT", "/labels"), g.Count("POST", "/labels"), g.Count("DELETE", "/labels/"))
	}
}

func TestBotUserCached(t *testing.T) {
	g := forgetest.NewGitHub(t)
	g.BotLogin = "agent-7"
	c, _ := newClient(t, g)
	for range 3 {
		got, err := c.BotUser(t.Context())
		if err != nil || got != "agent-7" {
			t.Fatalf("BotUser = %q, %v", got, err)
		}
	}
	if n := g.Count("GET", "/user"); n != 1 {
		t.Errorf("GET /user sent %d times, want 1", n)
	}
}

func TestErrorsDoNotCarryTheToken(t *testing.T) {
	g := forgetest.NewGitHub(t)
	c, _ := newClient(t, g, func(o *github.Options) { o.Token = "ghp_secretvalue123" })
	_, err := c.BotUser(t.Context())
	if err == nil || strings.Contains(err.Error(), "ghp_secretvalue123") || !strings.Contains(err.Error(), "401") {
		t.Errorf("bad token error: %v", err)
	}
}

func TestEnterpriseAPIURL(t *testing.T) {
	for _, suffix := range []string{"/api/v3", "/api/v3/"} {
		g := forgetest.NewGitHub(t)
		n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a", Labels: []string{"coding agent"}})
		c, _ := newClient(t, g, func(o *github.Options) { o.APIURL = g.URL() + suffix })
		ctx := t.Context()
		ts, err := c.Discover(ctx, "coding agent")
		if err != nil || len(ts) != 1 || ts[0].Ref.Repo != "acme/app" {
			t.Fatalf("%s: Discover = %+v, %v", suffix, ts, err)
		}
		if _, err := c.PostComment(ctx, ts[0].Ref, "hi"); err != nil {
			t.Fatal(err)
		}
		if err := c.AddLabel(ctx, ts[0].Ref, "x"); err != nil {
			t.Fatal(err)
		}
		for _, r := range g.Requests() {
			if !strings.HasPrefix(r.Path, "/api/v3/") {
				t.Errorf("%s: request to %s, outside /api/v3", suffix, r.Path)
			}
		}
		if len(g.Comments("acme/app", n)) != 1 {
			t.Errorf("%s: comment not stored", suffix)
		}
	}
}

// retryGET stands in for the application's retrying HTTP client: it
// resends idempotent requests answered 429, so go-github only sees the
// final answer.
type retryGET struct{ next http.RoundTripper }

func (r retryGET) RoundTrip(req *http.Request) (*http.Response, error) {
	for i := 0; ; i++ {
		resp, err := r.next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || req.Method != http.MethodGet || i == 3 {
			return resp, err
		}
		resp.Body.Close()
	}
}

func TestRateLimitDoesNotWedgeClient(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	reset := fmt.Sprint(time.Now().Add(time.Hour).Unix())
	limited := map[string]string{"Retry-After": "1", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}
	ctx := t.Context()

	// go-github sees the 429 itself: the next call must still be sent.
	c, _ := newClient(t, g)
	g.Inject(forgetest.Fault{Method: "GET", Path: "/issues/1", Status: 429, Header: limited})
	if _, err := c.Get(ctx, ref(task.Issue, "acme/app", n)); err == nil {
		t.Fatal("the 429 was not reported")
	}
	if _, err := c.Get(ctx, ref(task.Issue, "acme/app", n)); err != nil {
		t.Fatalf("the call after a 429 was refused: %v", err)
	}

	// The HTTP client retries past the 429: nothing is remembered either.
	hc := &http.Client{Transport: retryGET{next: g.Client().Transport}}
	c2, _ := newClient(t, g, func(o *github.Options) { o.HTTPClient = hc })
	g.Inject(forgetest.Fault{Method: "GET", Path: "/user", Status: 429, Header: limited})
	if _, err := c2.BotUser(ctx); err != nil {
		t.Fatalf("BotUser past a retried 429: %v", err)
	}
	if _, err := c2.Get(ctx, ref(task.Issue, "acme/app", n)); err != nil {
		t.Fatalf("Get after a retried 429: %v", err)
	}
	if got := g.Count("GET", "/issues/1"); got != 3 {
		t.Errorf("GET issue reached the server %d times, want 3", got)
	}
}

// Of many clients taking one label at once, exactly one takes it (GitHub
// answers 200 to one DELETE and 404 "Label does not exist" to the rest);
// RemoveLabel stays idempotent.
func TestTakeLabelHasOneWinner(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a", Labels: []string{"coding agent", "bug"}})
	r := ref(task.Issue, "acme/app", n)
	const hosts = 8
	errs := make(chan error, hosts)
	var wg sync.WaitGroup
	for range hosts {
		c, _ := newClient(t, g)
		wg.Go(func() { errs <- c.TakeLabel(t.Context(), r, "coding agent") })
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, forge.ErrLabelAbsent):
			t.Errorf("a loser heard %v, want ErrLabelAbsent", err)
		}
	}
	if won != 1 {
		t.Errorf("%d clients took the label, want 1", won)
	}
	if got := g.Labels("acme/app", n); !slices.Equal(got, []string{"bug"}) {
		t.Errorf("labels %q, want [bug]", got)
	}
	c, _ := newClient(t, g)
	if err := c.RemoveLabel(t.Context(), r, "coding agent"); err != nil {
		t.Errorf("removing the absent label: %v, want nil", err)
	}
	if err := c.TakeLabel(t.Context(), ref(task.Issue, "acme/app", 99), "coding agent"); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("taking from a missing issue: %v, want ErrNotFound", err)
	}
}

// Of clients deleting one comment at once, one deletes it; the others hear
// ErrNotFound.
func TestDeleteCommentHasOneWinner(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	r := ref(task.Issue, "acme/app", n)
	c, _ := newClient(t, g)
	posted, err := c.PostComment(t.Context(), r, "holder")
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { errs <- c.DeleteComment(t.Context(), r, posted.ID) })
	}
	wg.Wait()
	close(errs)
	deleted := 0
	for err := range errs {
		switch {
		case err == nil:
			deleted++
		case !errors.Is(err, forge.ErrNotFound):
			t.Errorf("a second delete heard %v, want ErrNotFound", err)
		}
	}
	if deleted != 1 || len(g.Comments("acme/app", n)) != 0 {
		t.Errorf("%d deletes succeeded, %d comments left; want 1 and 0", deleted, len(g.Comments("acme/app", n)))
	}
}
