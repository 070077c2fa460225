package forgetest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/coding-agent/coding-agent/internal/forgetest"
)

func TestGitLabMembersAll(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("grp/sub/app")
	g.AddProject("grp/other")
	g.AddMember("grp/sub/app", "dev", 30)
	g.AddMember("grp/sub/app", "both", 20)
	g.AddGroupMember("grp", "both", 40)
	g.AddGroupMember("grp/sub", "sub-rep", 20)
	g.AddMember("grp/other", "elsewhere", 50)
	c := glClient(t, g)

	list := func(query string) map[string]gl.AccessLevelValue {
		t.Helper()
		opt := &gl.ListProjectMembersOptions{}
		if query != "" {
			opt.Query = gl.Ptr(query)
		}
		ms, _, err := c.ProjectMembers.ListAllProjectMembers("grp/sub/app", opt)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]gl.AccessLevelValue{}
		for _, m := range ms {
			out[m.Username] = m.AccessLevel
		}
		return out
	}
	// Inherited members are listed once, at their highest level; the
	// top-level namespace's owner is an Owner.
	want := map[string]gl.AccessLevelValue{"grp": 50, "dev": 30, "both": 40, "sub-rep": 20}
	if diff := cmp.Diff(want, list("")); diff != "" {
		t.Errorf("members/all (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]gl.AccessLevelValue{"sub-rep": 20}, list("SUB")); diff != "" {
		t.Errorf("query SUB (-want +got):\n%s", diff)
	}
	if got := list("nobody"); len(got) != 0 {
		t.Errorf("query nobody: %v", got)
	}
	_, _, err := c.ProjectMembers.ListAllProjectMembers("grp/gone", nil)
	if !errors.Is(err, gl.ErrNotFound) {
		t.Errorf("missing project: %v", err)
	}
}

func TestGitLabMembersAllPages(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	for i := range 45 {
		g.AddMember("acme/app", fmt.Sprintf("user%02d", i), 10)
	}
	c := glClient(t, g)
	opt := &gl.ListProjectMembersOptions{ListOptions: gl.ListOptions{PerPage: 20, Page: 3}}
	ms, resp, err := c.ProjectMembers.ListAllProjectMembers("acme/app", opt)
	if err != nil || len(ms) != 6 || resp.TotalItems != 46 || resp.NextPage != 0 {
		t.Fatalf("page 3: %d members, %+v, %v", len(ms), resp, err)
	}
	// Listed in the order they were added, after the namespace's owner.
	if ms[0].Username != "user39" || ms[5].Username != "user44" {
		t.Errorf("page 3 from %s to %s", ms[0].Username, ms[5].Username)
	}
}

