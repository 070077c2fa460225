package gitlab_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/gitlab"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// GitLab's error answers read as a sentence in the errors the client
// returns: the request, the status and GitLab's message ("403 Forbidden",
// "400 body is empty", a field's complaints), never the client library's
// rendering of the JSON ("{message: 403 Forbidden}", "{error: …}").
func TestErrorAnswersReadWhole(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("acme/app")
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	other := g.AddNote("acme/app", "issue", n, "alice", "mine", false)
	c, _ := newClient(t, g, func(o *gitlab.Options) { o.Projects = []string{"acme/app"} })
	ctx := context.Background()
	issue := task.Ref{Forge: task.GitLab, Repo: "acme/app", Kind: task.Issue, Number: n}
	for _, tc := range []struct {
		name string
		call func() error
		want []string
	}{
		{"403 with a message", func() error { return c.EditComment(ctx, issue, other, "changed") },
			[]string{"/notes/", ": 403 Forbidden"}},
		{"400 with an error", func() error {
			_, err := c.OpenChange(ctx, issue, forge.NewChange{Head: "", Base: "main", Title: "x", Body: "y"})
			return err
		}, []string{": 400 "}},
		{"400 with each field's complaints", func() error {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"message":{"title":["is too long (maximum is 255 characters)"],"base":["Another open merge request already exists"]}}`))
			}))
			defer srv.Close()
			v, _ := newClient(t, g, func(o *gitlab.Options) { o.APIURL, o.HTTPClient = srv.URL+"/api/v4", srv.Client() })
			_, err := v.OpenChange(ctx, issue, forge.NewChange{Head: "h", Base: "main", Title: "x", Body: "y"})
			return err
		}, []string{": 400 base: Another open merge request already exists; title: is too long (maximum is 255 characters)"}},
		{"401", func() error { g.RevokeToken(); _, err := c.Get(ctx, issue); return err },
			[]string{": 401 Unauthorized"}},
		{"401 in discovery", func() error { _, err := c.Discover(ctx, "coding agent"); return err },
			[]string{": 401 Unauthorized"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forgetest.WantReadableError(t, tc.call(), tc.want, []string{"[]", "{message:", "{error:", "403 403", "401 401", "400 400"})
		})
	}
}
