package gitlab_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// seedBranch is a project with issue #1 and a branch one commit ahead of
// main, ready for a merge request.
func seedBranch(t *testing.T) (*forgetest.GitLab, task.Ref) {
	g := forgetest.NewGitLab(t)
	g.AddProject("grp/app")
	n := g.AddIssue("grp/app", forgetest.IssueSeed{Title: "fix it"})
	g.CommitFile("grp/app", "agent/issue-1", "fix.txt", "fixed\n", "Fix it")
	return g, issueRef("grp/app", n)
}

var work = forge.NewChange{Head: "agent/issue-1", Base: "main", Title: "Fix it", Body: "Closes #1", Draft: true}

func TestRepository(t *testing.T) {
	g, r := seedBranch(t)
	c, _ := newClient(t, g, nil)
	repo, err := c.Repository(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if want := (forge.Repo{CloneURL: strings.TrimSuffix(g.URL(), "/api/v4") + "/grp/app.git", DefaultBranch: "main"}); repo != want {
		t.Errorf("got %+v, want %+v", repo, want)
	}
	if _, err := c.Repository(t.Context(), issueRef("grp/none", 1)); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("unknown project: %v", err)
	}
}

func TestOpenChangeThenFindIt(t *testing.T) {
	g, r := seedBranch(t)
	c, _ := newClient(t, g, nil)
	ch, err := c.OpenChange(t.Context(), r, work)
	if err != nil {
		t.Fatal(err)
	}
	want := forge.Change{Number: 1, URL: strings.TrimSuffix(g.URL(), "/api/v4") + "/grp/app/-/merge_requests/1", Draft: true, Head: "agent/issue-1", Base: "main", Body: "Closes #1"}
	if diff := cmp.Diff(want, ch); diff != "" {
		t.Errorf("opened (-want +got):\n%s", diff)
	}
	mrs := g.MRs("grp/app")
	if len(mrs) != 1 || mrs[0].Title != "Draft: Fix it" || mrs[0].Description != "Closes #1" || mrs[0].Author != g.BotUsername {
		t.Errorf("stored %+v", mrs)
	}
	found, ok, err := c.FindChange(t.Context(), r, "agent/issue-1")
	if err != nil || !ok || found != ch {
		t.Errorf("found %+v, %v, %v", found, ok, err)
	}
	if _, ok, err := c.FindChange(t.Context(), r, "agent/issue-2"); ok || err != nil {
		t.Errorf("another branch: %v, %v", ok, err)
	}
}

func TestOpenChangeReady(t *testing.T) {
	g, r := seedBranch(t)
	c, _ := newClient(t, g, nil)
	ready := work
	ready.Draft = false
	ch, err := c.OpenChange(t.Context(), r, ready)
	if err != nil || ch.Draft {
		t.Fatalf("opened %+v, %v", ch, err)
	}
	if mrs := g.MRs("grp/app"); mrs[0].Title != "Fix it" {
		t.Errorf("title %q", mrs[0].Title)
	}
}

// EditChange replaces the description alone: the draft title stays, and
// FindChange reads the new description.
func TestEditChangeReplacesTheDescription(t *testing.T) {
	g, r := seedBranch(t)
	c, _ := newClient(t, g, nil)
	ch, err := c.OpenChange(t.Context(), r, work)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EditChange(t.Context(), r, ch.Number, "Closes #1\n\nRound 2."); err != nil {
		t.Fatal(err)
	}
	mrs := g.MRs("grp/app")
	if len(mrs) != 1 || mrs[0].Description != "Closes #1\n\nRound 2." || mrs[0].Title != "Draft: Fix it" || !mrs[0].Draft {
		t.Errorf("stored %+v", mrs)
	}
	if found, ok, err := c.FindChange(t.Context(), r, "agent/issue-1"); err != nil || !ok || found.Body != "Closes #1\n\nRound 2." {
		t.Errorf("found %+v, %v, %v", found, ok, err)
	}
	if err := c.EditChange(t.Context(), r, 99, "x"); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("editing a merge request that does not exist: %v", err)
	}
}

