package forgetest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/coding-agent/coding-agent/internal/forgetest"
)

func glClient(t *testing.T, g *forgetest.GitLab) *gl.Client {
	t.Helper()
	c, err := gl.NewClient(g.Token, gl.WithBaseURL(g.URL()), gl.WithHTTPClient(g.Client()), gl.WithoutRetries())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// glDo sends a raw request and returns the status, headers and body.
func glDo(t *testing.T, g *forgetest.GitLab, method, path string, hdr map[string]string, body io.Reader) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, g.URL()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := g.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestGitLabAuth(t *testing.T) {
	g := forgetest.NewGitLab(t)
	for name, tc := range map[string]struct {
		hdr  map[string]string
		want int
	}{
		"none":          {nil, 401},
		"wrong token":   {map[string]string{"PRIVATE-TOKEN": "nope"}, 401},
		"private token": {map[string]string{"PRIVATE-TOKEN": g.Token}, 200},
		"bearer":        {map[string]string{"Authorization": "Bearer " + g.Token}, 200},
	} {
		t.Run(name, func(t *testing.T) {
			status, _, body := glDo(t, g, "GET", "/user", tc.hdr, nil)
			if status != tc.want {
				t.Fatalf("status %d, want %d (%s)", status, tc.want, body)
			}
			if status == 401 && body != `{"message":"401 Unauthorized"}` {
				t.Errorf("401 body %s", body)
			}
			if status == 200 && !strings.Contains(body, `"username":"coding-agent-bot"`) {
				t.Errorf("user body %s", body)
			}
		})
	}
}

// TestGitLabClientTypesRoundTrip decodes the emulator's answers with the
// GitLab client's own types.
func TestGitLabClientTypesRoundTrip(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.BotUsername = "agent"
	pid := g.AddProject("grp/sub/app")
	mr := g.AddMR("grp/sub/app", forgetest.MRSeed{
		IssueSeed:    forgetest.IssueSeed{Title: "Fix", Body: "desc", Author: "bob", Labels: []string{"z", "coding agent"}, Assignees: []string{"carol"}},
		SourceBranch: "fix-1", TargetBranch: "develop",
	})
	iss := g.AddIssue("grp/sub/app", forgetest.IssueSeed{Title: "Bug", Author: "dave"})
	g.AddNote("grp/sub/app", forgetest.KindMergeRequest, mr, "bob", "hello", false)
	g.AddNote("grp/sub/app", forgetest.KindMergeRequest, mr, "bob", "changed the description", true)
	c := glClient(t, g)

	m, _, err := c.MergeRequests.GetMergeRequest("grp/sub/app", int64(mr), nil)
	if err != nil {
		t.Fatal(err)
	}
	gotMR := []any{m.IID, m.ProjectID, m.Title, m.Description, m.State, m.SourceBranch, m.TargetBranch,
		m.References.Full, m.Author.Username, []string(m.Labels), m.Assignees[0].Username, m.CreatedAt != nil}
	wantMR := []any{int64(1), int64(pid), "Fix", "desc", "opened", "fix-1", "develop",
		"grp/sub/app!1", "bob", []string{"coding agent", "z"}, "carol", true}
	if diff := cmp.Diff(wantMR, gotMR); diff != "" {
		t.Errorf("merge request (-want +got):\n%s", diff)
	}
	if !strings.HasSuffix(m.WebURL, "/grp/sub/app/-/merge_requests/1") {
		t.Errorf("web_url %q", m.WebURL)
	}

	i, _, err := c.Issues.GetIssue(pid, int64(iss))
	if err != nil {
		t.Fatal(err)
	}
	if i.IID != 1 || i.References.Full != "grp/sub/app#1" || i.Author.Username != "dave" || i.Title != "Bug" {
		t.Errorf("issue %+v", i)
	}

	notes, _, err := c.Notes.ListMergeRequestNotes("grp/sub/app", int64(mr), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]any
	for _, n := range notes {
		got = append(got, [2]any{n.Body, n.System})
	}
	// GitLab lists notes newest first unless told otherwise.
	if diff := cmp.Diff([][2]any{{"changed the description", true}, {"hello", false}}, got); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}

	u, _, err := c.Users.CurrentUser()
	if err != nil || u.Username != "agent" {
		t.Errorf("current user %v, %v", u, err)
	}
	p, _, err := c.Projects.GetProject("grp/sub/app", nil)
	if err != nil || p.PathWithNamespace != "grp/sub/app" || p.Namespace.FullPath != "grp/sub" || p.ID != int64(pid) {
		t.Errorf("project %v, %v", p, err)
	}
}

