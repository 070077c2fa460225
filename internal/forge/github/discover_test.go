package github_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

var epoch = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

// checkOldestFirst fails unless ts is sorted by creation, without
// duplicates, and only open.
func checkOldestFirst(t *testing.T, ts []task.Task) {
	t.Helper()
	seen := map[task.Ref]bool{}
	for i, tk := range ts {
		if seen[tk.Ref] {
			t.Fatalf("%s listed twice", tk.Ref)
		}
		seen[tk.Ref] = true
		if tk.State != "open" {
			t.Fatalf("%s is %s", tk.Ref, tk.State)
		}
		if i > 0 && tk.CreatedAt.Before(ts[i-1].CreatedAt) {
			t.Fatalf("%s (created %s) after %s (created %s): not oldest first", tk.Ref, tk.CreatedAt, ts[i-1].Ref, ts[i-1].CreatedAt)
		}
	}
}

func TestDiscoverRepositoriesReadsEveryPage(t *testing.T) {
	g := forgetest.NewGitHub(t)
	label := "coding agent"
	want := map[task.Ref]bool{}
	// Numbers and creation times run in opposite directions, so the order
	// can only come from sorting by creation.
	for i := range 130 {
		n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: fmt.Sprint("issue ", i), Labels: []string{"bug", label}})
		g.SetCreatedAt("acme/app", n, epoch.Add(time.Duration(200-i)*time.Minute))
		want[ref(task.Issue, "acme/app", n)] = true
	}
	for i := range 20 {
		n := g.AddPull("acme/app", forgetest.PullSeed{IssueSeed: forgetest.IssueSeed{Title: fmt.Sprint("pr ", i), Labels: []string{label}}})
		g.SetCreatedAt("acme/app", n, epoch.Add(time.Duration(i)*time.Minute))
		want[ref(task.PullRequest, "acme/app", n)] = true
	}
	for range 5 {
		g.AddIssue("acme/app", forgetest.IssueSeed{Title: "closed", Labels: []string{label}, State: "closed"})
		g.AddIssue("acme/app", forgetest.IssueSeed{Title: "unlabelled"})
	}
	n := g.AddIssue("acme/lib", forgetest.IssueSeed{Title: "lib", Labels: []string{label}})
	want[ref(task.Issue, "acme/lib", n)] = true
	g.AddIssue("acme/other", forgetest.IssueSeed{Title: "not configured", Labels: []string{label}})

	c, _ := newClient(t, g, func(o *github.Options) { o.Repositories = []string{"acme/app", "acme/lib", "ACME/app"} })
	ts, err := c.Discover(t.Context(), label)
	if err != nil {
		t.Fatal(err)
	}
	checkOldestFirst(t, ts)
	if len(ts) != len(want) {
		t.Fatalf("discovered %d tasks, want %d", len(ts), len(want))
	}
	for _, tk := range ts {
		if !want[tk.Ref] {
			t.Errorf("unexpected %s", tk.Ref)
		}
	}
	if ts[0].Ref.Kind != task.PullRequest || ts[0].Ref.Number != 131 {
		t.Errorf("oldest is %s, want the first pull request (!131)", ts[0].Ref)
	}
	if got := g.Count("GET", "/repos/acme/app/issues"); got != 2 {
		t.Errorf("listing acme/app took %d requests, want 2 pages of 100", got)
	}
	if g.Count("GET", "/search/") != 0 {
		t.Error("listed repositories should not use the search API")
	}
}

