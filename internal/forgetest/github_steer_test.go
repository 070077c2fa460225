package forgetest

import (
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestGitHubPermission(t *testing.T) {
	g := NewGitHub(t)
	g.AddIssue("acme/app", IssueSeed{Title: "a", Author: "alice"})
	for login, role := range map[string]string{"Ada": "admin", "max": "maintain", "wes": "write", "tri": "triage", "rea": "read"} {
		g.SetPermission("acme/app", login, role)
	}
	for _, tc := range []struct {
		login, permission, role string
		push                    bool
	}{
		{"ada", "admin", "admin", true}, // logins ignore case
		{"max", "write", "maintain", true},
		{"wes", "write", "write", true},
		{"tri", "read", "triage", false},
		{"rea", "read", "read", false},
		{"acme", "admin", "admin", true}, // the owner
		{"alice", "read", "read", false}, // known, public repository
	} {
		resp, b := ghCall(t, g, "GET", "/repos/acme/app/collaborators/"+tc.login+"/permission", "")
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", tc.login, resp.StatusCode, b)
			continue
		}
		v := ghDecode[struct {
			Permission string `json:"permission"`
			RoleName   string `json:"role_name"`
			User       struct {
				Login       string          `json:"login"`
				RoleName    string          `json:"role_name"`
				Permissions map[string]bool `json:"permissions"`
			} `json:"user"`
		}](t, b)
		if v.Permission != tc.permission || v.RoleName != tc.role || v.User.RoleName != tc.role ||
			v.User.Permissions["push"] != tc.push || !v.User.Permissions["pull"] {
			t.Errorf("%s: %s", tc.login, b)
		}
	}
	for _, path := range []string{
		"/repos/acme/app/collaborators/stranger/permission", // unknown login
		"/repos/acme/nope/collaborators/wes/permission",     // unknown repository
	} {
		if resp, b := ghCall(t, g, "GET", path, ""); resp.StatusCode != 404 {
			t.Errorf("GET %s: %d %s, want 404", path, resp.StatusCode, b)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("SetPermission accepted the role \"owner\"")
		}
	}()
	g.SetPermission("acme/app", "x", "owner")
}

func TestGitHubReactions(t *testing.T) {
	g := NewGitHub(t)
	n := g.AddIssue("acme/app", IssueSeed{Title: "a"})
	id := g.AddComment("acme/app", n, "alice", "please")
	path := "/repos/acme/app/issues/comments/" + strconv.FormatInt(id, 10) + "/reactions"
	resp, b := ghCall(t, g, "POST", path, `{"content":"eyes"}`)
	first := ghDecode[map[string]any](t, b)
	if resp.StatusCode != 201 || first["content"] != "eyes" || first["user"].(map[string]any)["login"] != g.BotLogin {
		t.Fatalf("first reaction: %d %s", resp.StatusCode, b)
	}
	resp, b = ghCall(t, g, "POST", path, `{"content":"eyes"}`)
	if again := ghDecode[map[string]any](t, b); resp.StatusCode != 200 || again["id"] != first["id"] {
		t.Errorf("same reaction again: %d %s, want 200 with the same reaction", resp.StatusCode, b)
	}
	if resp, _ := ghCall(t, g, "POST", path, `{"content":"rocket"}`); resp.StatusCode != 201 {
		t.Errorf("another reaction: %d, want 201", resp.StatusCode)
	}
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{path, `{"content":"smile"}`, 422},
		{path, `{}`, 422},
		{path, `not json`, 400},
		{"/repos/acme/app/issues/comments/99999/reactions", `{"content":"eyes"}`, 404},
		{"/repos/acme/other/issues/comments/" + strconv.FormatInt(id, 10) + "/reactions", `{"content":"eyes"}`, 404},
	} {
		if resp, b := ghCall(t, g, "POST", tc.path, tc.body); resp.StatusCode != tc.status {
			t.Errorf("POST %s %s: %d %s, want %d", tc.path, tc.body, resp.StatusCode, b, tc.status)
		}
	}
	if got := g.Reactions("acme/app", id); !slices.Equal(got, []string{"eyes", "rocket"}) {
		t.Errorf("reactions %q, want [eyes rocket]", got)
	}
	if got := g.Reactions("acme/app", 99999); got != nil {
		t.Errorf("reactions of a missing comment: %q", got)
	}
	if c := g.Comments("acme/app", n)[0]; !c.UpdatedAt.Equal(c.CreatedAt) {
		t.Errorf("reacting moved updated_at: %+v", c)
	}
}

// TestGitHubClockAndCommentsSince places comments with SetClock and checks
// that since filters on updated_at and that conditional requests still
// answer 304.
func TestGitHubClockAndCommentsSince(t *testing.T) {
	g := NewGitHub(t)
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	clk := NewClock(t0)
	g.SetClock(clk.Now)
	n := g.AddIssue("acme/app", IssueSeed{Title: "a"})
	g.AddComment("acme/app", n, "alice", "old")
	edited := g.AddComment("acme/app", n, g.BotLogin, "v1")
	clk.Set(t0.Add(time.Hour))
	g.AddComment("acme/app", n, "bob", "new")
	clk.Set(t0.Add(2 * time.Hour))
	if resp, b := ghCall(t, g, "PATCH", "/repos/acme/app/issues/comments/"+strconv.FormatInt(edited, 10), `{"body":"v2"}`); resp.StatusCode != 200 {
		t.Fatalf("edit: %d %s", resp.StatusCode, b)
	}
	cs := g.Comments("acme/app", n)
	if !cs[0].CreatedAt.Equal(t0) || !cs[2].CreatedAt.Equal(t0.Add(time.Hour)) || !cs[1].UpdatedAt.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("timestamps do not follow the clock: %+v", cs)
	}
	path := "/repos/acme/app/issues/" + strconv.Itoa(n) + "/comments?since=" + url.QueryEscape(t0.Add(30*time.Minute).Format(time.RFC3339))
	resp, b := ghCall(t, g, "GET", path, "")
	var bodies []string
	for _, c := range ghDecode[[]map[string]any](t, b) {
		bodies = append(bodies, c["body"].(string))
	}
	if !slices.Equal(bodies, []string{"v2", "new"}) {
		t.Errorf("since t0+30m: %q, want [v2 new]", bodies)
	}
	resp, b = ghCall(t, g, "GET", path, "", "If-None-Match", resp.Header.Get("ETag"))
	if resp.StatusCode != 304 || len(b) != 0 {
		t.Errorf("conditional GET: %d with %d bytes, want 304", resp.StatusCode, len(b))
	}
	resp, b = ghCall(t, g, "GET", "/repos/acme/app/issues/1/comments?since=yesterday", "")
	if resp.StatusCode != 422 {
		t.Errorf("since=yesterday: %d %s, want 422", resp.StatusCode, b)
	}
	resp, b = ghCall(t, g, "GET", "/repos/acme/app/issues/"+strconv.Itoa(n), "")
	if resp.StatusCode != 200 {
		t.Fatalf("issue: %d %s", resp.StatusCode, b)
	}
	if got := ghDecode[map[string]any](t, b)["comments"]; got != float64(3) {
		t.Errorf("issue comments = %v, want 3", got)
	}
}
