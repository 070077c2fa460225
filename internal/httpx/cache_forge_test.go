package httpx_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	ghforge "github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

// TestCacheUnderGitHubAdapter reads an issue and its comments twice through
// the real GitHub adapter on an httpx client built like the app's (retry →
// cache → network): the second reads are conditional, answered 304, spend
// no rate limit, and give the same task and comments.
func TestCacheUnderGitHubAdapter(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "Fix it", Body: "details", Author: "alice",
		Labels: []string{"coding agent"}})
	g.AddComment("acme/app", n, "alice", "more details")
	cache := httpx.NewCache(g.Client().Transport, 100)
	client := httpx.NewClient(httpx.Options{Base: cache, Sleep: func(context.Context, time.Duration) error { return nil }})
	f, err := ghforge.New(ghforge.Options{APIURL: g.URL(), Token: g.Token, Repositories: []string{"acme/app"}, HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	ref := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n}
	ctx := t.Context()

	first, err := f.Get(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	firstComments, err := f.Comments(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	remaining := g.RateRemaining("core")
	g.ResetRequests()

	second, err := f.Get(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	secondComments, err := f.Comments(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, second) {
		t.Errorf("task read again differs:\nfirst  %+v\nsecond %+v", first, second)
	}
	if !reflect.DeepEqual(firstComments, secondComments) || len(secondComments) != 1 {
		t.Errorf("comments read again differ:\nfirst  %+v\nsecond %+v", firstComments, secondComments)
	}
	reqs := g.Requests()
	if len(reqs) != 2 {
		t.Fatalf("second reads sent %+v, want one issue GET and one comment list GET", reqs)
	}
	for _, r := range reqs {
		if r.Method != "GET" || !r.Conditional || r.Status != 304 {
			t.Errorf("second read %+v, want a conditional GET answered 304", r)
		}
	}
	if got := g.RateRemaining("core"); got != remaining {
		t.Errorf("rate limit remaining %d after the revalidations, want %d unchanged", got, remaining)
	}
	if s := cache.Stats(); s.Revalidated != 2 {
		t.Errorf("cache stats %+v, want 2 revalidated", s)
	}

	// A comment posted through the adapter is seen on the next read.
	if _, err := f.PostComment(ctx, ref, "on it"); err != nil {
		t.Fatal(err)
	}
	third, err := f.Comments(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(third) != 2 || !strings.Contains(third[1].Body, "on it") {
		t.Errorf("comments after posting: %+v", third)
	}
}
