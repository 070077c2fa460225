package forgetest_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/coding-agent/coding-agent/internal/forgetest"
)

func TestGitLabProjectForDelivery(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("grp/sub/app")
	p, _, err := glClient(t, g).Projects.GetProject("grp/sub/app", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.DefaultBranch != "main" || p.HTTPURLToRepo != g.RepoURL("grp/sub/app") ||
		p.HTTPURLToRepo != strings.TrimSuffix(g.URL(), "/api/v4")+"/grp/sub/app.git" {
		t.Errorf("default_branch %q, http_url_to_repo %q", p.DefaultBranch, p.HTTPURLToRepo)
	}
}

// glStatus returns the status of a client error, 0 for none.
func glStatus(err error) int {
	if er, ok := errors.AsType[*gl.ErrorResponse](err); ok && er.Response != nil {
		return er.Response.StatusCode
	}
	return 0
}

func TestGitLabCreateMR(t *testing.T) {
	g := forgetest.NewGitLab(t)
	pid := g.AddProject("grp/app")
	g.AddIssue("grp/app", forgetest.IssueSeed{Title: "the issue"})
	g.CommitFile("grp/app", "agent/1", "fix.txt", "fixed\n", "Fix")
	c := glClient(t, g)
	opts := func(title, source, target string) *gl.CreateMergeRequestOptions {
		return &gl.CreateMergeRequestOptions{Title: gl.Ptr(title), Description: gl.Ptr("Closes #1"),
			SourceBranch: gl.Ptr(source), TargetBranch: gl.Ptr(target)}
	}
	mr, resp, err := c.MergeRequests.CreateMergeRequest("grp/app", opts("Draft: Fix it", "agent/1", "main"))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v", err)
	}
	if mr.IID != 1 || !mr.Draft || mr.SourceBranch != "agent/1" || mr.TargetBranch != "main" || mr.Author.Username != g.BotUsername ||
		mr.Description != "Closes #1" || mr.State != "opened" || mr.SourceProjectID != int64(pid) || mr.TargetProjectID != int64(pid) ||
		!strings.HasSuffix(mr.WebURL, "/grp/app/-/merge_requests/1") {
		t.Errorf("created %+v", mr)
	}

	for _, tc := range []struct {
		opts    *gl.CreateMergeRequestOptions
		status  int
		message string
	}{
		{opts("Again", "agent/1", "main"), 409, "Another open merge request already exists for this source branch: !1"},
		{opts("Same", "main", "main"), 422, "You can't use same project/branch for source and target"},
		{opts("None", "nothing", "main"), 422, `Source branch "nothing" does not exist`},
		{opts("None", "agent/1", "nothing"), 422, `Target branch "nothing" does not exist`},
		{&gl.CreateMergeRequestOptions{SourceBranch: gl.Ptr("agent/1"), TargetBranch: gl.Ptr("main")}, 400, "title is missing"},
	} {
		_, _, err := c.MergeRequests.CreateMergeRequest("grp/app", tc.opts)
		if glStatus(err) != tc.status || !strings.Contains(err.Error(), tc.message) {
			t.Errorf("%s: %v, want %d %q", *tc.opts.SourceBranch, err, tc.status, tc.message)
		}
	}

	// Not a draft; into another target the same source branch is allowed.
	g.CommitFile("grp/app", "release", "r.txt", "r\n", "Release")
	mr2, _, err := c.MergeRequests.CreateMergeRequest("grp/app", opts("Fix it for the release", "agent/1", "release"))
	if err != nil || mr2.IID != 2 || mr2.Draft {
		t.Fatalf("into release: %+v, %v", mr2, err)
	}
	// Taking "Draft: " off the title makes it ready, as on GitLab.
	up, _, err := c.MergeRequests.UpdateMergeRequest("grp/app", mr.IID, &gl.UpdateMergeRequestOptions{Title: gl.Ptr("Fix it")})
	if err != nil || up.Draft || up.Title != "Fix it" {
		t.Errorf("updated: %+v, %v", up, err)
	}
	// Once closed, it no longer blocks another from the same branch.
	if _, _, err := c.MergeRequests.UpdateMergeRequest("grp/app", mr.IID, &gl.UpdateMergeRequestOptions{StateEvent: gl.Ptr("close")}); err != nil {
		t.Fatal(err)
	}
	if mr3, _, err := c.MergeRequests.CreateMergeRequest("grp/app", opts("[Draft] again", "agent/1", "main")); err != nil || mr3.IID != 3 || !mr3.Draft {
		t.Errorf("after closing: %+v, %v", mr3, err)
	}
}

