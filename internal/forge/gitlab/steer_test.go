package gitlab_test

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/gitlab"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

var start = time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)

// brief renders comments as "author: body", system notes marked.
func brief(cs []task.Comment) []string {
	var out []string
	for _, c := range cs {
		s := c.Author + ": " + c.Body
		if c.System {
			s += " (system)"
		}
		out = append(out, s)
	}
	return out
}

func TestCommentsSinceKeepsRecentAndEditedNotes(t *testing.T) {
	for _, kind := range []task.Kind{task.Issue, task.MergeRequest} {
		t.Run(string(kind), func(t *testing.T) {
			g := forgetest.NewGitLab(t)
			clk := forgetest.NewClock(start)
			g.SetClock(clk.Now) // before anything is stamped: stamps never go back
			g.AddProject("acme/app")
			g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
			g.AddMR("acme/app", forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: "m"}})
			ek := emulatorKind[kind]
			mine := g.AddNote("acme/app", ek, 1, "coding-agent-bot", "v1", false)
			for i := range 120 {
				g.AddNote("acme/app", ek, 1, "alice", fmt.Sprint("old ", i), i%9 == 0)
			}
			since := start.Add(30 * time.Minute)
			clk.Set(since)
			g.AddNote("acme/app", ek, 1, "bob", "at since", false)
			clk.Set(since.Add(time.Hour))
			g.AddNote("acme/app", ek, 1, "carol", "changed the description", true)
			g.AddNote("acme/app", ek, 1, "carol", "after since", false)
			clk.Set(since.Add(2 * time.Hour))
			c, _ := newClient(t, g, nil)
			if err := c.EditComment(t.Context(), refOf(kind), mine, "v2"); err != nil {
				t.Fatal(err)
			}
			g.ResetRequests()

			got, err := c.CommentsSince(t.Context(), refOf(kind), since)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{
				"coding-agent-bot: v2", // created before since, edited after it
				"bob: at since",
				"carol: changed the description (system)",
				"carol: after since",
			}
			if diff := cmp.Diff(want, brief(got)); diff != "" {
				t.Errorf("comments since (-want +got):\n%s", diff)
			}
			if len(got) > 1 && !got[1].CreatedAt.Equal(since) {
				t.Errorf("note at since created %s", got[1].CreatedAt)
			}
			for _, r := range g.Requests() {
				q, _ := url.ParseQuery(r.Query)
				if q.Get("sort") != "asc" || q.Get("order_by") != "created_at" {
					t.Errorf("notes request %s?%s does not ask for ascending created_at", r.Path, r.Query)
				}
			}
			if n := g.Count("GET", "/notes"); n != 2 {
				t.Errorf("%d notes requests, want both pages", n)
			}

			all, err := c.CommentsSince(t.Context(), refOf(kind), time.Time{})
			if err != nil || len(all) != 124 {
				t.Errorf("zero since: %d notes, %v; want all 124", len(all), err)
			}
		})
	}
}

func TestCommentsSinceErrors(t *testing.T) {
	g, _ := seedBoth(t)
	c, _ := newClient(t, g, nil)
	_, err := c.CommentsSince(t.Context(), issueRef("acme/app", 9), start)
	if !errors.Is(err, forge.ErrNotFound) || !strings.Contains(err.Error(), "listing notes of acme/app#9 since 2025-06-01T09:00:00Z") {
		t.Errorf("missing issue: %v", err)
	}
	if _, err := c.CommentsSince(t.Context(), task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 1}, start); err == nil {
		t.Error("a github ref was accepted")
	}
}

