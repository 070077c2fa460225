package gitlab_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/gitlab"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

// withRetries gives the client the HTTP client the application uses: httpx
// over the emulator, with waits that return at once.
func withRetries(g *forgetest.GitLab) func(*gitlab.Options) {
	return func(o *gitlab.Options) {
		o.HTTPClient = httpx.NewClient(httpx.Options{
			Base:  g.Client().Transport,
			Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		})
	}
}

// seedBoth adds acme/app with issue #1 and merge request !1, each carrying
// one note by the bot, and returns the note ids by kind.
func seedBoth(t *testing.T) (*forgetest.GitLab, map[task.Kind]int64) {
	t.Helper()
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	g.AddMR("acme/app", forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: "m"}})
	return g, map[task.Kind]int64{
		task.Issue:        g.AddNote("acme/app", forgetest.KindIssue, 1, "coding-agent-bot", "v1", false),
		task.MergeRequest: g.AddNote("acme/app", forgetest.KindMergeRequest, 1, "coding-agent-bot", "v1", false),
	}
}

var emulatorKind = map[task.Kind]string{task.Issue: forgetest.KindIssue, task.MergeRequest: forgetest.KindMergeRequest}

func refOf(kind task.Kind) task.Ref {
	return task.Ref{Forge: task.GitLab, Repo: "acme/app", Kind: kind, Number: 1}
}

// noteBodies returns the bodies of the notes of item 1 of that kind.
func noteBodies(g *forgetest.GitLab, kind task.Kind) []string {
	var out []string
	for _, n := range g.Notes("acme/app", emulatorKind[kind], 1) {
		out = append(out, n.Body)
	}
	return out
}

// refusal is a call that must fail: with an error containing want that is
// forge.ErrNotFound exactly when notFound, after requests requests.
type refusal struct {
	name     string
	ref      task.Ref
	id       int64
	arg      string // the body of an edit, the emoji of an award
	notFound bool
	requests int
	want     string
}

// checkRefusals makes each call on g and checks how it fails.
func checkRefusals(t *testing.T, g *forgetest.GitLab, call func(refusal) error, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		g.ResetRequests()
		err := call(tc)
		if err == nil || errors.Is(err, forge.ErrNotFound) != tc.notFound || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q (not found: %v)", tc.name, err, tc.want, tc.notFound)
		}
		if got := len(g.Requests()); got != tc.requests {
			t.Errorf("%s: %d requests, want %d", tc.name, got, tc.requests)
		}
	}
}

func TestEditCommentReplacesNoteInPlace(t *testing.T) {
	for _, kind := range []task.Kind{task.Issue, task.MergeRequest} {
		t.Run(string(kind), func(t *testing.T) {
			g, _ := seedBoth(t)
			c, _ := newClient(t, g, withRetries(g))
			r := refOf(kind)
			cm, err := c.PostComment(t.Context(), r, "- [ ] build\n- [ ] test")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.EditComment(t.Context(), r, cm.ID, "- [x] build\n- [ ] test"); err != nil {
				t.Fatal(err)
			}
			if got := noteBodies(g, kind); len(got) != 2 || got[1] != "- [x] build\n- [ ] test" {
				t.Errorf("notes %q, want the posted note edited in place", got)
			}
			path := "/notes/" + strconv.FormatInt(cm.ID, 10)
			if n := g.Count("PUT", path); n != 1 || len(g.Requests()) != 2 {
				t.Errorf("%d PUTs of %s among %d requests, want the one PUT after the POST", n, path, len(g.Requests()))
			}
			other := task.MergeRequest
			if kind == task.MergeRequest {
				other = task.Issue
			}
			if got := noteBodies(g, other); len(got) != 1 || got[0] != "v1" {
				t.Errorf("the %s's notes changed: %q", other, got)
			}
		})
	}
}