func TestDiscoverOwnerViaSearch(t *testing.T) {
	g := forgetest.NewGitHub(t)
	label := "coding agent"
	a := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a", Labels: []string{label}})
	g.SetCreatedAt("acme/app", a, epoch.Add(2*time.Hour))
	p := g.AddPull("acme/lib", forgetest.PullSeed{IssueSeed: forgetest.IssueSeed{Title: "p", Labels: []string{label}}})
	g.SetCreatedAt("acme/lib", p, epoch)
	g.AddIssue("acme/lib", forgetest.IssueSeed{Title: "closed", Labels: []string{label}, State: "closed"})
	g.AddIssue("acme/lib", forgetest.IssueSeed{Title: "other label", Labels: []string{"bug"}})
	g.AddIssue("someone/else", forgetest.IssueSeed{Title: "outside", Labels: []string{label}})

	// acme/app is both listed and owned: it must not come twice.
	c, _ := newClient(t, g, func(o *github.Options) { o.Owner = "acme" })
	ts, err := c.Discover(t.Context(), label)
	if err != nil {
		t.Fatal(err)
	}
	checkOldestFirst(t, ts)
	got := make([]task.Ref, 0, len(ts))
	for _, tk := range ts {
		got = append(got, tk.Ref)
	}
	want := []task.Ref{ref(task.PullRequest, "acme/lib", p), ref(task.Issue, "acme/app", a)}
	if !slices.Equal(got, want) {
		t.Fatalf("discovered %v, want %v", got, want)
	}
	if g.Count("GET", "/search/issues") != 2 {
		t.Errorf("%d searches, want 2 (is:issue and is:pr)", g.Count("GET", "/search/issues"))
	}
}

func TestDiscoverOwnerPastSearchWindow(t *testing.T) {
	g := forgetest.NewGitHub(t)
	const total = 1150
	for i := range total {
		n := g.AddIssue("acme/big", forgetest.IssueSeed{Title: fmt.Sprint(i), Labels: []string{"coding agent"}})
		// Pairs share a second, so the narrowed query overlaps the first.
		g.SetCreatedAt("acme/big", n, epoch.Add(time.Duration(i/2)*time.Second))
	}
	c, _ := newClient(t, g, func(o *github.Options) { o.Repositories = nil; o.Owner = "acme" })
	ts, err := c.Discover(t.Context(), "coding agent")
	if err != nil {
		t.Fatal(err)
	}
	checkOldestFirst(t, ts)
	if len(ts) != total {
		t.Fatalf("discovered %d of %d", len(ts), total)
	}
}

func TestDiscoverQueryQualifiers(t *testing.T) {
	g := forgetest.NewGitHub(t)
	keep := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "keep", Labels: []string{"coding agent"}})
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "skip", Labels: []string{"coding agent", "wontfix"}})
	other := g.AddPull("acme/lib", forgetest.PullSeed{IssueSeed: forgetest.IssueSeed{Title: "lib", Labels: []string{"coding agent"}}})
	c, _ := newClient(t, g, func(o *github.Options) {
		o.Repositories = []string{"acme/app", "acme/lib"}
		o.Query = "-label:wontfix"
	})
	ts, err := c.Discover(t.Context(), "coding agent")
	if err != nil {
		t.Fatal(err)
	}
	var got []task.Ref
	for _, tk := range ts {
		got = append(got, tk.Ref)
	}
	slices.SortFunc(got, func(a, b task.Ref) int { return a.Number - b.Number })
	want := []task.Ref{ref(task.Issue, "acme/app", keep), ref(task.PullRequest, "acme/lib", other)}
	slices.SortFunc(want, func(a, b task.Ref) int { return a.Number - b.Number })
	if !slices.Equal(got, want) {
		t.Errorf("discovered %v, want %v", got, want)
	}
	if g.Count("GET", "/repos/") != 0 {
		t.Error("with a query, listed repositories should be searched, not listed")
	}
}

func TestDiscoverFailsOnMissingRepository(t *testing.T) {
	g := forgetest.NewGitHub(t)
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a", Labels: []string{"x"}})
	c, _ := newClient(t, g, func(o *github.Options) { o.Repositories = []string{"acme/app", "acme/gone"} })
	if ts, err := c.Discover(t.Context(), "x"); err == nil || ts != nil {
		t.Errorf("Discover = %v, %v; want an error and no partial list", ts, err)
	}
}