func TestGitLabListMRsBySourceBranch(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("grp/app")
	own := g.AddMR("grp/app", forgetest.MRSeed{SourceBranch: "agent/1"})
	closed := g.AddMR("grp/app", forgetest.MRSeed{SourceBranch: "agent/1", IssueSeed: forgetest.IssueSeed{State: "closed"}})
	fork := g.AddMR("grp/app", forgetest.MRSeed{SourceBranch: "agent/1", SourceProject: "someone/app"})
	g.AddMR("grp/app", forgetest.MRSeed{SourceBranch: "other"})
	c := glClient(t, g)
	for _, tc := range []struct {
		opts gl.ListProjectMergeRequestsOptions
		want []int
	}{
		{gl.ListProjectMergeRequestsOptions{SourceBranch: gl.Ptr("agent/1"), State: gl.Ptr("opened")}, []int{fork, own}},
		{gl.ListProjectMergeRequestsOptions{SourceBranch: gl.Ptr("agent/1")}, []int{fork, closed, own}},
		{gl.ListProjectMergeRequestsOptions{SourceBranch: gl.Ptr("nothing")}, nil},
		{gl.ListProjectMergeRequestsOptions{TargetBranch: gl.Ptr("main"), SourceBranch: gl.Ptr("other")}, []int{4}},
	} {
		mrs, _, err := c.MergeRequests.ListProjectMergeRequests("grp/app", &tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, m := range mrs {
			got = append(got, int(m.IID))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v: %v, want %v", tc.opts, got, tc.want)
		}
	}
	m, _, err := c.MergeRequests.GetMergeRequest("grp/app", int64(fork), nil)
	if err != nil || m.SourceProjectID == m.TargetProjectID {
		t.Errorf("the fork's merge request: source %d target %d, %v", m.SourceProjectID, m.TargetProjectID, err)
	}
	if !slices.Contains(g.Branches("someone/app"), "agent/1") || !slices.Contains(g.Branches("grp/app"), "agent/1") {
		t.Errorf("branches: fork %q, project %q", g.Branches("someone/app"), g.Branches("grp/app"))
	}
}

func TestGitLabCreateMRFromAFork(t *testing.T) {
	g := forgetest.NewGitLab(t)
	up := g.AddProject("grp/app")
	fork := g.AddProject("someone/app")
	g.CommitFile("someone/app", "topic", "x.txt", "x\n", "Topic")
	mr, _, err := glClient(t, g).MergeRequests.CreateMergeRequest("someone/app", &gl.CreateMergeRequestOptions{
		Title: gl.Ptr("From the fork"), SourceBranch: gl.Ptr("topic"), TargetBranch: gl.Ptr("main"), TargetProjectID: gl.Ptr(int64(up)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if mr.ProjectID != int64(up) || mr.TargetProjectID != int64(up) || mr.SourceProjectID != int64(fork) || mr.IID != 1 {
		t.Errorf("from the fork: %+v", mr)
	}
	if _, _, err := glClient(t, g).MergeRequests.GetMergeRequest("grp/app", 1, nil); err != nil {
		t.Errorf("the merge request is not the target project's: %v", err)
	}
	status, _, _ := glDo(t, g, "POST", "/projects/someone%2Fapp/merge_requests?title=t&source_branch=topic&target_branch=main&target_project_id=999",
		map[string]string{"PRIVATE-TOKEN": g.Token}, nil)
	if status != http.StatusNotFound {
		t.Errorf("unknown target project: %d", status)
	}
}
