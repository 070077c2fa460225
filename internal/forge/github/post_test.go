package github_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

func TestPostCommentPostsAsBot(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	c, s := newClient(t, g)
	cm, err := c.PostComment(t.Context(), ref(task.Issue, "acme/app", n), "hello")
	if err != nil {
		t.Fatal(err)
	}
	stored := g.Comments("acme/app", n)
	if len(stored) != 1 || cm.ID != stored[0].ID || cm.Author != "coding-agent-bot" || cm.Body != "hello" {
		t.Errorf("returned %+v, stored %+v", cm, stored)
	}
	if len(s.got()) != 0 || g.Count("GET", "/comments") != 0 {
		t.Errorf("a clean post waited %v and listed comments %d times", s.got(), g.Count("GET", "/comments"))
	}
}

func TestPostCommentAfterAmbiguous502DoesNotDuplicate(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	// An identical comment by someone else must not be taken for ours.
	g.AddComment("acme/app", n, "alice", "progress: step 1")
	c, s := newClient(t, g)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/comments", Status: 502, AfterServe: true})
	cm, err := c.PostComment(t.Context(), ref(task.Issue, "acme/app", n), "progress: step 1")
	if err != nil {
		t.Fatal(err)
	}
	var ours []forgetest.Comment
	for _, sc := range g.Comments("acme/app", n) {
		if sc.Author == "coding-agent-bot" {
			ours = append(ours, sc)
		}
	}
	if len(ours) != 1 || ours[0].ID != cm.ID {
		t.Fatalf("bot comments %+v, returned %+v: want exactly the one that landed", ours, cm)
	}
	if g.Count("POST", "/comments") != 1 {
		t.Errorf("%d POSTs, want 1", g.Count("POST", "/comments"))
	}
	if !slices.Equal(s.got(), []time.Duration{time.Second}) {
		t.Errorf("waits %v, want [1s]", s.got())
	}
}

func TestPostCommentRepostsWhenNothingLanded(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	c, _ := newClient(t, g)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/comments", Status: 503, Times: 2})
	if _, err := c.PostComment(t.Context(), ref(task.Issue, "acme/app", n), "x"); err != nil {
		t.Fatal(err)
	}
	if got := len(g.Comments("acme/app", n)); got != 1 {
		t.Errorf("%d comments, want 1", got)
	}
	if g.Count("POST", "/comments") != 3 || g.Count("GET", "/issues/1/comments") != 2 {
		t.Errorf("POSTs %d (want 3), checks %d (want 2)", g.Count("POST", "/comments"), g.Count("GET", "/issues/1/comments"))
	}
}

func TestPostCommentHonoursRetryAfterOn429(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	c, s := newClient(t, g)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/comments", Status: 429, Header: map[string]string{
		"Retry-After": "7", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": fmt.Sprint(time.Now().Add(time.Hour).Unix()),
	}})
	r := ref(task.Issue, "acme/app", n)
	if _, err := c.PostComment(t.Context(), r, "x"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.got(), []time.Duration{7 * time.Second}) {
		t.Errorf("waits %v, want [7s]", s.got())
	}
	if g.Count("GET", "/comments") != 0 {
		t.Error("a 429 means nothing was posted: no check is needed")
	}
	// The remembered reset an hour away must not block the next calls.
	if _, err := c.PostComment(t.Context(), r, "y"); err != nil {
		t.Fatalf("posting after a 429: %v", err)
	}
	if got := len(g.Comments("acme/app", n)); got != 2 || g.Count("POST", "/comments") != 3 {
		t.Errorf("%d comments after %d POSTs, want 2 after 3", got, g.Count("POST", "/comments"))
	}
}

func TestPostCommentSecondaryRateLimit(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	c, s := newClient(t, g)
	g.Inject(forgetest.SecondaryRateLimit("POST", "/comments", 61))
	if _, err := c.PostComment(t.Context(), ref(task.Issue, "acme/app", n), "x"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.got(), []time.Duration{61 * time.Second}) || len(g.Comments("acme/app", n)) != 1 {
		t.Errorf("waits %v, %d comments; want [1m1s] and 1", s.got(), len(g.Comments("acme/app", n)))
	}
}

func TestPostCommentGivesUpAfterFourAttempts(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	c, s := newClient(t, g)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/comments", Status: 502, Times: -1})
	_, err := c.PostComment(t.Context(), ref(task.Issue, "acme/app", n), "x")
	if err == nil || !strings.Contains(err.Error(), "posting comment on acme/app#1") {
		t.Fatalf("error %v", err)
	}
	if g.Count("POST", "/comments") != 4 {
		t.Errorf("%d POSTs, want 4", g.Count("POST", "/comments"))
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}; !slices.Equal(s.got(), want) {
		t.Errorf("waits %v, want %v", s.got(), want)
	}
}

func TestPostCommentRefusesLongWait(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	c, s := newClient(t, g, func(o *github.Options) { o.MaxRetryWait = time.Minute })
	g.Inject(forgetest.Fault{Method: "POST", Path: "/comments", Status: 429, Header: map[string]string{"Retry-After": "3600"}})
	if _, err := c.PostComment(t.Context(), ref(task.Issue, "acme/app", n), "x"); err == nil {
		t.Fatal("a one-hour Retry-After was waited out")
	}
	if len(s.got()) != 0 || g.Count("POST", "/comments") != 1 {
		t.Errorf("waits %v, POSTs %d", s.got(), g.Count("POST", "/comments"))
	}
}

func TestPostCommentStopsWhenContextEnds(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	ctx, cancel := context.WithCancel(t.Context())
	c, _ := newClient(t, g, func(o *github.Options) {
		o.Sleep = func(ctx context.Context, d time.Duration) error { cancel(); return ctx.Err() }
	})
	g.Inject(forgetest.Fault{Method: "POST", Path: "/comments", Status: 500, Times: -1})
	_, err := c.PostComment(ctx, ref(task.Issue, "acme/app", n), "x")
	if !errors.Is(err, context.Canceled) || g.Count("POST", "/comments") != 1 {
		t.Errorf("error %v after %d POSTs; want context.Canceled after 1", err, g.Count("POST", "/comments"))
	}
}