func TestGitLabPagination(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	for range 45 {
		g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	}
	c := glClient(t, g)
	_, resp, err := c.Issues.ListProjectIssues("acme/app", &gl.ListProjectIssuesOptions{ListOptions: gl.ListOptions{Page: 2}})
	if err != nil {
		t.Fatal(err)
	}
	got := []int64{resp.CurrentPage, resp.ItemsPerPage, resp.NextPage, resp.PreviousPage, resp.TotalItems, resp.TotalPages}
	if diff := cmp.Diff([]int64{2, 20, 3, 1, 45, 3}, got); diff != "" {
		t.Errorf("page 2 headers (-want +got):\n%s", diff)
	}
	next, err := url.Parse(resp.NextLink)
	if err != nil || next.Query().Get("page") != "3" || !strings.HasSuffix(next.EscapedPath(), "/projects/acme%2Fapp/issues") {
		t.Errorf("Link next %q", resp.NextLink)
	}
	items, resp, err := c.Issues.ListProjectIssues("acme/app", &gl.ListProjectIssuesOptions{ListOptions: gl.ListOptions{Page: 3}})
	if err != nil || len(items) != 5 || resp.NextPage != 0 || resp.Header.Get("X-Next-Page") != "" {
		t.Errorf("last page: %d items, next %d, err %v", len(items), resp.NextPage, err)
	}
	items, resp, err = c.Issues.ListProjectIssues("acme/app", &gl.ListProjectIssuesOptions{ListOptions: gl.ListOptions{PerPage: 500}})
	if err != nil || len(items) != 45 || resp.ItemsPerPage != 100 {
		t.Errorf("per_page 500: %d items, per page %d, err %v", len(items), resp.ItemsPerPage, err)
	}
}

