package gitlab_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/gitlab"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

const label = "coding agent"

// sleeps records the waits PostComment asks for instead of waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return ctx.Err()
}

func (s *sleeps) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

func newClient(t *testing.T, g *forgetest.GitLab, edit func(*gitlab.Options)) (*gitlab.Client, *sleeps) {
	t.Helper()
	s := &sleeps{}
	opts := gitlab.Options{APIURL: g.URL(), Token: g.Token, HTTPClient: g.Client(), Sleep: s.sleep}
	if edit != nil {
		edit(&opts)
	}
	c, err := gitlab.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

func issueRef(repo string, n int) task.Ref {
	return task.Ref{Forge: task.GitLab, Repo: repo, Kind: task.Issue, Number: n}
}

func mrRef(repo string, n int) task.Ref {
	return task.Ref{Forge: task.GitLab, Repo: repo, Kind: task.MergeRequest, Number: n}
}

func refs(ts []task.Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Ref.String())
	}
	return out
}

// listQueries returns the query of every list request for issues or merge
// requests.
func listQueries(g *forgetest.GitLab) []url.Values {
	var out []url.Values
	for _, r := range g.Requests() {
		if r.Method == "GET" && (strings.HasSuffix(r.Path, "/issues") || strings.HasSuffix(r.Path, "/merge_requests")) {
			q, _ := url.ParseQuery(r.Query)
			out = append(out, q)
		}
	}
	return out
}

func TestDiscoverReadsEveryPageOfIssuesAndMergeRequests(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	var want []string
	for i := range 130 {
		n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "issue", Labels: []string{label, "x"}})
		want = append(want, issueRef("acme/app", n).String())
		if i%10 == 0 {
			g.AddIssue("acme/app", forgetest.IssueSeed{Title: "unlabelled"})
			g.AddIssue("acme/app", forgetest.IssueSeed{Title: "closed", Labels: []string{label}, State: "closed"})
			g.AddMR("acme/app", forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: "merged", Labels: []string{label}, State: "merged"}})
		}
		if i < 105 {
			m := g.AddMR("acme/app", forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: "mr", Labels: []string{label}}})
			want = append(want, mrRef("acme/app", m).String())
		}
	}
	c, _ := newClient(t, g, func(o *gitlab.Options) { o.Projects = []string{"acme/app"} })
	ts, err := c.Discover(t.Context(), label)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, refs(ts)); diff != "" {
		t.Errorf("discovered refs, oldest first (-want +got):\n%s", diff)
	}
	qs := listQueries(g)
	if len(qs) != 4 { // two pages of issues, two of merge requests
		t.Errorf("%d list requests, want 4", len(qs))
	}
	for _, q := range qs {
		if q.Get("state") != "opened" || q.Get("labels") != label {
			t.Errorf("list request without state=opened and the label: %v", q)
		}
	}
	if ts[0].State != "open" || !ts[0].HasLabel("x") || ts[0].Author == "" || ts[0].URL == "" {
		t.Errorf("first task %+v", ts[0])
	}
}

func TestDiscoverGroupIncludesSubgroupsOnce(t *testing.T) {
	g := forgetest.NewGitLab(t)
	for _, p := range []string{"grp/app", "grp/sub/lib", "grp/sub/deep/svc", "other/app"} {
		g.AddProject(p)
		g.AddIssue(p, forgetest.IssueSeed{Title: p, Labels: []string{label}})
		g.AddMR(p, forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: p, Labels: []string{label}}, SourceBranch: "fix", TargetBranch: "dev"})
	}
	// grp/app is both listed and in the group: it must come back once.
	c, _ := newClient(t, g, func(o *gitlab.Options) { o.Projects = []string{"grp/app"}; o.Group = "grp" })
	ts, err := c.Discover(t.Context(), label)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"gitlab:grp/app#1", "gitlab:grp/app!1", "gitlab:grp/sub/lib#1", "gitlab:grp/sub/lib!1",
		"gitlab:grp/sub/deep/svc#1", "gitlab:grp/sub/deep/svc!1",
	}
	if diff := cmp.Diff(want, refs(ts)); diff != "" {
		t.Errorf("group discovery (-want +got):\n%s", diff)
	}
	if g.Count("GET", "/groups/grp/issues") != 1 || g.Count("GET", "/groups/grp/merge_requests") != 1 {
		t.Errorf("group endpoints not used: %+v", g.Requests())
	}
	if mr := ts[1]; mr.HeadBranch != "fix" || mr.BaseBranch != "dev" {
		t.Errorf("discovered merge request branches %q → %q", mr.HeadBranch, mr.BaseBranch)
	}
}

func TestGetIssueAndMergeRequest(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "Bug", Body: "it breaks", Author: "alice", Labels: []string{label}, Assignees: []string{"bob"}})
	g.AddMR("acme/app", forgetest.MRSeed{
		IssueSeed:    forgetest.IssueSeed{Title: "Fix", Body: "fixes #1", Author: "carol", State: "merged"},
		SourceBranch: "fix-1", TargetBranch: "release",
	})
	c, _ := newClient(t, g, nil)
	it, err := c.Get(t.Context(), issueRef("acme/app", 1))
	if err != nil {
		t.Fatal(err)
	}
	got := []any{it.Ref, it.Title, it.Body, it.Author, it.State, it.Labels, it.Assignees, it.CreatedAt.IsZero()}
	want := []any{issueRef("acme/app", 1), "Bug", "it breaks", "alice", "open", []string{label}, []string{"bob"}, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("issue (-want +got):\n%s", diff)
	}
	mr, err := c.Get(t.Context(), mrRef("acme/app", 1))
	if err != nil {
		t.Fatal(err)
	}
	got = []any{mr.Ref, mr.Title, mr.Author, mr.State, mr.HeadBranch, mr.BaseBranch, strings.HasSuffix(mr.URL, "/acme/app/-/merge_requests/1")}
	want = []any{mrRef("acme/app", 1), "Fix", "carol", "closed", "fix-1", "release", true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("merge request (-want +got):\n%s", diff)
	}
}

