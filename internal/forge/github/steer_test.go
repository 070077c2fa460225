package github_test

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

var start = time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)

func bodiesOf(cs []task.Comment) []string {
	var out []string
	for _, cm := range cs {
		out = append(out, cm.Body)
	}
	return out
}

func TestCommentsSinceKeepsRecentAndEdited(t *testing.T) {
	for _, kind := range []task.Kind{task.Issue, task.PullRequest} {
		t.Run(string(kind), func(t *testing.T) {
			g := forgetest.NewGitHub(t)
			clk := forgetest.NewClock(start)
			g.SetClock(clk.Now)
			n := addItem(g, kind)
			r := ref(kind, "acme/app", n)
			for i := range 120 {
				g.AddComment("acme/app", n, "alice", fmt.Sprint("old ", i))
			}
			mine := g.AddComment("acme/app", n, "coding-agent-bot", "- [ ] step")
			since := start.Add(30 * time.Minute)
			clk.Set(since)
			g.AddComment("acme/app", n, "bob", "at since")
			clk.Set(start.Add(time.Hour))
			g.AddComment("acme/app", n, "carol", "after since")
			c, _ := newClient(t, g)
			if err := c.EditComment(t.Context(), r, mine, "- [x] step"); err != nil {
				t.Fatal(err)
			}
			g.ResetRequests()

			got, err := c.CommentsSince(t.Context(), r, since)
			if err != nil {
				t.Fatal(err)
			}
			// The edited comment is older than since but was updated after
			// it; the list stays in creation order.
			want := []string{"- [x] step", "at since", "after since"}
			if !slices.Equal(bodiesOf(got), want) {
				t.Errorf("comments since %s: %q, want %q", since, bodiesOf(got), want)
			}
			reqs := g.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want one page: %+v", len(reqs), reqs)
			}
			if q, _ := url.ParseQuery(reqs[0].Query); q.Get("since") != "2025-06-01T09:30:00Z" || q.Get("per_page") != "100" {
				t.Errorf("query %q, want since=2025-06-01T09:30:00Z and per_page=100", reqs[0].Query)
			}

			all, err := c.CommentsSince(t.Context(), r, time.Time{})
			if err != nil || len(all) != 123 {
				t.Errorf("zero since: %d comments, %v; want all 123", len(all), err)
			}
		})
	}
}