func TestGitLabListFilters(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "a", Labels: []string{"x", "y"}})
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "b", Labels: []string{"x"}})
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "c", Labels: []string{"x", "y"}, State: "closed"})
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "d"})
	c := glClient(t, g)
	titles := func(opt *gl.ListProjectIssuesOptions) []string {
		t.Helper()
		is, _, err := c.Issues.ListProjectIssues("acme/app", opt)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, i := range is {
			out = append(out, i.Title)
		}
		return out
	}
	for name, tc := range map[string]struct {
		opt  *gl.ListProjectIssuesOptions
		want []string
	}{
		"default is every state, newest first": {&gl.ListProjectIssuesOptions{}, []string{"d", "c", "b", "a"}},
		"opened":                               {&gl.ListProjectIssuesOptions{State: gl.Ptr("opened")}, []string{"d", "b", "a"}},
		"all labels must match":                {&gl.ListProjectIssuesOptions{Labels: &gl.LabelOptions{"x", "y"}}, []string{"c", "a"}},
		"no labels":                            {&gl.ListProjectIssuesOptions{Labels: &gl.LabelOptions{"None"}}, []string{"d"}},
		"ascending":                            {&gl.ListProjectIssuesOptions{State: gl.Ptr("opened"), Sort: gl.Ptr("asc"), OrderBy: gl.Ptr("created_at")}, []string{"a", "b", "d"}},
	} {
		if diff := cmp.Diff(tc.want, titles(tc.opt)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestGitLabProjectAddressing(t *testing.T) {
	g := forgetest.NewGitLab(t)
	id := g.AddProject("acme/my.app")
	g.AddIssue("acme/my.app", forgetest.IssueSeed{Title: "t"})
	tok := map[string]string{"PRIVATE-TOKEN": g.Token}
	for path, want := range map[string]int{
		"/projects/acme%2Fmy.app/issues/1":            200,
		"/projects/acme%2Fmy%2Eapp/issues/1":          200,
		"/projects/" + strconv.Itoa(id) + "/issues/1": 200,
		"/projects/acme/my.app/issues/1":              404,
		"/projects/acme%2Fother/issues/1":             404,
		"/projects/acme%2Fmy.app/issues/2":            404,
		"/projects/acme%2Fmy.app/merge_requests/1":    404,
	} {
		status, _, body := glDo(t, g, "GET", path, tok, nil)
		if status != want {
			t.Errorf("GET %s: %d, want %d (%s)", path, status, want, body)
		}
	}
	if _, _, body := glDo(t, g, "GET", "/projects/acme%2Fother", tok, nil); body != `{"message":"404 Project Not Found"}` {
		t.Errorf("unknown project body %s", body)
	}
}

func TestGitLabGroupListsIncludeSubgroups(t *testing.T) {
	g := forgetest.NewGitLab(t)
	for _, p := range []string{"grp/app", "grp/sub/lib", "grp/sub/deep/svc", "other/app", "grpx/app"} {
		g.AddProject(p)
		g.AddIssue(p, forgetest.IssueSeed{Title: p})
		g.AddMR(p, forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: p}})
	}
	c := glClient(t, g)
	is, _, err := c.Issues.ListGroupIssues("grp", &gl.ListGroupIssuesOptions{Sort: gl.Ptr("asc")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, i := range is {
		got = append(got, i.References.Full)
	}
	if diff := cmp.Diff([]string{"grp/app#1", "grp/sub/lib#1", "grp/sub/deep/svc#1"}, got); diff != "" {
		t.Errorf("group issues (-want +got):\n%s", diff)
	}
	ms, _, err := c.MergeRequests.ListGroupMergeRequests("grp/sub", &gl.ListGroupMergeRequestsOptions{Sort: gl.Ptr("asc")})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, m := range ms {
		got = append(got, m.References.Full)
	}
	if diff := cmp.Diff([]string{"grp/sub/lib!1", "grp/sub/deep/svc!1"}, got); diff != "" {
		t.Errorf("subgroup merge requests (-want +got):\n%s", diff)
	}
	if _, _, err := c.Issues.ListGroupIssues("nope", nil); err == nil {
		t.Error("unknown group: no error")
	}
}

func TestGitLabNotesAndLabels(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Labels: []string{"keep", "old"}})
	g.AddNote("acme/app", forgetest.KindIssue, n, "alice", "first", false)
	c := glClient(t, g)
	note, resp, err := c.Notes.CreateIssueNote("acme/app", int64(n), &gl.CreateIssueNoteOptions{Body: gl.Ptr("second")})
	if err != nil || resp.StatusCode != 201 || note.Author.Username != "coding-agent-bot" {
		t.Fatalf("create note: %v, %v", note, err)
	}
	asc, _, err := c.Notes.ListIssueNotes("acme/app", int64(n), &gl.ListIssueNotesOptions{Sort: gl.Ptr("asc"), OrderBy: gl.Ptr("created_at")})
	if err != nil || len(asc) != 2 || asc[0].Body != "first" || asc[1].Body != "second" {
		t.Errorf("ascending notes %v, %v", asc, err)
	}

	_, _, err = c.Issues.UpdateIssue("acme/app", int64(n), &gl.UpdateIssueOptions{AddLabels: &gl.LabelOptions{"new"}})
	if err != nil {
		t.Fatal(err)
	}
	// Form-encoded, as other clients send it.
	status, _, body := glDo(t, g, "PUT", "/projects/acme%2Fapp/issues/1",
		map[string]string{"PRIVATE-TOKEN": g.Token, "Content-Type": "application/x-www-form-urlencoded"},
		strings.NewReader("remove_labels=old,absent"))
	if status != 200 {
		t.Fatalf("PUT form: %d %s", status, body)
	}
	if diff := cmp.Diff([]string{"keep", "new"}, g.Labels("acme/app", forgetest.KindIssue, n)); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	notes := g.Notes("acme/app", forgetest.KindIssue, n)
	if len(notes) != 2 || notes[1].Author != "coding-agent-bot" || !notes[0].CreatedAt.Before(notes[1].CreatedAt) {
		t.Errorf("notes %+v", notes)
	}
}

