package github_test

import (
	"context"
	"testing"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// GitHub's error answers read as a sentence in the errors the client
// returns: the request, the status and GitHub's message, and the details
// GitHub gave when it gave some, one each; never go-github's list of
// details as Go prints it ("[]" when there is none, "[{Resource:...}]").
func TestErrorAnswersReadWhole(t *testing.T) {
	g := forgetest.NewGitHub(t)
	g.AddRepo("acme/app")
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	other := g.AddComment("acme/app", n, "alice", "mine")
	c, _ := newClient(t, g)
	ctx := context.Background()
	missing := ref(task.Issue, "acme/app", 99)
	for _, tc := range []struct {
		name string
		call func() error
		want []string
	}{
		{"404 without details", func() error { _, err := c.Get(ctx, missing); return err },
			[]string{"GET " + g.URL() + "/repos/acme/app/issues/99: 404 Not Found"}},
		{"422 with details", func() error {
			_, err := c.OpenChange(ctx, ref(task.Issue, "acme/app", n), forge.NewChange{Head: "no-such-branch", Base: "main", Title: "x", Body: "y"})
			return err
		}, []string{": 422 Validation Failed: "}},
		{"403 or 404 on another's comment", func() error { return c.EditComment(ctx, ref(task.Issue, "acme/app", n), other, "changed") }, nil},
		{"401 without details", func() error { g.RevokeToken(); _, err := c.Get(ctx, ref(task.Issue, "acme/app", n)); return err },
			[]string{": 401 Bad credentials"}},
		{"401 in discovery", func() error { _, err := c.Discover(ctx, "coding agent"); return err },
			[]string{": 401 Bad credentials"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forgetest.WantReadableError(t, tc.call(), tc.want, []string{"[]", "[{", "Resource:", "error caused by"})
		})
	}
}