func TestCommentsSinceReadsEveryPage(t *testing.T) {
	g := forgetest.NewGitHub(t)
	clk := forgetest.NewClock(start)
	g.SetClock(clk.Now)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	g.AddComment("acme/app", n, "alice", "before")
	clk.Set(start.Add(time.Minute))
	for i := range 150 {
		g.AddComment("acme/app", n, "alice", fmt.Sprint("c", i))
	}
	c, _ := newClient(t, g)
	got, err := c.CommentsSince(t.Context(), ref(task.Issue, "acme/app", n), start.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 150 || got[0].Body != "c0" || got[149].Body != "c149" {
		t.Errorf("got %d comments (%q ... ), want c0..c149", len(got), bodiesOf(got[:min(len(got), 2)]))
	}
	if n := g.Count("GET", "/comments"); n != 2 {
		t.Errorf("%d requests, want 2 pages", n)
	}
}

func TestCommentsSinceErrors(t *testing.T) {
	g := forgetest.NewGitHub(t)
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	c, _ := newClient(t, g)
	_, err := c.CommentsSince(t.Context(), ref(task.Issue, "acme/app", 7), start)
	if !errors.Is(err, forge.ErrNotFound) || !strings.Contains(err.Error(), "listing comments of acme/app#7 since 2025-06-01T09:00:00Z") {
		t.Errorf("missing issue: %v", err)
	}
	if _, err := c.CommentsSince(t.Context(), task.Ref{Forge: task.GitLab, Repo: "acme/app", Number: 1}, start); err == nil {
		t.Error("a gitlab ref was accepted")
	}
}

func TestCanWrite(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a", Author: "reporter"})
	for login, role := range map[string]string{"ada": "admin", "max": "maintain", "wes": "write", "tri": "triage", "rea": "read"} {
		g.SetPermission("acme/app", login, role)
	}
	g.SetPermission("acme/lib", "lib-only", "write")
	c, _ := newClient(t, g)
	r := ref(task.Issue, "acme/app", n)
	for _, tc := range []struct {
		user   string
		want   bool
		status int
	}{
		{"ada", true, 200},
		{"max", true, 200},
		{"wes", true, 200},
		{"WES", true, 200},  // logins ignore case
		{"acme", true, 200}, // the owner
		{"tri", false, 200},
		{"rea", false, 200},
		{"reporter", false, 200}, // known, not a collaborator: read on a public repository
		{"lib-only", false, 200}, // a collaborator elsewhere
		{"nobody-at-all", false, 404},
		{"a/b", false, 404}, // escaped, not a path
	} {
		g.ResetRequests()
		got, err := c.CanWrite(t.Context(), r, tc.user)
		if err != nil || got != tc.want {
			t.Errorf("CanWrite(%q) = %v, %v; want %v, nil", tc.user, got, err, tc.want)
		}
		reqs := g.Requests()
		if len(reqs) != 1 || reqs[0].Status != tc.status ||
			reqs[0].Path != "/repos/acme/app/collaborators/"+url.PathEscape(tc.user)+"/permission" {
			t.Errorf("CanWrite(%q) sent %+v, want one GET answered %d", tc.user, reqs, tc.status)
		}
	}
}

func TestCanWriteErrors(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	g.SetPermission("acme/app", "wes", "write")
	c, _ := newClient(t, g)
	r := ref(task.Issue, "acme/app", n)
	g.Inject(forgetest.Fault{Method: "GET", Path: "/permission", Status: 403,
		Body: `{"message":"Must have push access to view collaborator permission.","status":"403"}`})
	got, err := c.CanWrite(t.Context(), r, "wes")
	if err == nil || got || !strings.Contains(err.Error(), "checking whether wes may write to acme/app") ||
		!strings.Contains(err.Error(), "push access") {
		t.Errorf("403: %v, %v; want an error naming the check", got, err)
	}
	g.Inject(forgetest.Fault{Method: "GET", Path: "/permission", Status: 500, Times: -1})
	if got, err := c.CanWrite(t.Context(), r, "wes"); err == nil || got {
		t.Errorf("500: %v, %v; want an error", got, err)
	}
	g.ResetRequests()
	if _, err := c.CanWrite(t.Context(), r, " "); err == nil || len(g.Requests()) != 0 {
		t.Errorf("empty user: %v after %d requests", err, len(g.Requests()))
	}
	if _, err := c.CanWrite(t.Context(), task.Ref{Forge: task.GitLab, Repo: "acme/app", Number: 1}, "wes"); err == nil {
		t.Error("a gitlab ref was accepted")
	}
}

const reactPath = "/reactions"

func TestReactOnIssueAndPullRequestComments(t *testing.T) {
	for _, kind := range []task.Kind{task.Issue, task.PullRequest} {
		t.Run(string(kind), func(t *testing.T) {
			g := forgetest.NewGitHub(t)
			n := addItem(g, kind)
			id := g.AddComment("acme/app", n, "alice", "please also update the docs")
			other := g.AddComment("acme/app", n, "bob", "+1")
			c, _ := newClient(t, g)
			r := ref(kind, "acme/app", n)
			for range 2 { // the second time GitHub answers 200: already there
				if err := c.React(t.Context(), r, id, forge.ReactionSeen); err != nil {
					t.Fatal(err)
				}
			}
			if got := g.Reactions("acme/app", id); !slices.Equal(got, []string{"eyes"}) {
				t.Errorf("reactions %q, want [eyes]", got)
			}
			if got := g.Reactions("acme/app", other); len(got) != 0 {
				t.Errorf("another comment got reactions %q", got)
			}
			var statuses []int
			for _, rq := range g.Requests() {
				statuses = append(statuses, rq.Status)
			}
			if !slices.Equal(statuses, []int{201, 200}) {
				t.Errorf("answers %v, want 201 then 200", statuses)
			}
			if cs := g.Comments("acme/app", n); cs[0].UpdatedAt != cs[0].CreatedAt {
				t.Errorf("a reaction moved the comment's updated_at: %+v", cs[0])
			}
		})
	}
}

func TestReactRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    forgetest.Fault
		attempts int
	}{
		{"502 once", forgetest.Fault{Method: "POST", Path: reactPath, Status: 502}, 2},
		{"502 after the reaction landed", forgetest.Fault{Method: "POST", Path: reactPath, Status: 502, AfterServe: true}, 2},
		{"503 three times", forgetest.Fault{Method: "POST", Path: reactPath, Status: 503, Times: 3}, 4},
		{"secondary rate limit", forgetest.SecondaryRateLimit("POST", reactPath, 1), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, c, r, id := commented(t, "alice", "hi")
			g.Inject(tc.fault)
			if err := c.React(t.Context(), r, id, forge.ReactionSeen); err != nil {
				t.Fatal(err)
			}
			if got := g.Reactions("acme/app", id); !slices.Equal(got, []string{"eyes"}) {
				t.Errorf("reactions %q, want one eyes", got)
			}
			if got := g.Count("POST", reactPath); got != tc.attempts {
				t.Errorf("%d POSTs, want %d", got, tc.attempts)
			}
		})
	}
}