func TestGitLabETag(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	tok := map[string]string{"PRIVATE-TOKEN": g.Token}
	status, h, _ := glDo(t, g, "GET", "/projects/acme%2Fapp/issues/1/notes", tok, nil)
	etag := h.Get("ETag")
	if status != 200 || !strings.HasPrefix(etag, `W/"`) {
		t.Fatalf("first GET %d, ETag %q", status, etag)
	}
	cond := map[string]string{"PRIVATE-TOKEN": g.Token, "If-None-Match": etag}
	if status, _, body := glDo(t, g, "GET", "/projects/acme%2Fapp/issues/1/notes", cond, nil); status != 304 || body != "" {
		t.Errorf("conditional GET %d %q, want 304 and no body", status, body)
	}
	g.AddNote("acme/app", forgetest.KindIssue, n, "alice", "hi", false)
	if status, _, _ := glDo(t, g, "GET", "/projects/acme%2Fapp/issues/1/notes", cond, nil); status != 200 {
		t.Errorf("conditional GET after change %d, want 200", status)
	}
	reqs := g.Requests()
	if len(reqs) != 3 || reqs[0].Conditional || !reqs[1].Conditional || reqs[1].Status != 304 {
		t.Errorf("request log %+v", reqs)
	}
}

func TestGitLabFaultsAndRateHeaders(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	tok := map[string]string{"PRIVATE-TOKEN": g.Token}

	_, h1, _ := glDo(t, g, "GET", "/user", tok, nil)
	_, h2, _ := glDo(t, g, "GET", "/user", tok, nil)
	if h1.Get("RateLimit-Limit") != "2000" || h2.Get("RateLimit-Reset") == "" || h1.Get("RateLimit-Remaining") == h2.Get("RateLimit-Remaining") {
		t.Errorf("rate-limit headers %v then %v", h1, h2)
	}

	g.Inject(forgetest.Fault{Method: "GET", Path: "/issues", Status: 429, Header: map[string]string{"Retry-After": "7"}})
	status, h, body := glDo(t, g, "GET", "/projects/acme%2Fapp/issues", tok, nil)
	if status != 429 || h.Get("Retry-After") != "7" || !strings.Contains(body, "429") {
		t.Errorf("429 fault: %d %v %s", status, h, body)
	}

	g.Inject(forgetest.Fault{Method: "POST", Path: "/notes", Status: 502, AfterServe: true})
	status, _, _ = glDo(t, g, "POST", "/projects/acme%2Fapp/issues/1/notes", map[string]string{
		"PRIVATE-TOKEN": g.Token, "Content-Type": "application/json"}, strings.NewReader(`{"body":"landed"}`))
	notes := g.Notes("acme/app", forgetest.KindIssue, n)
	if status != 502 || len(notes) != 1 || notes[0].Body != "landed" {
		t.Errorf("AfterServe 502: status %d, notes %+v", status, notes)
	}
	if got := g.Count("POST", "/notes"); got != 1 {
		t.Errorf("Count(POST, /notes) = %d, want 1", got)
	}
	statuses := []int{}
	for _, r := range g.Requests() {
		statuses = append(statuses, r.Status)
	}
	if !slices.Equal(statuses, []int{200, 200, 429, 502}) {
		t.Errorf("logged statuses %v", statuses)
	}
}

