package github_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// seedBranch is a repository with issue #1 and a branch one commit ahead
// of main, ready for a pull request.
func seedBranch(t *testing.T) (*forgetest.GitHub, task.Ref) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "fix it"})
	g.CommitFile("acme/app", "agent/issue-1", "fix.txt", "fixed\n", "Fix it")
	return g, ref(task.Issue, "acme/app", n)
}

var work = forge.NewChange{Head: "agent/issue-1", Base: "main", Title: "Fix it", Body: "Closes #1", Draft: true}

func TestRepository(t *testing.T) {
	g, r := seedBranch(t)
	c, _ := newClient(t, g)
	repo, err := c.Repository(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if want := (forge.Repo{CloneURL: g.URL() + "/acme/app.git", DefaultBranch: "main"}); repo != want {
		t.Errorf("got %+v, want %+v", repo, want)
	}
	if _, err := c.Repository(t.Context(), ref(task.Issue, "acme/none", 1)); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("unknown repository: %v", err)
	}
}

func TestOpenChangeThenFindIt(t *testing.T) {
	g, r := seedBranch(t)
	c, _ := newClient(t, g)
	ch, err := c.OpenChange(t.Context(), r, work)
	if err != nil {
		t.Fatal(err)
	}
	want := forge.Change{Number: 2, URL: g.URL() + "/acme/app/pull/2", Draft: true, Head: "agent/issue-1", Base: "main",
		Body: "Closes #1"}
	if diff := cmp.Diff(want, ch); diff != "" {
		t.Errorf("opened (-want +got):\n%s", diff)
	}
	pulls := g.Pulls("acme/app")
	if len(pulls) != 1 || pulls[0].Title != "Fix it" || pulls[0].Body != "Closes #1" || pulls[0].Author != g.BotLogin || !pulls[0].Draft {
		t.Errorf("stored %+v", pulls)
	}
	found, ok, err := c.FindChange(t.Context(), r, "agent/issue-1")
	if err != nil || !ok || found != ch {
		t.Errorf("found %+v, %v, %v", found, ok, err)
	}
	if _, ok, err := c.FindChange(t.Context(), r, "agent/issue-2"); ok || err != nil {
		t.Errorf("another branch: %v, %v", ok, err)
	}
}

// EditChange replaces the body alone: the title and the draft state stay,
// and FindChange reads the new body.
func TestEditChangeReplacesTheBody(t *testing.T) {
	g, r := seedBranch(t)
	c, _ := newClient(t, g)
	ch, err := c.OpenChange(t.Context(), r, work)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EditChange(t.Context(), r, ch.Number, "Closes #1\n\nRound 2."); err != nil {
		t.Fatal(err)
	}
	pulls := g.Pulls("acme/app")
	if len(pulls) != 1 || pulls[0].Body != "Closes #1\n\nRound 2." || pulls[0].Title != "Fix it" || !pulls[0].Draft {
		t.Errorf("stored %+v", pulls)
	}
	if found, ok, err := c.FindChange(t.Context(), r, "agent/issue-1"); err != nil || !ok || found.Body != "Closes #1\n\nRound 2." {
		t.Errorf("found %+v, %v, %v", found, ok, err)
	}
	if err := c.EditChange(t.Context(), r, 99, "x"); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("editing a pull request that does not exist: %v", err)
	}
}

func TestFindChangeSkipsForksAndClosedOnes(t *testing.T) {
	g, r := seedBranch(t)
	g.AddPull("acme/app", forgetest.PullSeed{Head: "agent/issue-1", HeadRepo: "forker/app"})
	closed := g.AddPull("acme/app", forgetest.PullSeed{Head: "agent/issue-1"})
	g.SetState("acme/app", closed, "closed")
	c, _ := newClient(t, g)
	if ch, ok, err := c.FindChange(t.Context(), r, "agent/issue-1"); ok || err != nil {
		t.Errorf("found %+v, %v: a fork's branch of the same name or a closed pull request is not ours", ch, err)
	}
}

func TestOpenChangeAfterAmbiguous502DoesNotDuplicate(t *testing.T) {
	g, r := seedBranch(t)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/pulls", Status: 502, AfterServe: true})
	c, s := newClient(t, g)
	ch, err := c.OpenChange(t.Context(), r, work)
	if err != nil {
		t.Fatal(err)
	}
	if pulls := g.Pulls("acme/app"); len(pulls) != 1 || pulls[0].Number != ch.Number {
		t.Errorf("pull requests %+v, returned %+v: want exactly the one that landed", pulls, ch)
	}
	if n := g.Count("POST", "/pulls"); n != 1 {
		t.Errorf("%d POSTs, want 1", n)
	}
	if !slices.Equal(s.got(), []time.Duration{time.Second}) {
		t.Errorf("waits %v, want [1s]", s.got())
	}
}

func TestOpenChangeAfter502ThatDidNotLandAsksAgain(t *testing.T) {
	g, r := seedBranch(t)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/pulls", Status: 502})
	c, _ := newClient(t, g)
	ch, err := c.OpenChange(t.Context(), r, work)
	if err != nil {
		t.Fatal(err)
	}
	if pulls := g.Pulls("acme/app"); len(pulls) != 1 || pulls[0].Number != ch.Number {
		t.Errorf("pull requests %+v, returned %+v", pulls, ch)
	}
	if n := g.Count("POST", "/pulls"); n != 2 {
		t.Errorf("%d POSTs, want 2", n)
	}
}

func TestOpenChangeReturnsTheOpenOne(t *testing.T) {
	g, r := seedBranch(t)
	c, _ := newClient(t, g)
	first, err := c.OpenChange(t.Context(), r, work)
	if err != nil {
		t.Fatal(err)
	}
	again := work
	again.Title, again.Draft = "Another title", false
	second, err := c.OpenChange(t.Context(), r, again)
	if err != nil || second != first {
		t.Errorf("second open: %+v, %v; want the first %+v", second, err, first)
	}
	if pulls := g.Pulls("acme/app"); len(pulls) != 1 || pulls[0].Title != "Fix it" {
		t.Errorf("pull requests %+v", pulls)
	}
}

func TestOpenChangeWithoutCommitsFails(t *testing.T) {
	g, r := seedBranch(t)
	c, _ := newClient(t, g)
	nothing := work
	nothing.Head = "main"
	nothing.Base = "agent/issue-1"
	if ch, err := c.OpenChange(t.Context(), r, nothing); err == nil || errors.Is(err, forge.ErrNotFound) {
		t.Errorf("opened %+v, %v; want GitHub's refusal", ch, err)
	}
	if n := g.Count("POST", "/pulls"); n != 1 {
		t.Errorf("%d POSTs, want 1: a 422 is final", n)
	}
}

func TestGetTellsAPullRequestFromAFork(t *testing.T) {
	g, r := seedBranch(t)
	own := g.AddPull("acme/app", forgetest.PullSeed{Head: "own"})
	fork := g.AddPull("acme/app", forgetest.PullSeed{Head: "theirs", HeadRepo: "forker/app"})
	c, _ := newClient(t, g)
	for _, tc := range []struct {
		ref  task.Ref
		fork bool
	}{
		{r, false},
		{ref(task.PullRequest, "acme/app", own), false},
		{ref(task.PullRequest, "acme/app", fork), true},
	} {
		tk, err := c.Get(t.Context(), tc.ref)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Fork != tc.fork {
			t.Errorf("%s: Fork %v, want %v", tc.ref, tk.Fork, tc.fork)
		}
	}
}