func TestEditCommentRetries(t *testing.T) {
	for _, kind := range []task.Kind{task.Issue, task.MergeRequest} {
		for _, tc := range []struct {
			name     string
			fault    forgetest.Fault
			attempts int
		}{
			{"502 once", forgetest.Fault{Method: "PUT", Path: "/notes/", Status: 502}, 2},
			{"502 after the edit landed", forgetest.Fault{Method: "PUT", Path: "/notes/", Status: 502, AfterServe: true}, 2},
			{"429", forgetest.Fault{Method: "PUT", Path: "/notes/", Status: 429, Header: map[string]string{"Retry-After": "1"}}, 2},
		} {
			t.Run(string(kind)+"/"+tc.name, func(t *testing.T) {
				g, ids := seedBoth(t)
				c, _ := newClient(t, g, withRetries(g))
				g.Inject(tc.fault)
				if err := c.EditComment(t.Context(), refOf(kind), ids[kind], "v2"); err != nil {
					t.Fatal(err)
				}
				if got := noteBodies(g, kind); len(got) != 1 || got[0] != "v2" {
					t.Errorf("notes %q, want the one note reading v2", got)
				}
				if got := g.Count("PUT", "/notes/"); got != tc.attempts {
					t.Errorf("%d PUTs, want %d", got, tc.attempts)
				}
			})
		}
	}
}

func TestEditCommentGivesUpAfterFourAttempts(t *testing.T) {
	for _, kind := range []task.Kind{task.Issue, task.MergeRequest} {
		t.Run(string(kind), func(t *testing.T) {
			g, ids := seedBoth(t)
			c, _ := newClient(t, g, withRetries(g))
			g.Inject(forgetest.Fault{Method: "PUT", Path: "/notes/", Status: 500, Times: -1})
			err := c.EditComment(t.Context(), refOf(kind), ids[kind], "v2")
			want := "editing note " + strconv.FormatInt(ids[kind], 10) + " on " + strings.TrimPrefix(refOf(kind).String(), "gitlab:")
			if err == nil || !strings.HasPrefix(err.Error(), want) || errors.Is(err, forge.ErrNotFound) {
				t.Fatalf("error %v, want one starting %q", err, want)
			}
			if got := g.Count("PUT", "/notes/"); got != 4 {
				t.Errorf("%d PUTs, want 4", got)
			}
			if got := noteBodies(g, kind); got[0] != "v1" {
				t.Errorf("note reads %q after failed edits", got[0])
			}
		})
	}
}

func TestEditCommentFailures(t *testing.T) {
	g, ids := seedBoth(t)
	theirs := g.AddNote("acme/app", forgetest.KindIssue, 1, "alice", "please", false)
	c, _ := newClient(t, g, withRetries(g))
	issue, mr := refOf(task.Issue), refOf(task.MergeRequest)
	// A refusal is not retried: one request at most.
	edit := func(tc refusal) error { return c.EditComment(t.Context(), tc.ref, tc.id, tc.arg) }
	checkRefusals(t, g, edit, []refusal{
		{"unknown note", issue, 99999, "x", true, 1, "editing note 99999 on acme/app#1"},
		{"note of the merge request on the issue", issue, ids[task.MergeRequest], "x", true, 1, "on acme/app#1"},
		{"unknown merge request", task.Ref{Forge: task.GitLab, Repo: "acme/app", Kind: task.MergeRequest, Number: 9}, ids[task.MergeRequest], "x", true, 1, "on acme/app!9"},
		{"unknown project", task.Ref{Forge: task.GitLab, Repo: "acme/gone", Kind: task.Issue, Number: 1}, ids[task.Issue], "x", true, 1, "on acme/gone#1"},
		{"someone else's note", issue, theirs, "x", false, 1, "403"},
		{"empty body", mr, ids[task.MergeRequest], "  ", false, 0, "body is empty"},
		{"zero id", issue, 0, "x", false, 0, "note id must be positive"},
		{"github ref", task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 1}, ids[task.Issue], "x", false, 0, "not a gitlab task"},
	})
	if got := noteBodies(g, task.Issue); got[0] != "v1" || got[1] != "please" {
		t.Errorf("issue notes %q changed", got)
	}
	if got := noteBodies(g, task.MergeRequest); got[0] != "v1" {
		t.Errorf("merge request notes %q changed", got)
	}
}