// A 200 whose body is cut short keeps the whole answer's status and ETag;
// an HTML page comes with 200 too. Each is answered once.
func TestGitLabBadBodyFaults(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	tok := map[string]string{"PRIVATE-TOKEN": g.Token}
	const path = "/projects/acme%2Fapp/issues/1"
	_, wholeHdr, whole := glDo(t, g, "GET", path, tok, nil)
	g.Inject(forgetest.Fault{Method: "GET", Path: "/issues/1", Truncate: true})
	status, h, cut := glDo(t, g, "GET", path, tok, nil)
	if status != 200 || h.Get("ETag") != wholeHdr.Get("ETag") || h.Get("ETag") == "" ||
		len(cut) != len(whole)/2 || !strings.HasPrefix(whole, cut) || json.Valid([]byte(cut)) {
		t.Errorf("truncated answer: %d, ETag %q (whole %q), %d of %d bytes: %s", status, h.Get("ETag"), wholeHdr.Get("ETag"),
			len(cut), len(whole), cut)
	}
	g.Inject(forgetest.HTMLFault("GET", "/issues", 1))
	status, h, page := glDo(t, g, "GET", "/projects/acme%2Fapp/issues", tok, nil)
	if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || page != forgetest.HTMLPage {
		t.Errorf("HTML page: %d %q %s", status, h.Get("Content-Type"), page)
	}
	if status, _, b := glDo(t, g, "GET", "/projects/acme%2Fapp/issues", tok, nil); status != 200 || !json.Valid([]byte(b)) {
		t.Errorf("after the faults were used up: %d %s", status, b)
	}
}

func TestGitLabUpdateNote(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	iss := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	mr := g.AddMR("acme/app", forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: "m"}})
	onIssue := g.AddNote("acme/app", forgetest.KindIssue, iss, "coding-agent-bot", "- [ ] build", false)
	onMR := g.AddNote("acme/app", forgetest.KindMergeRequest, mr, "coding-agent-bot", "- [ ] review", false)
	theirs := g.AddNote("acme/app", forgetest.KindIssue, iss, "alice", "please", false)
	system := g.AddNote("acme/app", forgetest.KindIssue, iss, "coding-agent-bot", "added label", true)
	c := glClient(t, g)

	n, _, err := c.Notes.UpdateIssueNote("acme/app", int64(iss), onIssue, &gl.UpdateIssueNoteOptions{Body: gl.Ptr("- [x] build")})
	if err != nil || n.ID != onIssue || n.Body != "- [x] build" || n.Author.Username != "coding-agent-bot" ||
		!n.UpdatedAt.After(*n.CreatedAt) || n.NoteableType != "Issue" {
		t.Fatalf("issue note edit: %+v, %v", n, err)
	}
	n, _, err = c.Notes.UpdateMergeRequestNote("acme/app", int64(mr), onMR, &gl.UpdateMergeRequestNoteOptions{Body: gl.Ptr("- [x] review")})
	if err != nil || n.ID != onMR || n.Body != "- [x] review" || n.NoteableType != "MergeRequest" {
		t.Fatalf("merge request note edit: %+v, %v", n, err)
	}

	note := func(id int64) string { return "/projects/acme%2Fapp/issues/1/notes/" + strconv.FormatInt(id, 10) }
	form := map[string]string{"PRIVATE-TOKEN": g.Token, "Content-Type": "application/x-www-form-urlencoded"}
	jsonHdr := map[string]string{"PRIVATE-TOKEN": g.Token, "Content-Type": "application/json"}
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		body       string
		status     int
		answer     string
	}{
		{"form-encoded", note(onIssue), form, "body=%2A+done", 200, `"body":"* done"`},
		{"unknown note", note(99999), jsonHdr, `{"body":"x"}`, 404, `{"message":"404 Not found"}`},
		{"note of another item", note(onMR), jsonHdr, `{"body":"x"}`, 404, `{"message":"404 Not found"}`},
		{"issue iid for a merge request note", "/projects/acme%2Fapp/merge_requests/1/notes/" + strconv.FormatInt(onIssue, 10), jsonHdr, `{"body":"x"}`, 404, `{"message":"404 Not found"}`},
		{"unknown issue", "/projects/acme%2Fapp/issues/9/notes/" + strconv.FormatInt(onIssue, 10), jsonHdr, `{"body":"x"}`, 404, `{"message":"404 Not found"}`},
		{"unknown project", "/projects/acme%2Fnope/issues/1/notes/" + strconv.FormatInt(onIssue, 10), jsonHdr, `{"body":"x"}`, 404, `{"message":"404 Project Not Found"}`},
		{"someone else's note", note(theirs), jsonHdr, `{"body":"x"}`, 403, `{"message":"403 Forbidden"}`},
		{"system note", note(system), jsonHdr, `{"body":"x"}`, 403, `{"message":"403 Forbidden"}`},
		{"empty body", note(onIssue), jsonHdr, `{"body":"  "}`, 400, `{"error":"body is empty"}`},
		{"missing body", note(onIssue), jsonHdr, `{}`, 400, `{"error":"body is missing"}`},
		{"no token", note(onIssue), map[string]string{"Content-Type": "application/json"}, `{"body":"x"}`, 401, `{"message":"401 Unauthorized"}`},
	} {
		status, _, body := glDo(t, g, "PUT", tc.path, tc.hdr, strings.NewReader(tc.body))
		if status != tc.status || !strings.Contains(body, tc.answer) {
			t.Errorf("%s: %d %s, want %d with %s", tc.name, status, body, tc.status, tc.answer)
		}
	}
	var got []string
	for _, n := range g.Notes("acme/app", forgetest.KindIssue, iss) {
		got = append(got, n.Author+": "+n.Body)
		if n.ID == onIssue && !n.UpdatedAt.After(n.CreatedAt) {
			t.Errorf("edited note: updated %v, created %v", n.UpdatedAt, n.CreatedAt)
		}
		if n.ID != onIssue && !n.UpdatedAt.Equal(n.CreatedAt) {
			t.Errorf("note %d moved without an edit", n.ID)
		}
	}
	want := []string{"coding-agent-bot: * done", "alice: please", "coding-agent-bot: added label"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("issue notes (-want +got):\n%s", diff)
	}
	if got := g.Notes("acme/app", forgetest.KindMergeRequest, mr); got[0].Body != "- [x] review" {
		t.Errorf("merge request notes %+v", got)
	}
}

