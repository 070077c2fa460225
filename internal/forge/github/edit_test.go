package github_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

// retrying builds the HTTP client the application uses: httpx over the
// emulator, with waits that return at once.
func retrying(g *forgetest.GitHub) *http.Client {
	return httpx.NewClient(httpx.Options{
		Base:  g.Client().Transport,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
}

func withRetries(g *forgetest.GitHub) func(*github.Options) {
	return func(o *github.Options) { o.HTTPClient = retrying(g) }
}

// addItem adds issue #1 to acme/app and, for task.PullRequest, pull request
// #2 after it, and returns the number of the one of that kind.
func addItem(g *forgetest.GitHub, kind task.Kind) int {
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	if kind == task.PullRequest {
		n = g.AddPull("acme/app", forgetest.PullSeed{IssueSeed: forgetest.IssueSeed{Title: "p"}})
	}
	return n
}

// commented is an emulator holding issue acme/app#1 with one comment, by
// author, reading body, and a client on it that retries through httpx.
func commented(t *testing.T, author, body string) (*forgetest.GitHub, *github.Client, task.Ref, int64) {
	t.Helper()
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	id := g.AddComment("acme/app", n, author, body)
	c, _ := newClient(t, g, withRetries(g))
	return g, c, ref(task.Issue, "acme/app", n), id
}

// refusal is a call that must fail: with an error containing want that is
// forge.ErrNotFound exactly when notFound, after requests requests.
type refusal struct {
	name     string
	ref      task.Ref
	id       int64
	arg      string // the body of an edit, the emoji of a reaction
	notFound bool
	requests int
	want     string
}

// checkRefusals makes each call on g and checks how it fails.
func checkRefusals(t *testing.T, g *forgetest.GitHub, call func(refusal) error, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		g.ResetRequests()
		err := call(tc)
		if err == nil || errors.Is(err, forge.ErrNotFound) != tc.notFound || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q (not found: %v)", tc.name, err, tc.want, tc.notFound)
		}
		if got := len(g.Requests()); got != tc.requests {
			t.Errorf("%s: %d requests, want %d (a refusal is not retried)", tc.name, got, tc.requests)
		}
	}
}

const editPath = "/issues/comments/"

func TestEditCommentReplacesBodyInPlace(t *testing.T) {
	for _, kind := range []task.Kind{task.Issue, task.PullRequest} {
		t.Run(string(kind), func(t *testing.T) {
			g := forgetest.NewGitHub(t)
			n := addItem(g, kind)
			c, _ := newClient(t, g, withRetries(g))
			r := ref(kind, "acme/app", n)
			cm, err := c.PostComment(t.Context(), r, "- [ ] build\n- [ ] test")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.EditComment(t.Context(), r, cm.ID, "- [x] build\n- [ ] test"); err != nil {
				t.Fatal(err)
			}
			got := g.Comments("acme/app", n)
			if len(got) != 1 || got[0].ID != cm.ID || got[0].Body != "- [x] build\n- [ ] test" {
				t.Errorf("comments %+v, want comment %d edited in place", got, cm.ID)
			}
			if n := g.Count("PATCH", editPath+strconv.FormatInt(cm.ID, 10)); n != 1 || len(g.Requests()) != 2 {
				t.Errorf("%d PATCHes among %d requests, want the one PATCH after the POST", n, len(g.Requests()))
			}
			read, err := c.Comments(t.Context(), r)
			if err != nil || len(read) != 1 || read[0].Body != "- [x] build\n- [ ] test" {
				t.Errorf("read back %+v, %v", read, err)
			}
		})
	}
}

func TestEditCommentRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    forgetest.Fault
		attempts int
	}{
		{"502 once", forgetest.Fault{Method: "PATCH", Path: editPath, Status: 502}, 2},
		{"502 after the edit landed", forgetest.Fault{Method: "PATCH", Path: editPath, Status: 502, AfterServe: true}, 2},
		{"503 twice", forgetest.Fault{Method: "PATCH", Path: editPath, Status: 503, Times: 2}, 3},
		{"429", forgetest.Fault{Method: "PATCH", Path: editPath, Status: 429, Header: map[string]string{"Retry-After": "1"}}, 2},
		{"secondary rate limit", forgetest.SecondaryRateLimit("PATCH", editPath, 1), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, c, r, id := commented(t, "coding-agent-bot", "v1")
			g.Inject(tc.fault)
			if err := c.EditComment(t.Context(), r, id, "v2"); err != nil {
				t.Fatal(err)
			}
			if got := g.Comments("acme/app", r.Number); len(got) != 1 || got[0].Body != "v2" {
				t.Errorf("comments %+v, want the one comment reading v2", got)
			}
			if got := g.Count("PATCH", editPath); got != tc.attempts {
				t.Errorf("%d PATCHes, want %d", got, tc.attempts)
			}
		})
	}
}

func TestEditCommentGivesUpAfterFourAttempts(t *testing.T) {
	g, c, r, id := commented(t, "coding-agent-bot", "v1")
	g.Inject(forgetest.Fault{Method: "PATCH", Path: editPath, Status: 500, Times: -1})
	err := c.EditComment(t.Context(), r, id, "v2")
	want := "editing comment " + strconv.FormatInt(id, 10) + " on acme/app#1"
	if err == nil || !strings.Contains(err.Error(), want) || errors.Is(err, forge.ErrNotFound) {
		t.Fatalf("error %v, want one naming %q", err, want)
	}
	if got := g.Count("PATCH", editPath); got != 4 {
		t.Errorf("%d PATCHes, want 4", got)
	}
	if got := g.Comments("acme/app", r.Number)[0].Body; got != "v1" {
		t.Errorf("body %q after failed edits", got)
	}
}

func TestEditCommentFailures(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	theirs := g.AddComment("acme/app", n, "alice", "please")
	mine := g.AddComment("acme/app", n, "coding-agent-bot", "v1")
	other := g.AddComment("acme/lib", g.AddIssue("acme/lib", forgetest.IssueSeed{Title: "b"}), "coding-agent-bot", "x")
	c, _ := newClient(t, g, withRetries(g))
	issue := ref(task.Issue, "acme/app", n)
	edit := func(tc refusal) error { return c.EditComment(t.Context(), tc.ref, tc.id, tc.arg) }
	checkRefusals(t, g, edit, []refusal{
		{"unknown comment", issue, 99999, "x", true, 1, "editing comment 99999 on acme/app#1"},
		{"comment of another repository", issue, other, "x", true, 1, "editing comment " + strconv.FormatInt(other, 10) + " on acme/app#1"},
		{"unknown repository", ref(task.Issue, "acme/gone", 1), mine, "x", true, 1, "on acme/gone#1"},
		{"someone else's comment", issue, theirs, "x", false, 1, "403"},
		{"empty body", issue, mine, " \n", false, 0, "body is empty"},
		{"zero id", issue, 0, "x", false, 0, "comment id must be positive"},
		{"gitlab ref", task.Ref{Forge: task.GitLab, Repo: "acme/app", Kind: task.Issue, Number: n}, mine, "x", false, 0, "not a github task"},
	})
	if got := g.Comments("acme/app", n); got[0].Body != "please" || got[1].Body != "v1" {
		t.Errorf("comments %+v changed", got)
	}
}