func TestCommentsChronologicalWithSystemNotes(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	g.AddMR("acme/app", forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: "t"}})
	var want []task.Comment
	for i := range 130 {
		system := i%7 == 3
		body := "note " + strings.Repeat("x", i%5)
		id := g.AddNote("acme/app", forgetest.KindMergeRequest, 1, "alice", body, system)
		want = append(want, task.Comment{ID: id, Author: "alice", Body: body, System: system})
	}
	c, _ := newClient(t, g, nil)
	got, err := c.Comments(t.Context(), mrRef("acme/app", 1))
	if err != nil {
		t.Fatal(err)
	}
	notes := g.Notes("acme/app", forgetest.KindMergeRequest, 1)
	for i := range want {
		want[i].CreatedAt = notes[i].CreatedAt
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
	for _, r := range g.Requests() {
		q, _ := url.ParseQuery(r.Query)
		if q.Get("sort") != "asc" || q.Get("order_by") != "created_at" {
			t.Errorf("notes request %s?%s does not ask for ascending created_at", r.Path, r.Query)
		}
	}
	if n := g.Count("GET", "/notes"); n != 2 {
		t.Errorf("%d notes requests, want 2 pages", n)
	}
}

func TestLabelsOneByOneKeepOthers(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Labels: []string{label, "bug"}})
	g.AddMR("acme/app", forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: "t", Labels: []string{label}}})
	c, _ := newClient(t, g, nil)
	other, _ := newClient(t, g, nil) // someone else, working meanwhile
	ctx := t.Context()
	ref := issueRef("acme/app", 1)

	if err := c.AddLabel(ctx, ref, "processing"); err != nil {
		t.Fatal(err)
	}
	if err := other.AddLabel(ctx, ref, "priority"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveLabel(ctx, ref, label); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveLabel(ctx, ref, "never-there"); err != nil {
		t.Errorf("removing an absent label: %v", err)
	}
	if diff := cmp.Diff([]string{"bug", "priority", "processing"}, g.Labels("acme/app", forgetest.KindIssue, 1)); diff != "" {
		t.Errorf("issue labels (-want +got):\n%s", diff)
	}

	if err := c.AddLabel(ctx, mrRef("acme/app", 1), "processing"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveLabel(ctx, mrRef("acme/app", 1), label); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"processing"}, g.Labels("acme/app", forgetest.KindMergeRequest, 1)); diff != "" {
		t.Errorf("merge request labels (-want +got):\n%s", diff)
	}
	if err := c.AddLabel(ctx, ref, "a,b"); err == nil {
		t.Error("a label with a comma was accepted")
	}
}

func TestNotFound(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	c, _ := newClient(t, g, func(o *gitlab.Options) { o.Projects = []string{"acme/gone"} })
	ctx := t.Context()
	_, err := c.Get(ctx, issueRef("acme/app", 99))
	if !errors.Is(err, forge.ErrNotFound) || !strings.Contains(err.Error(), "acme/app#99") {
		t.Errorf("Get of a missing issue: %v", err)
	}
	err = c.AddLabel(ctx, mrRef("acme/app", 7), "x")
	if !errors.Is(err, forge.ErrNotFound) || !strings.HasPrefix(err.Error(), `adding label "x" on acme/app!7: `) {
		t.Errorf("AddLabel on a missing merge request: %v", err)
	}
	if _, err := c.Comments(ctx, issueRef("nope/app", 1)); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("Comments in a missing project: %v", err)
	}
	if _, err := c.PostComment(ctx, issueRef("acme/app", 5), "hi"); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("PostComment on a missing issue: %v", err)
	}
	if _, err := c.Discover(ctx, label); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("Discover in a missing project: %v", err)
	}
}

func TestBotUserIsCached(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.BotUsername = "agent-7"
	c, _ := newClient(t, g, nil)
	for range 3 {
		u, err := c.BotUser(t.Context())
		if err != nil || u != "agent-7" {
			t.Fatalf("BotUser = %q, %v", u, err)
		}
	}
	if n := g.Count("GET", "/user"); n != 1 {
		t.Errorf("%d GET /user, want 1", n)
	}
}

func TestNestedProjectPathIsEncoded(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("grp/sub/my.app")
	g.AddIssue("grp/sub/my.app", forgetest.IssueSeed{Title: "t"})
	c, _ := newClient(t, g, nil)
	ctx := t.Context()
	ref := issueRef("grp/sub/my.app", 1)
	if _, err := c.Get(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := c.AddLabel(ctx, ref, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostComment(ctx, ref, "hello"); err != nil {
		t.Fatal(err)
	}
	for _, r := range g.Requests() {
		if !strings.HasPrefix(r.Path, "/api/v4/projects/grp%2Fsub%2Fmy%2Eapp/issues/1") || r.Status >= 300 {
			t.Errorf("%s %s answered %d", r.Method, r.Path, r.Status)
		}
	}
	if len(g.Requests()) != 3 {
		t.Errorf("requests %+v", g.Requests())
	}
}