func TestReactGivesUpWhenHTTPXDoes(t *testing.T) {
	g, c, r, id := commented(t, "alice", "hi")
	g.Inject(forgetest.Fault{Method: "POST", Path: reactPath, Status: 502, Times: -1})
	err := c.React(t.Context(), r, id, forge.ReactionSeen)
	want := `reacting "eyes" to comment ` + strconv.FormatInt(id, 10) + " on acme/app#1"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one naming %q", err, want)
	}
	// httpx retries a request three times: four attempts in all.
	if got := g.Count("POST", reactPath); got != 4 {
		t.Errorf("%d POSTs, want 4", got)
	}
	if got := g.Reactions("acme/app", id); len(got) != 0 {
		t.Errorf("reactions %q after failures", got)
	}
}

func TestReactFailures(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a"})
	id := g.AddComment("acme/app", n, "alice", "hi")
	elsewhere := g.AddComment("acme/lib", g.AddIssue("acme/lib", forgetest.IssueSeed{Title: "b"}), "alice", "x")
	c, _ := newClient(t, g, withRetries(g))
	issue := ref(task.Issue, "acme/app", n)
	react := func(tc refusal) error { return c.React(t.Context(), tc.ref, tc.id, tc.arg) }
	checkRefusals(t, g, react, []refusal{
		{"unknown comment", issue, 99999, "eyes", true, 1, "reacting \"eyes\" to comment 99999 on acme/app#1"},
		{"comment of another repository", issue, elsewhere, "eyes", true, 1, "on acme/app#1"},
		{"not a reaction", issue, id, "smile", false, 1, "422"},
		{"empty reaction", issue, id, " ", false, 0, "empty reaction"},
		{"zero id", issue, 0, "eyes", false, 0, "comment id must be positive"},
		{"gitlab ref", task.Ref{Forge: task.GitLab, Repo: "acme/app", Kind: task.Issue, Number: n}, id, "eyes", false, 0, "not a github task"},
	})
	if got := g.Reactions("acme/app", id); len(got) != 0 {
		t.Errorf("reactions %q", got)
	}
}