func TestCanWrite(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("grp/sub/app")
	g.AddProject("grp/other")
	g.AddIssue("grp/sub/app", forgetest.IssueSeed{Title: "t"})
	for user, level := range map[string]int{"dev": 30, "maint": 40, "own": 50, "rep": 20, "guest": 10, "both": 20, "ann": 20, "anna": 30} {
		g.AddMember("grp/sub/app", user, level)
	}
	g.AddGroupMember("grp", "grp-dev", 30)
	g.AddGroupMember("grp/sub", "sub-rep", 20)
	g.AddGroupMember("grp", "both", 40) // higher in the group than in the project
	g.AddMember("grp/other", "elsewhere", 50)
	c, _ := newClient(t, g, nil)
	r := issueRef("grp/sub/app", 1)
	for _, tc := range []struct {
		user string
		want bool
	}{
		{"dev", true}, {"maint", true}, {"own", true}, {"DEV", true},
		{"grp-dev", true}, {"both", true},
		{"rep", false}, {"guest", false}, {"sub-rep", false},
		{"ann", false}, // "anna" matches the query too, and may write
		{"anna", true}, // "ann" comes first in the answer
		{"an", false},  // only part of names
		{"elsewhere", false},
		{"nobody", false},
	} {
		g.ResetRequests()
		got, err := c.CanWrite(t.Context(), r, tc.user)
		if err != nil || got != tc.want {
			t.Errorf("CanWrite(%q) = %v, %v; want %v, nil", tc.user, got, err, tc.want)
		}
		reqs := g.Requests()
		if len(reqs) != 1 || reqs[0].Path != "/api/v4/projects/grp%2Fsub%2Fapp/members/all" {
			t.Errorf("CanWrite(%q) sent %+v, want one members/all request", tc.user, reqs)
			continue
		}
		if q, _ := url.ParseQuery(reqs[0].Query); q.Get("query") != tc.user {
			t.Errorf("CanWrite(%q) asked with query %q", tc.user, reqs[0].Query)
		}
	}
}

func TestCanWriteReadsOnUntilTheUserTurnsUp(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	for i := range 120 {
		g.AddMember("acme/app", fmt.Sprintf("sam%03d", i), 20)
	}
	g.AddMember("acme/app", "sam", 30) // listed last, on page 2
	c, _ := newClient(t, g, nil)
	for _, tc := range []struct {
		user  string
		want  bool
		pages int
	}{
		{"sam", true, 2},
		{"sam000", false, 1}, // found on page 1: no need for page 2
	} {
		g.ResetRequests()
		got, err := c.CanWrite(t.Context(), issueRef("acme/app", 1), tc.user)
		if err != nil || got != tc.want {
			t.Errorf("CanWrite(%q) = %v, %v; want %v", tc.user, got, err, tc.want)
		}
		if n := g.Count("GET", "/members/all"); n != tc.pages {
			t.Errorf("CanWrite(%q) read %d pages, want %d", tc.user, n, tc.pages)
		}
	}
}

func TestCanWriteErrors(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	g.AddMember("acme/app", "dev", 30)
	c, _ := newClient(t, g, nil)
	_, err := c.CanWrite(t.Context(), issueRef("acme/gone", 1), "dev")
	if !errors.Is(err, forge.ErrNotFound) || !strings.Contains(err.Error(), "checking whether dev may write to acme/gone") {
		t.Errorf("missing project: %v", err)
	}
	g.Inject(forgetest.Fault{Method: "GET", Path: "/members/all", Status: 403})
	if got, err := c.CanWrite(t.Context(), issueRef("acme/app", 1), "dev"); err == nil || got || errors.Is(err, forge.ErrNotFound) {
		t.Errorf("403: %v, %v; want an error", got, err)
	}
	g.ResetRequests()
	if _, err := c.CanWrite(t.Context(), issueRef("acme/app", 1), ""); err == nil || len(g.Requests()) != 0 {
		t.Errorf("empty user: %v after %d requests", err, len(g.Requests()))
	}
	if _, err := c.CanWrite(t.Context(), task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 1}, "dev"); err == nil {
		t.Error("a github ref was accepted")
	}
}

const awardPath = "/award_emoji"