func TestGitLabNoteAwards(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "i"})
	g.AddMR("acme/app", forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: "m"}})
	onIssue := g.AddNote("acme/app", forgetest.KindIssue, 1, "alice", "please", false)
	onMR := g.AddNote("acme/app", forgetest.KindMergeRequest, 1, "alice", "please", false)
	system := g.AddNote("acme/app", forgetest.KindIssue, 1, "alice", "added label", true)
	c := glClient(t, g)

	a, resp, err := c.AwardEmoji.CreateIssuesAwardEmojiOnNote("acme/app", 1, onIssue, &gl.CreateAwardEmojiOptions{Name: "eyes"})
	if err != nil || resp.StatusCode != 201 || a.Name != "eyes" || a.User.Username != g.BotUsername ||
		a.AwardableID != onIssue || a.AwardableType != "Note" {
		t.Fatalf("award on an issue note: %+v, %v", a, err)
	}
	if _, _, err := c.AwardEmoji.CreateMergeRequestAwardEmojiOnNote("acme/app", 1, onMR, &gl.CreateAwardEmojiOptions{Name: "eyes"}); err != nil {
		t.Fatalf("award on a merge request note: %v", err)
	}
	if _, _, err := c.AwardEmoji.CreateIssuesAwardEmojiOnNote("acme/app", 1, onIssue, &gl.CreateAwardEmojiOptions{Name: "thumbsup"}); err != nil {
		t.Fatalf("a second emoji: %v", err)
	}
	tok := map[string]string{"PRIVATE-TOKEN": g.Token, "Content-Type": "application/json"}
	for _, tc := range []struct {
		path, body, message string
		status              int
	}{
		{fmt.Sprintf("/projects/acme%%2Fapp/issues/1/notes/%d/award_emoji", onIssue), `{"name":"eyes"}`, "Name has already been taken", 404},
		{fmt.Sprintf("/projects/acme%%2Fapp/issues/1/notes/%d/award_emoji", onIssue), `{"name":"no-such-emoji"}`, "is not a valid emoji name", 404},
		{fmt.Sprintf("/projects/acme%%2Fapp/issues/1/notes/%d/award_emoji", system), `{"name":"eyes"}`, "cannot be awarded", 404},
		{fmt.Sprintf("/projects/acme%%2Fapp/issues/1/notes/%d/award_emoji", onIssue), `{}`, "name is missing", 400},
		{fmt.Sprintf("/projects/acme%%2Fapp/issues/1/notes/%d/award_emoji", onMR), `{"name":"eyes"}`, "404 Not found", 404},
		{fmt.Sprintf("/projects/acme%%2Fapp/merge_requests/2/notes/%d/award_emoji", onMR), `{"name":"eyes"}`, "404 Not found", 404},
	} {
		status, _, body := glDo(t, g, "POST", tc.path, tok, strings.NewReader(tc.body))
		if status != tc.status || !strings.Contains(body, tc.message) {
			t.Errorf("POST %s %s: %d %s, want %d with %q", tc.path, tc.body, status, body, tc.status, tc.message)
		}
	}
	listed, _, err := c.AwardEmoji.ListIssuesAwardEmojiOnNote("acme/app", 1, onIssue, nil)
	if err != nil || len(listed) != 2 || listed[0].Name != "eyes" || listed[1].Name != "thumbsup" {
		t.Errorf("listed awards %+v, %v", listed, err)
	}
	if diff := cmp.Diff([]string{"eyes", "thumbsup"}, g.Awards("acme/app", forgetest.KindIssue, 1, onIssue)); diff != "" {
		t.Errorf("issue note awards (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"eyes"}, g.Awards("acme/app", forgetest.KindMergeRequest, 1, onMR)); diff != "" {
		t.Errorf("merge request note awards (-want +got):\n%s", diff)
	}
	if got := g.Awards("acme/app", forgetest.KindIssue, 1, system); len(got) != 0 {
		t.Errorf("system note awards %q", got)
	}
	if n := g.Notes("acme/app", forgetest.KindIssue, 1)[0]; !n.UpdatedAt.Equal(n.CreatedAt) {
		t.Errorf("an award moved the note's updated_at: %+v", n)
	}
}

func TestGitLabClockAndUserNotesCount(t *testing.T) {
	g := forgetest.NewGitLab(t)
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	clk := forgetest.NewClock(t0)
	g.SetClock(clk.Now) // right after NewGitLab: any date works
	g.AddProject("acme/app")
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "i"})
	g.AddNote("acme/app", forgetest.KindIssue, 1, "alice", "one", false) // after the project and issue: t0+2ms
	clk.Set(t0.Add(time.Hour))
	g.AddNote("acme/app", forgetest.KindIssue, 1, "alice", "added label", true)
	g.AddNote("acme/app", forgetest.KindIssue, 1, "bob", "two", false)
	clk.Set(t0) // back: stamps still move forward
	g.AddNote("acme/app", forgetest.KindIssue, 1, "carol", "three", false)
	notes := g.Notes("acme/app", forgetest.KindIssue, 1)
	var got []time.Duration
	for _, n := range notes {
		got = append(got, n.CreatedAt.Sub(t0))
	}
	want := []time.Duration{2 * time.Millisecond, time.Hour, time.Hour + time.Millisecond, time.Hour + 2*time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("note times after t0 (-want +got):\n%s", diff)
	}
	i, _, err := glClient(t, g).Issues.GetIssue("acme/app", 1)
	if err != nil || i.UserNotesCount != 3 || !i.UpdatedAt.Equal(t0.Add(time.Hour+2*time.Millisecond)) {
		t.Errorf("issue: user_notes_count %d, updated_at %v, %v; want 3 non-system notes", i.UserNotesCount, i.UpdatedAt, err)
	}
}