func TestCommentCount(t *testing.T) {
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a", Labels: []string{"coding agent"}})
	p := g.AddPull("acme/app", forgetest.PullSeed{IssueSeed: forgetest.IssueSeed{Title: "p", Labels: []string{"coding agent"}}})
	quiet := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "q", Labels: []string{"coding agent"}})
	for i := range 3 {
		g.AddComment("acme/app", n, "alice", fmt.Sprint(i))
	}
	g.AddComment("acme/app", p, "bob", "x")
	c, _ := newClient(t, g)
	want := map[int]int{n: 3, p: 1, quiet: 0}
	for num, count := range want {
		kind := task.Issue
		if num == p {
			kind = task.PullRequest
		}
		tk, err := c.Get(t.Context(), ref(kind, "acme/app", num))
		if err != nil || tk.CommentCount != count {
			t.Errorf("Get #%d: CommentCount %d, %v; want %d", num, tk.CommentCount, err, count)
		}
	}
	for name, opt := range map[string]func(*github.Options){
		"repository listing": nil,
		"search":             func(o *github.Options) { o.Repositories, o.Owner = nil, "acme" },
	} {
		cl := c
		if opt != nil {
			cl, _ = newClient(t, g, opt)
		}
		ts, err := cl.Discover(t.Context(), "coding agent")
		if err != nil || len(ts) != 3 {
			t.Fatalf("%s: Discover = %d tasks, %v", name, len(ts), err)
		}
		for _, tk := range ts {
			if tk.CommentCount != want[tk.Ref.Number] {
				t.Errorf("%s: %s CommentCount %d, want %d", name, tk.Ref, tk.CommentCount, want[tk.Ref.Number])
			}
		}
	}
	if _, err := c.PostComment(t.Context(), ref(task.Issue, "acme/app", quiet), "hello"); err != nil {
		t.Fatal(err)
	}
	if tk, err := c.Get(t.Context(), ref(task.Issue, "acme/app", quiet)); err != nil || tk.CommentCount != 1 {
		t.Errorf("after posting: CommentCount %d, %v; want 1", tk.CommentCount, err)
	}
}

func TestLabeledByReadsTheNewestLabeledEvent(t *testing.T) {
	for _, kind := range []task.Kind{task.Issue, task.PullRequest} {
		t.Run(string(kind), func(t *testing.T) {
			g := forgetest.NewGitHub(t)
			seed := forgetest.IssueSeed{Title: "a", Author: "stranger", Labels: []string{"coding agent", "bug"}, LabeledBy: "stranger"}
			n := g.AddIssue("acme/app", seed)
			if kind == task.PullRequest {
				n = g.AddPull("acme/app", forgetest.PullSeed{IssueSeed: seed})
			}
			c, _ := newClient(t, g)
			r := ref(kind, "acme/app", n)
			who := func(label string) string {
				t.Helper()
				got, err := c.LabeledBy(t.Context(), r, label)
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			if got := who("coding agent"); got != "stranger" {
				t.Errorf("labeled by %q, want stranger", got)
			}
			// Removed (by the bot) and added again by someone else: the
			// newest labeled event counts, whatever case the name has.
			if err := c.RemoveLabel(t.Context(), r, "coding agent"); err != nil {
				t.Fatal(err)
			}
			for i := range 120 { // more than a page of events
				g.AddLabelBy("acme/app", n, fmt.Sprint("noise ", i), "stranger")
			}
			g.AddLabelBy("acme/app", n, "Coding Agent", "maintainer")
			if got := who("coding agent"); got != "maintainer" {
				t.Errorf("after relabelling: labeled by %q, want maintainer", got)
			}
			if got := who("never set"); got != "" {
				t.Errorf("a label never added: %q", got)
			}
		})
	}
}

func TestLabeledByErrors(t *testing.T) {
	g := forgetest.NewGitHub(t)
	g.AddRepo("acme/app")
	c, _ := newClient(t, g)
	_, err := c.LabeledBy(t.Context(), ref(task.Issue, "acme/app", 9), "coding agent")
	if !errors.Is(err, forge.ErrNotFound) || !strings.Contains(err.Error(), "events of acme/app#9") {
		t.Errorf("missing issue: %v", err)
	}
}