func TestReactAwardsOnceOnIssueAndMergeRequestNotes(t *testing.T) {
	for _, kind := range []task.Kind{task.Issue, task.MergeRequest} {
		t.Run(string(kind), func(t *testing.T) {
			g, _ := seedBoth(t)
			ek := emulatorKind[kind]
			id := g.AddNote("acme/app", ek, 1, "alice", "please also update the docs", false)
			other := g.AddNote("acme/app", ek, 1, "bob", "lgtm", false)
			c, _ := newClient(t, g, nil)
			if err := c.React(t.Context(), refOf(kind), id, forge.ReactionSeen); err != nil {
				t.Fatal(err)
			}
			// GitLab refuses the repeat with a 404; the adapter finds the
			// bot's award on the note and counts that as done.
			if err := c.React(t.Context(), refOf(kind), id, forge.ReactionSeen); err != nil {
				t.Fatalf("repeated award: %v", err)
			}
			if got := g.Awards("acme/app", ek, 1, id); !slices.Equal(got, []string{"eyes"}) {
				t.Errorf("awards %q, want [eyes]", got)
			}
			if got := g.Awards("acme/app", ek, 1, other); len(got) != 0 {
				t.Errorf("another note got awards %q", got)
			}
			var log []string
			for _, r := range g.Requests() {
				log = append(log, fmt.Sprint(r.Method, " ", r.Status))
			}
			want := []string{"POST 201", "POST 404", "GET 200", "GET 200"} // the second GET: the bot's name
			if diff := cmp.Diff(want, log); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
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
		{"502 once", forgetest.Fault{Method: "POST", Path: awardPath, Status: 502}, 2},
		{"502 after the award landed", forgetest.Fault{Method: "POST", Path: awardPath, Status: 502, AfterServe: true}, 2},
		{"503 three times", forgetest.Fault{Method: "POST", Path: awardPath, Status: 503, Times: 3}, 4},
		{"429", forgetest.Fault{Method: "POST", Path: awardPath, Status: 429, Header: map[string]string{"Retry-After": "1"}}, 2},
	} {
		for _, kind := range []task.Kind{task.Issue, task.MergeRequest} {
			t.Run(tc.name+"/"+string(kind), func(t *testing.T) {
				g, _ := seedBoth(t)
				ek := emulatorKind[kind]
				id := g.AddNote("acme/app", ek, 1, "alice", "hi", false)
				c, _ := newClient(t, g, withRetries(g))
				g.Inject(tc.fault)
				if err := c.React(t.Context(), refOf(kind), id, forge.ReactionSeen); err != nil {
					t.Fatal(err)
				}
				if got := g.Awards("acme/app", ek, 1, id); !slices.Equal(got, []string{"eyes"}) {
					t.Errorf("awards %q, want one eyes", got)
				}
				if got := g.Count("POST", awardPath); got != tc.attempts {
					t.Errorf("%d POSTs, want %d", got, tc.attempts)
				}
			})
		}
	}
}

func TestReactGivesUpWhenHTTPXDoes(t *testing.T) {
	g, _ := seedBoth(t)
	id := g.AddNote("acme/app", forgetest.KindMergeRequest, 1, "alice", "hi", false)
	c, _ := newClient(t, g, withRetries(g))
	g.Inject(forgetest.Fault{Method: "POST", Path: awardPath, Status: 502, Times: -1})
	err := c.React(t.Context(), refOf(task.MergeRequest), id, forge.ReactionSeen)
	want := fmt.Sprintf(`awarding "eyes" to note %d on acme/app!1`, id)
	if err == nil || !strings.Contains(err.Error(), want) || errors.Is(err, forge.ErrNotFound) {
		t.Fatalf("error %v, want one naming %q", err, want)
	}
	// httpx retries a request three times: four attempts in all.
	if got := g.Count("POST", awardPath); got != 4 {
		t.Errorf("%d POSTs, want 4", got)
	}
	if got := g.Awards("acme/app", forgetest.KindMergeRequest, 1, id); len(got) != 0 {
		t.Errorf("awards %q after failures", got)
	}
}

func TestReactFailures(t *testing.T) {
	g, notes := seedBoth(t)
	system := g.AddNote("acme/app", forgetest.KindIssue, 1, "alice", "added label", true)
	c, _ := newClient(t, g, nil)
	issue := refOf(task.Issue)
	// The GET /user for the bot's name is made once, on the first 404.
	react := func(tc refusal) error {
		if tc.name == "awards list fails" {
			g.Inject(forgetest.Fault{Method: "POST", Path: awardPath, Status: 404})
			g.Inject(forgetest.Fault{Method: "GET", Path: awardPath, Status: 500})
		}
		return c.React(t.Context(), tc.ref, tc.id, tc.arg)
	}
	checkRefusals(t, g, react, []refusal{
		{"unknown note", issue, 99999, "eyes", true, 3, `awarding "eyes" to note 99999 on acme/app#1: not found`},
		{"note of the merge request", issue, notes[task.MergeRequest], "eyes", true, 2, "on acme/app#1"},
		{"missing project", task.Ref{Forge: task.GitLab, Repo: "acme/gone", Kind: task.Issue, Number: 1}, 5, "eyes", true, 2, "on acme/gone#1"},
		{"system note", issue, system, "eyes", true, 2, "on acme/app#1"},
		{"not an emoji", issue, notes[task.Issue], "no-such-emoji", true, 2, "on acme/app#1"},
		{"awards list fails", issue, notes[task.Issue], "eyes", false, 2, "reading the note's awards"},
		{"empty emoji", issue, notes[task.Issue], "", false, 0, "empty emoji name"},
		{"zero id", issue, 0, "eyes", false, 0, "note id must be positive"},
		{"github ref", task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 1}, 5, "eyes", false, 0, "not a gitlab task"},
	})
	for _, id := range []int64{notes[task.Issue], system} {
		if got := g.Awards("acme/app", forgetest.KindIssue, 1, id); len(got) != 0 {
			t.Errorf("note %d got awards %q", id, got)
		}
	}
}

func TestCommentCount(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("grp/app")
	i := g.AddIssue("grp/app", forgetest.IssueSeed{Title: "i", Labels: []string{label}})
	m := g.AddMR("grp/app", forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: "m", Labels: []string{label}}})
	g.AddNote("grp/app", forgetest.KindIssue, i, "alice", "one", false)
	g.AddNote("grp/app", forgetest.KindIssue, i, "alice", "added label", true) // not counted
	g.AddNote("grp/app", forgetest.KindIssue, i, "bob", "two", false)
	g.AddNote("grp/app", forgetest.KindMergeRequest, m, "carol", "changed the description", true)
	want := map[task.Ref]int{issueRef("grp/app", i): 2, mrRef("grp/app", m): 0}
	for name, edit := range map[string]func(*gitlab.Options){
		"project": func(o *gitlab.Options) { o.Projects = []string{"grp/app"} },
		"group":   func(o *gitlab.Options) { o.Group = "grp" },
	} {
		c, _ := newClient(t, g, edit)
		for r, n := range want {
			tk, err := c.Get(t.Context(), r)
			if err != nil || tk.CommentCount != n {
				t.Errorf("Get %s: CommentCount %d, %v; want %d", r, tk.CommentCount, err, n)
			}
		}
		ts, err := c.Discover(t.Context(), label)
		if err != nil || len(ts) != 2 {
			t.Fatalf("%s: Discover = %d tasks, %v", name, len(ts), err)
		}
		for _, tk := range ts {
			if tk.CommentCount != want[tk.Ref] {
				t.Errorf("%s: Discover %s CommentCount %d, want %d", name, tk.Ref, tk.CommentCount, want[tk.Ref])
			}
		}
	}
	c, _ := newClient(t, g, nil)
	if _, err := c.PostComment(t.Context(), mrRef("grp/app", m), "hello"); err != nil {
		t.Fatal(err)
	}
	if tk, err := c.Get(t.Context(), mrRef("grp/app", m)); err != nil || tk.CommentCount != 1 {
		t.Errorf("after posting: CommentCount %d, %v; want 1", tk.CommentCount, err)
	}
}