func TestGitLabUpdateNoteFaults(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	iss := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	id := g.AddNote("acme/app", forgetest.KindIssue, iss, "coding-agent-bot", "v1", false)
	c := glClient(t, g)
	body := func() string { return g.Notes("acme/app", forgetest.KindIssue, iss)[0].Body }
	edit := func(s string) (*gl.Response, error) {
		_, resp, err := c.Notes.UpdateIssueNote("acme/app", int64(iss), id, &gl.UpdateIssueNoteOptions{Body: gl.Ptr(s)})
		return resp, err
	}

	g.Inject(forgetest.Fault{Method: "PUT", Path: "/notes/", Status: 500})
	if resp, err := edit("v2"); err == nil || resp.StatusCode != 500 || body() != "v1" {
		t.Errorf("500 fault: %v, body %q; want the error and nothing edited", err, body())
	}
	g.Inject(forgetest.Fault{Method: "PUT", Path: "/notes/", Status: 502, AfterServe: true})
	if resp, err := edit("v3"); err == nil || resp.StatusCode != 502 || body() != "v3" {
		t.Errorf("AfterServe 502: %v, body %q; want the error and the edit made", err, body())
	}
	resp, err := edit("v4")
	if err != nil || body() != "v4" || resp.Header.Get("RateLimit-Limit") != "2000" {
		t.Errorf("edit after the faults: %v, body %q, headers %v", err, body(), resp.Header)
	}
	var statuses []int
	for _, r := range g.Requests() {
		if r.Method == "PUT" && strings.HasSuffix(r.Path, "/notes/"+strconv.FormatInt(id, 10)) {
			statuses = append(statuses, r.Status)
		}
	}
	if !slices.Equal(statuses, []int{500, 502, 200}) || g.Count("PUT", "/notes/") != 3 {
		t.Errorf("logged statuses %v", statuses)
	}
}