func TestFindChangeSkipsForksAndClosedOnes(t *testing.T) {
	g, r := seedBranch(t)
	g.AddMR("grp/app", forgetest.MRSeed{SourceBranch: "agent/issue-1", SourceProject: "someone/app"})
	g.AddMR("grp/app", forgetest.MRSeed{SourceBranch: "agent/issue-1", IssueSeed: forgetest.IssueSeed{State: "closed"}})
	c, _ := newClient(t, g, nil)
	if ch, ok, err := c.FindChange(t.Context(), r, "agent/issue-1"); ok || err != nil {
		t.Errorf("found %+v, %v: a fork's branch of the same name or a closed merge request is not ours", ch, err)
	}
}

func TestOpenChangeAfterAmbiguous502DoesNotDuplicate(t *testing.T) {
	g, r := seedBranch(t)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/merge_requests", Status: 502, AfterServe: true})
	c, s := newClient(t, g, nil)
	ch, err := c.OpenChange(t.Context(), r, work)
	if err != nil {
		t.Fatal(err)
	}
	if mrs := g.MRs("grp/app"); len(mrs) != 1 || mrs[0].IID != ch.Number {
		t.Errorf("merge requests %+v, returned %+v: want exactly the one that landed", mrs, ch)
	}
	if n := g.Count("POST", "/merge_requests"); n != 1 {
		t.Errorf("%d POSTs, want 1", n)
	}
	if !slices.Equal(s.got(), []time.Duration{time.Second}) {
		t.Errorf("waits %v, want [1s]", s.got())
	}
}

func TestOpenChangeAfter502ThatDidNotLandAsksAgain(t *testing.T) {
	g, r := seedBranch(t)
	g.Inject(forgetest.Fault{Method: "POST", Path: "/merge_requests", Status: 502})
	c, _ := newClient(t, g, nil)
	ch, err := c.OpenChange(t.Context(), r, work)
	if err != nil {
		t.Fatal(err)
	}
	if mrs := g.MRs("grp/app"); len(mrs) != 1 || mrs[0].IID != ch.Number {
		t.Errorf("merge requests %+v, returned %+v", mrs, ch)
	}
	if n := g.Count("POST", "/merge_requests"); n != 2 {
		t.Errorf("%d POSTs, want 2", n)
	}
}

func TestOpenChangeReturnsTheOpenOne(t *testing.T) {
	g, r := seedBranch(t)
	c, _ := newClient(t, g, nil)
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
	if mrs := g.MRs("grp/app"); len(mrs) != 1 || mrs[0].Title != "Draft: Fix it" {
		t.Errorf("merge requests %+v", mrs)
	}
}

func TestOpenChangeFromAMissingBranchFails(t *testing.T) {
	g, r := seedBranch(t)
	c, _ := newClient(t, g, nil)
	missing := work
	missing.Head = "nothing"
	if ch, err := c.OpenChange(t.Context(), r, missing); err == nil || errors.Is(err, forge.ErrNotFound) {
		t.Errorf("opened %+v, %v; want GitLab's refusal", ch, err)
	}
	if n := g.Count("POST", "/merge_requests"); n != 1 {
		t.Errorf("%d POSTs, want 1: a 422 is final", n)
	}
}

func TestGetTellsAMergeRequestFromAFork(t *testing.T) {
	g, r := seedBranch(t)
	own := g.AddMR("grp/app", forgetest.MRSeed{SourceBranch: "own"})
	fork := g.AddMR("grp/app", forgetest.MRSeed{SourceBranch: "theirs", SourceProject: "someone/app"})
	c, _ := newClient(t, g, nil)
	for _, tc := range []struct {
		ref  task.Ref
		fork bool
	}{
		{r, false},
		{mrRef("grp/app", own), false},
		{mrRef("grp/app", fork), true},
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