func TestLabeledByReadsTheNewestAddEvent(t *testing.T) {
	for _, kind := range []string{forgetest.KindIssue, forgetest.KindMergeRequest} {
		t.Run(kind, func(t *testing.T) {
			g := forgetest.NewGitLab(t)
			g.AddProject("grp/app")
			seed := forgetest.IssueSeed{Title: "a", Author: "stranger", Labels: []string{"coding agent", "bug"}, LabeledBy: "stranger"}
			r := issueRef("grp/app", g.AddIssue("grp/app", seed))
			if kind == forgetest.KindMergeRequest {
				r = mrRef("grp/app", g.AddMR("grp/app", forgetest.MRSeed{IssueSeed: seed}))
			}
			c, _ := newClient(t, g, nil)
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
			if err := c.RemoveLabel(t.Context(), r, "coding agent"); err != nil {
				t.Fatal(err)
			}
			for i := range 120 { // more than a page of events
				g.AddLabelBy("grp/app", kind, r.Number, fmt.Sprint("noise ", i), "stranger")
			}
			g.AddLabelBy("grp/app", kind, r.Number, "coding agent", "maintainer")
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
	g := forgetest.NewGitLab(t)
	g.AddProject("grp/app")
	c, _ := newClient(t, g, nil)
	_, err := c.LabeledBy(t.Context(), issueRef("grp/app", 9), "coding agent")
	if !errors.Is(err, forge.ErrNotFound) || !strings.Contains(err.Error(), "label events of grp/app#9") {
		t.Errorf("missing issue: %v", err)
	}
}
