package forgetest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// RealGitea is a real Gitea (or Forgejo) the tests act on through its API,
// named by CODING_AGENT_GITEA_URL with an administrator's token in
// CODING_AGENT_GITEA_ADMIN_TOKEN: they make their own users, repositories,
// labels and issues there, named afresh each run (docs/design.md says how
// to build and start Gitea 1.26 here).
type RealGitea struct {
	t     testing.TB
	URL   string // the instance's root URL
	admin string
	// run is this run's suffix of every name it makes.
	run    string
	labels map[string]int64 // "repo\x00name" → id
}

// NewRealGitea returns the Gitea the environment names, and skips the test
// when it names none.
func NewRealGitea(t testing.TB) *RealGitea {
	t.Helper()
	u, tok := os.Getenv("CODING_AGENT_GITEA_URL"), os.Getenv("CODING_AGENT_GITEA_ADMIN_TOKEN")
	if u == "" || tok == "" {
		t.Skip("CODING_AGENT_GITEA_URL and CODING_AGENT_GITEA_ADMIN_TOKEN name no Gitea to test against")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &RealGitea{t: t, URL: strings.TrimRight(u, "/"), admin: tok, run: hex.EncodeToString(b), labels: map[string]int64{}}
}

// Call sends method /api/v1{path} with body as JSON under token (or basic
// auth when token is "user:password") and decodes the answer into out; it
// fails the test unless Gitea answers want.
func (g *RealGitea) Call(method, path, token string, body, out any, want int) {
	g.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, g.URL+"/api/v1"+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if user, pass, ok := strings.Cut(token, ":"); ok {
		req.SetBasicAuth(user, pass)
	} else {
		req.Header.Set("Authorization", "token "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		g.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			g.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

const realPassword = "Forgetest-Passw0rd!"

// User makes the user prefix-{run} and returns its login and a token of
// it with every scope.
func (g *RealGitea) User(prefix string) (login, token string) {
	g.t.Helper()
	login = prefix + "-" + g.run
	g.Call("POST", "/admin/users", g.admin, map[string]any{"username": login, "email": login + "@example.com",
		"password": realPassword, "must_change_password": false}, nil, http.StatusCreated)
	var tk struct {
		SHA1 string `json:"sha1"`
	}
	g.Call("POST", "/users/"+login+"/tokens", login+":"+realPassword, map[string]any{"name": "t", "scopes": []string{"all"}}, &tk, http.StatusCreated)
	return login, tk.SHA1
}

// Repo makes the repository name of the token's user, with a main branch.
func (g *RealGitea) Repo(token, name string) {
	g.t.Helper()
	g.Call("POST", "/user/repos", token, map[string]any{"name": name, "auto_init": true, "default_branch": "main"}, nil, http.StatusCreated)
}

// Collaborator gives user perm (read, write, admin) on repo, as its owner
// (token).
func (g *RealGitea) Collaborator(token, repo, user, perm string) {
	g.t.Helper()
	g.Call("PUT", "/repos/"+repo+"/collaborators/"+user, token, map[string]any{"permission": perm}, nil, http.StatusNoContent)
}

// Label is the id of repo's label name, made (as token) when missing.
func (g *RealGitea) Label(token, repo, name string) int64 {
	g.t.Helper()
	if id, ok := g.labels[repo+"\x00"+name]; ok {
		return id
	}
	var ls []struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	g.Call("GET", "/repos/"+repo+"/labels?limit=50", token, nil, &ls, http.StatusOK)
	for _, l := range ls {
		if l.Name == name {
			g.labels[repo+"\x00"+name] = l.ID
			return l.ID
		}
	}
	var l struct {
		ID int64 `json:"id"`
	}
	g.Call("POST", "/repos/"+repo+"/labels", token, map[string]any{"name": name, "color": "#1d76db"}, &l, http.StatusCreated)
	g.labels[repo+"\x00"+name] = l.ID
	return l.ID
}

// Issue opens an issue as token's user, carrying labels, and returns its
// number.
func (g *RealGitea) Issue(token, repo, title, body string, labels ...string) int {
	g.t.Helper()
	ids := []int64{}
	for _, l := range labels {
		ids = append(ids, g.Label(token, repo, l))
	}
	var is struct {
		Number int `json:"number"`
	}
	g.Call("POST", "/repos/"+repo+"/issues", token, map[string]any{"title": title, "body": body, "labels": ids}, &is, http.StatusCreated)
	return is.Number
}

// Comment writes a comment as token's user and returns its id.
func (g *RealGitea) Comment(token, repo string, n int, body string) int64 {
	g.t.Helper()
	var c struct {
		ID int64 `json:"id"`
	}
	g.Call("POST", fmt.Sprintf("/repos/%s/issues/%d/comments", repo, n), token, map[string]any{"body": body}, &c, http.StatusCreated)
	return c.ID
}

// AddLabel puts repo's label on issue n as token's user.
func (g *RealGitea) AddLabel(token, repo string, n int, label string) {
	g.t.Helper()
	g.Call("POST", fmt.Sprintf("/repos/%s/issues/%d/labels", repo, n), token, map[string]any{"labels": []int64{g.Label(token, repo, label)}}, nil, http.StatusOK)
}
