package forgetest

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ghCall sends one request to the emulator with its token and returns the
// response (body already read) and the body.
func ghCall(t *testing.T, g *GitHub, method, path, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, g.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.Token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := g.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func ghDecode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

type ghIssueOut struct {
	Number      int             `json:"number"`
	State       string          `json:"state"`
	PullRequest json.RawMessage `json:"pull_request"`
	Labels      []struct {
		Name string `json:"name"`
	} `json:"labels"`
	URL string `json:"url"`
}

func TestGitHubAuth(t *testing.T) {
	g := NewGitHub(t)
	for _, tc := range []struct{ auth, want string }{
		{"", "Requires authentication"},
		{"Bearer wrong", "Bad credentials"},
	} {
		req, _ := http.NewRequest("GET", g.URL()+"/user", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := g.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || ghDecode[map[string]any](t, b)["message"] != tc.want {
			t.Errorf("auth %q: got %d %s, want 401 %q", tc.auth, resp.StatusCode, b, tc.want)
		}
	}
	resp, b := ghCall(t, g, "GET", "/user", "", "Authorization", "token "+g.Token)
	if resp.StatusCode != 200 || ghDecode[map[string]any](t, b)["login"] != "coding-agent-bot" {
		t.Fatalf("token auth: %d %s", resp.StatusCode, b)
	}
}

var ghLinkRe = regexp.MustCompile(`<([^>]+)>; rel="(\w+)"`)

func ghLinks(h http.Header) map[string]string {
	out := map[string]string{}
	for _, m := range ghLinkRe.FindAllStringSubmatch(h.Get("Link"), -1) {
		out[m[2]] = m[1]
	}
	return out
}

func TestGitHubPaginationLinks(t *testing.T) {
	g := NewGitHub(t)
	for i := range 75 {
		g.AddIssue("acme/app", IssueSeed{Title: "t" + strconv.Itoa(i)})
	}
	resp, b := ghCall(t, g, "GET", "/repos/acme/app/issues?page=2", "")
	if n := len(ghDecode[[]ghIssueOut](t, b)); n != 30 {
		t.Fatalf("page 2 has %d items, want the default 30", n)
	}
	links := ghLinks(resp.Header)
	for rel, page := range map[string]string{"prev": "1", "next": "3", "last": "3", "first": "1"} {
		if !strings.Contains(links[rel], "page="+page) || !strings.HasPrefix(links[rel], g.URL()+"/repos/acme/app/issues?") {
			t.Errorf("rel=%s link %q, want page=%s on the same URL", rel, links[rel], page)
		}
	}
	seen := map[int]bool{}
	next := g.URL() + "/repos/acme/app/issues?per_page=500"
	for next != "" {
		resp, b := ghCall(t, g, "GET", strings.TrimPrefix(next, g.URL()), "")
		items := ghDecode[[]ghIssueOut](t, b)
		if len(items) > 100 {
			t.Fatalf("page of %d items, want at most 100", len(items))
		}
		for _, it := range items {
			seen[it.Number] = true
		}
		next = ghLinks(resp.Header)["next"]
	}
	if len(seen) != 75 {
		t.Fatalf("following next links saw %d issues, want 75", len(seen))
	}
}

func TestGitHubIssueListFilters(t *testing.T) {
	g := NewGitHub(t)
	a := g.AddIssue("acme/app", IssueSeed{Title: "a", Labels: []string{"coding agent", "bug"}})
	b := g.AddPull("acme/app", PullSeed{IssueSeed: IssueSeed{Title: "b", Labels: []string{"Coding Agent"}}})
	g.AddIssue("acme/app", IssueSeed{Title: "c", Labels: []string{"coding agent"}, State: "closed"})
	g.AddIssue("acme/app", IssueSeed{Title: "d", Labels: []string{"bug"}})
	_, body := ghCall(t, g, "GET", "/repos/acme/app/issues?labels=coding+agent&direction=asc", "")
	items := ghDecode[[]ghIssueOut](t, body)
	if len(items) != 2 || items[0].Number != a || items[1].Number != b {
		t.Fatalf("open items labelled 'coding agent' = %+v, want #%d then #%d", items, a, b)
	}
	if items[0].PullRequest != nil || items[1].PullRequest == nil {
		t.Errorf("pull_request key: issue %s, pull %s", items[0].PullRequest, items[1].PullRequest)
	}
	_, body = ghCall(t, g, "GET", "/repos/acme/app/issues?labels=coding+agent,bug", "")
	if items := ghDecode[[]ghIssueOut](t, body); len(items) != 1 || items[0].Number != a {
		t.Errorf("labels=coding agent,bug gave %+v, want only #%d (all labels must match)", items, a)
	}
	_, body = ghCall(t, g, "GET", "/repos/acme/app/issues?state=all", "")
	if items := ghDecode[[]ghIssueOut](t, body); len(items) != 4 || items[0].Number != 4 {
		t.Errorf("state=all gave %d items starting at #%d, want 4 newest first", len(items), items[0].Number)
	}
}

func TestGitHubNotFound(t *testing.T) {
	g := NewGitHub(t)
	g.AddIssue("acme/app", IssueSeed{Title: "a"})
	for _, p := range []string{"/repos/acme/nope/issues", "/repos/acme/app/issues/9", "/repos/acme/app/pulls/1", "/nothing/here"} {
		resp, b := ghCall(t, g, "GET", p, "")
		if resp.StatusCode != 404 || ghDecode[map[string]any](t, b)["message"] != "Not Found" {
			t.Errorf("GET %s: %d %s, want 404 Not Found", p, resp.StatusCode, b)
		}
	}
}

func TestGitHubETagNotModified(t *testing.T) {
	g := NewGitHub(t)
	n := g.AddIssue("acme/app", IssueSeed{Title: "a", Labels: []string{"x"}})
	resp, _ := ghCall(t, g, "GET", "/repos/acme/app/issues?labels=x", "")
	etag := resp.Header.Get("ETag")
	remaining := resp.Header.Get("X-RateLimit-Remaining")
	if etag == "" || remaining == "" {
		t.Fatalf("missing ETag %q or X-RateLimit-Remaining %q", etag, remaining)
	}
	resp, b := ghCall(t, g, "GET", "/repos/acme/app/issues?labels=x", "", "If-None-Match", etag)
	if resp.StatusCode != 304 || len(b) != 0 {
		t.Fatalf("conditional GET: %d with %d bytes, want 304 without body", resp.StatusCode, len(b))
	}
	if got := resp.Header.Get("X-RateLimit-Remaining"); got != remaining {
		t.Errorf("304 spent the rate limit: remaining %s, was %s", got, remaining)
	}
	if reqs := g.Requests(); !reqs[len(reqs)-1].Conditional || reqs[len(reqs)-1].Status != 304 {
		t.Errorf("request log: %+v", reqs[len(reqs)-1])
	}
	g.AddLabelDirect("acme/app", n, "y")
	resp, _ = ghCall(t, g, "GET", "/repos/acme/app/issues?labels=x", "", "If-None-Match", etag)
	if resp.StatusCode != 200 || resp.Header.Get("ETag") == etag {
		t.Errorf("after a change: %d etag %q, want 200 with a new ETag", resp.StatusCode, resp.Header.Get("ETag"))
	}
	left, _ := strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining"))
	if was, _ := strconv.Atoi(remaining); left != was-1 || g.RateRemaining("core") != left {
		t.Errorf("remaining %d after a 200, want %d (emulator says %d)", left, was-1, g.RateRemaining("core"))
	}
}

func TestGitHubLabelsOneByOne(t *testing.T) {
	g := NewGitHub(t)
	n := g.AddIssue("acme/app", IssueSeed{Title: "a", Labels: []string{"coding agent"}})
	resp, b := ghCall(t, g, "POST", "/repos/acme/app/issues/1/labels", `{"labels":["coding agent processing"]}`)
	if resp.StatusCode != 200 || len(ghDecode[[]map[string]any](t, b)) != 2 {
		t.Fatalf("adding a label: %d %s", resp.StatusCode, b)
	}
	ghCall(t, g, "POST", "/repos/acme/app/issues/1/labels", `["coding agent processing"]`)
	resp, _ = ghCall(t, g, "DELETE", "/repos/acme/app/issues/1/labels/coding%20agent", "")
	if resp.StatusCode != 200 {
		t.Fatalf("removing a label: %d", resp.StatusCode)
	}
	resp, b = ghCall(t, g, "DELETE", "/repos/acme/app/issues/1/labels/coding%20agent", "")
	if resp.StatusCode != 404 || ghDecode[map[string]any](t, b)["message"] != "Label does not exist" {
		t.Errorf("removing an absent label: %d %s, want 404 Label does not exist", resp.StatusCode, b)
	}
	if got := g.Labels("acme/app", n); len(got) != 1 || got[0] != "coding agent processing" {
		t.Errorf("labels %q, want [coding agent processing]", got)
	}
}

func TestGitHubCommentsSinceAndPost(t *testing.T) {
	g := NewGitHub(t)
	n := g.AddIssue("acme/app", IssueSeed{Title: "a"})
	g.AddComment("acme/app", n, "alice", "first")
	resp, b := ghCall(t, g, "POST", "/repos/acme/app/issues/1/comments", `{"body":"hello"}`)
	if resp.StatusCode != 201 || ghDecode[map[string]any](t, b)["body"] != "hello" {
		t.Fatalf("posting: %d %s", resp.StatusCode, b)
	}
	resp, _ = ghCall(t, g, "POST", "/repos/acme/app/issues/1/comments", `{}`)
	if resp.StatusCode != 422 {
		t.Errorf("posting without body: %d, want 422", resp.StatusCode)
	}
	cs := g.Comments("acme/app", n)
	if len(cs) != 2 || cs[1].Author != "coding-agent-bot" || cs[0].Author != "alice" {
		t.Fatalf("comments %+v", cs)
	}
	future := cs[1].CreatedAt.Add(time.Second).Format(time.RFC3339)
	_, b = ghCall(t, g, "GET", "/repos/acme/app/issues/1/comments?since="+future, "")
	if got := ghDecode[[]any](t, b); len(got) != 0 {
		t.Errorf("since after the last comment gave %d comments", len(got))
	}
	_, b = ghCall(t, g, "GET", "/repos/acme/app/issues/1/comments?per_page=1&page=2", "")
	if got := ghDecode[[]map[string]any](t, b); len(got) != 1 || got[0]["body"] != "hello" {
		t.Errorf("page 2 of 1 = %v", got)
	}
}

func TestGitHubFaults(t *testing.T) {
	g := NewGitHub(t)
	g.AddIssue("acme/app", IssueSeed{Title: "a"})
	g.Inject(Fault{Method: "POST", Path: "/comments", Status: 502, AfterServe: true})
	resp, _ := ghCall(t, g, "POST", "/repos/acme/app/issues/1/comments", `{"body":"x"}`)
	if resp.StatusCode != 502 || len(g.Comments("acme/app", 1)) != 1 {
		t.Fatalf("AfterServe 502: status %d, %d comments; want 502 and the comment stored", resp.StatusCode, len(g.Comments("acme/app", 1)))
	}
	g.Inject(SecondaryRateLimit("GET", "/issues", 42))
	resp, b := ghCall(t, g, "GET", "/repos/acme/app/issues", "")
	body := ghDecode[map[string]any](t, b)
	if resp.StatusCode != 403 || resp.Header.Get("Retry-After") != "42" ||
		!strings.HasSuffix(body["documentation_url"].(string), "secondary-rate-limits") ||
		!strings.Contains(body["message"].(string), "secondary rate limit") {
		t.Errorf("secondary rate limit: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if resp.Header.Get("X-RateLimit-Limit") == "" {
		t.Error("faults should carry the rate-limit headers too")
	}
	g.Inject(Fault{Path: "/user", Status: 429, Header: map[string]string{"Retry-After": "3", "X-RateLimit-Remaining": "0"}})
	resp, _ = ghCall(t, g, "GET", "/user", "")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || resp.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("429 fault: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := ghCall(t, g, "GET", "/user", ""); resp.StatusCode != 200 {
		t.Errorf("after the fault was used up: %d", resp.StatusCode)
	}
}

// A 200 whose body is cut short keeps the whole answer's status and ETag;
// an HTML page comes with 200 too. Each is answered once.
func TestGitHubBadBodyFaults(t *testing.T) {
	g := NewGitHub(t)
	g.AddIssue("acme/app", IssueSeed{Title: "a"})
	whole, wholeBody := ghCall(t, g, "GET", "/repos/acme/app/issues/1", "")
	g.Inject(Fault{Method: "GET", Path: "/issues/1", Truncate: true})
	cut, cutBody := ghCall(t, g, "GET", "/repos/acme/app/issues/1", "")
	if cut.StatusCode != 200 || cut.Header.Get("ETag") != whole.Header.Get("ETag") || cut.Header.Get("ETag") == "" ||
		len(cutBody) != len(wholeBody)/2 || !strings.HasPrefix(string(wholeBody), string(cutBody)) || json.Valid(cutBody) {
		t.Errorf("truncated answer: %d, ETag %q (whole %q), %d of %d bytes: %s", cut.StatusCode, cut.Header.Get("ETag"),
			whole.Header.Get("ETag"), len(cutBody), len(wholeBody), cutBody)
	}
	g.Inject(HTMLFault("GET", "/issues/1", 1))
	page, pageBody := ghCall(t, g, "GET", "/repos/acme/app/issues/1", "")
	if page.StatusCode != 200 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") || string(pageBody) != HTMLPage {
		t.Errorf("HTML page: %d %q %s", page.StatusCode, page.Header.Get("Content-Type"), pageBody)
	}
	if again, b := ghCall(t, g, "GET", "/repos/acme/app/issues/1", ""); again.StatusCode != 200 || !json.Valid(b) {
		t.Errorf("after the faults were used up: %d %s", again.StatusCode, b)
	}
}

func TestGitHubPrimaryRateLimitExhausted(t *testing.T) {
	g := NewGitHub(t)
	g.SetRateLimit("core", 2)
	ghCall(t, g, "GET", "/user", "")
	ghCall(t, g, "GET", "/user", "")
	resp, b := ghCall(t, g, "GET", "/user", "")
	if resp.StatusCode != 403 || resp.Header.Get("X-RateLimit-Remaining") != "0" ||
		!strings.Contains(string(b), "API rate limit exceeded") {
		t.Fatalf("third request on a budget of 2: %d %v %s", resp.StatusCode, resp.Header, b)
	}
}

func TestGitHubEnterprisePrefix(t *testing.T) {
	g := NewGitHub(t)
	for i := range 3 {
		g.AddIssue("acme/app", IssueSeed{Title: "t" + strconv.Itoa(i)})
	}
	resp, b := ghCall(t, g, "GET", "/api/v3/repos/acme/app/issues?per_page=1", "")
	items := ghDecode[[]ghIssueOut](t, b)
	if resp.StatusCode != 200 || len(items) != 1 || !strings.HasPrefix(items[0].URL, g.URL()+"/api/v3/repos/acme/app/issues/") {
		t.Fatalf("under /api/v3: %d %+v", resp.StatusCode, items)
	}
	if next := ghLinks(resp.Header)["next"]; !strings.HasPrefix(next, g.URL()+"/api/v3/repos/acme/app/issues?") {
		t.Errorf("next link %q should stay under /api/v3", next)
	}
}

func TestGitHubSearch(t *testing.T) {
	g := NewGitHub(t)
	old := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	i1 := g.AddIssue("acme/app", IssueSeed{Title: "one", Labels: []string{"coding agent"}})
	g.SetCreatedAt("acme/app", i1, old)
	p2 := g.AddPull("acme/lib", PullSeed{IssueSeed: IssueSeed{Title: "two", Labels: []string{"coding agent"}}})
	g.AddIssue("acme/app", IssueSeed{Title: "closed", Labels: []string{"coding agent"}, State: "closed"})
	g.AddIssue("other/app", IssueSeed{Title: "elsewhere", Labels: []string{"coding agent"}})
	g.AddIssue("acme/app", IssueSeed{Title: "unlabelled"})
	search := func(q string) (int, []ghIssueOut, *http.Response) {
		resp, b := ghCall(t, g, "GET", "/search/issues?sort=created&order=asc&q="+q, "")
		v := ghDecode[struct {
			Total int          `json:"total_count"`
			Items []ghIssueOut `json:"items"`
		}](t, b)
		return v.Total, v.Items, resp
	}
	total, items, resp := search(`is:open+label:"coding+agent"+user:acme`)
	if total != 2 || items[0].Number != i1 || items[1].Number != p2 || resp.Header.Get("X-RateLimit-Resource") != "search" {
		t.Fatalf("owner search: total %d items %+v resource %q", total, items, resp.Header.Get("X-RateLimit-Resource"))
	}
	if total, items, _ := search(`is:open+is:pr+label:"coding+agent"+user:acme`); total != 1 || items[0].PullRequest == nil {
		t.Errorf("is:pr search: %d %+v", total, items)
	}
	if total, _, _ := search(`is:open+label:"coding+agent"+repo:acme/lib+repo:other/app`); total != 2 {
		t.Errorf("two repo: qualifiers should be ORed, got %d", total)
	}
	if total, _, _ := search(`archived:true+user:acme`); total != 0 {
		t.Errorf("archived:true found %d items in an emulator without archived repositories", total)
	}
	if total, _, _ := search(`is:open+archived:false+user:acme+created:>=2024-06-01T00:00:00Z`); total != 2 {
		t.Errorf("created:>= gave %d, want 2", total)
	}
	if resp, _ := ghCall(t, g, "GET", "/search/issues?q=in:title+x", ""); resp.StatusCode != 422 {
		t.Errorf("unsupported qualifier: %d, want 422", resp.StatusCode)
	}
	if resp, _ := ghCall(t, g, "GET", "/search/issues?q=is:open&per_page=100&page=11", ""); resp.StatusCode != 422 {
		t.Errorf("page past the 1000-result window: %d, want 422", resp.StatusCode)
	}
}

func TestGitHubEditComment(t *testing.T) {
	g := NewGitHub(t)
	n := g.AddIssue("acme/app", IssueSeed{Title: "a"})
	p := g.AddPull("acme/app", PullSeed{IssueSeed: IssueSeed{Title: "p"}})
	mine := g.AddComment("acme/app", n, g.BotLogin, "- [ ] build")
	onPull := g.AddComment("acme/app", p, g.BotLogin, "- [ ] review")
	theirs := g.AddComment("acme/app", n, "alice", "please")
	elsewhere := g.AddComment("acme/lib", g.AddIssue("acme/lib", IssueSeed{Title: "b"}), g.BotLogin, "other repo")
	path := func(repo string, id int64) string {
		return "/repos/" + repo + "/issues/comments/" + strconv.FormatInt(id, 10)
	}
	for _, tc := range []struct {
		name, path, body string
		status           int
		message          string
	}{
		{"own comment on an issue", path("acme/app", mine), `{"body":"- [x] build"}`, 200, ""},
		{"own comment on a pull request", path("acme/app", onPull), `{"body":"- [x] review"}`, 200, ""},
		{"unknown id", path("acme/app", 99999), `{"body":"x"}`, 404, "Not Found"},
		{"id of another repository", path("acme/app", elsewhere), `{"body":"x"}`, 404, "Not Found"},
		{"not a number", "/repos/acme/app/issues/comments/abc", `{"body":"x"}`, 404, "Not Found"},
		{"unknown repository", path("acme/nope", mine), `{"body":"x"}`, 404, "Not Found"},
		{"someone else's comment", path("acme/app", theirs), `{"body":"x"}`, 403, "You do not have permission to edit this comment."},
		{"missing body", path("acme/app", mine), `{}`, 422, "Validation Failed"},
		{"empty body", path("acme/app", mine), `{"body":""}`, 422, "Validation Failed"},
		{"not JSON", path("acme/app", mine), `body=x`, 400, "Problems parsing JSON"},
	} {
		resp, b := ghCall(t, g, "PATCH", tc.path, tc.body)
		v := ghDecode[map[string]any](t, b)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, b, tc.status)
			continue
		}
		if tc.status != 200 {
			if v["message"] != tc.message {
				t.Errorf("%s: message %q, want %q", tc.name, v["message"], tc.message)
			}
			continue
		}
		want := ghDecode[map[string]string](t, []byte(tc.body))["body"]
		if v["body"] != want || v["updated_at"] == v["created_at"] ||
			!strings.HasSuffix(v["url"].(string), tc.path) || v["user"].(map[string]any)["login"] != g.BotLogin {
			t.Errorf("%s: answered %s", tc.name, b)
		}
	}
	for _, tc := range []struct {
		number int
		want   []string
	}{
		{n, []string{"- [x] build", "please"}},
		{p, []string{"- [x] review"}},
	} {
		var got []string
		for _, c := range g.Comments("acme/app", tc.number) {
			got = append(got, c.Body)
			if c.ID == mine && !c.UpdatedAt.After(c.CreatedAt) {
				t.Errorf("edited comment: updated %v, created %v", c.UpdatedAt, c.CreatedAt)
			}
			if c.ID == theirs && !c.UpdatedAt.Equal(c.CreatedAt) {
				t.Error("a refused edit moved updated_at")
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("#%d comments %q, want %q", tc.number, got, tc.want)
		}
	}
	if got := g.Comments("acme/lib", 1); got[0].Body != "other repo" {
		t.Errorf("comment in another repository edited: %+v", got)
	}
	// The edit shows among the comments updated since it.
	_, b := ghCall(t, g, "GET", "/repos/acme/app/issues/1/comments", "")
	if got := ghDecode[[]map[string]any](t, b); len(got) != 2 || got[0]["body"] != "- [x] build" {
		t.Errorf("listing after the edit: %s", b)
	}
}

func TestGitHubEditCommentMachinery(t *testing.T) {
	g := NewGitHub(t)
	n := g.AddIssue("acme/app", IssueSeed{Title: "a"})
	id := g.AddComment("acme/app", n, g.BotLogin, "v1")
	path := "/repos/acme/app/issues/comments/" + strconv.FormatInt(id, 10)
	body := func() string { return g.Comments("acme/app", n)[0].Body }

	g.Inject(Fault{Method: "PATCH", Path: "/issues/comments/", Status: 502})
	if resp, _ := ghCall(t, g, "PATCH", path, `{"body":"v2"}`); resp.StatusCode != 502 || body() != "v1" {
		t.Errorf("502 fault: %d, body %q; want 502 and nothing edited", resp.StatusCode, body())
	}
	g.Inject(Fault{Method: "PATCH", Path: "/issues/comments/", Status: 504, AfterServe: true})
	if resp, _ := ghCall(t, g, "PATCH", path, `{"body":"v3"}`); resp.StatusCode != 504 || body() != "v3" {
		t.Errorf("AfterServe 504: %d, body %q; want 504 and the edit made", resp.StatusCode, body())
	}
	before := g.RateRemaining("core")
	resp, _ := ghCall(t, g, "PATCH", "/api/v3"+path, `{"body":"v4"}`)
	if resp.StatusCode != 200 || body() != "v4" || g.RateRemaining("core") != before-1 {
		t.Errorf("edit under /api/v3: %d, body %q, rate %d -> %d", resp.StatusCode, body(), before, g.RateRemaining("core"))
	}
	if got := g.Count("PATCH", "/issues/comments/"); got != 3 {
		t.Errorf("Count(PATCH) = %d, want 3", got)
	}
	g.SetRateLimit("core", 0)
	if resp, b := ghCall(t, g, "PATCH", path, `{"body":"v5"}`); resp.StatusCode != 403 || body() != "v4" ||
		!strings.Contains(string(b), "API rate limit exceeded") {
		t.Errorf("edit past the rate limit: %d %s, body %q", resp.StatusCode, b, body())
	}
	req, _ := http.NewRequest("PATCH", g.URL()+path, strings.NewReader(`{"body":"v6"}`))
	resp, err := g.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || body() != "v4" {
		t.Errorf("edit without a token: %d, body %q", resp.StatusCode, body())
	}
}
