package report_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forge/gitlab"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/task"
)

// On both forges, through the real adapters: a comment posted before a
// stop is found by its key among the task's comments (another user's copy
// of it, and GitLab's system notes, aside) and not posted again; a key in
// doubt that is not there is posted.
func TestPosterFindsItsCommentOnBothForges(t *testing.T) {
	noWait := func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (report.Forge, task.Ref, func(body string), func() []string)
	}{
		{"github", func(t *testing.T) (report.Forge, task.Ref, func(string), func() []string) {
			g := forgetest.NewGitHub(t)
			n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
			c, err := github.New(github.Options{APIURL: g.URL(), Token: g.Token, Repositories: []string{"acme/app"},
				HTTPClient: g.Client(), Sleep: noWait})
			if err != nil {
				t.Fatal(err)
			}
			mine := func() []string {
				var out []string
				for _, cm := range g.Comments("acme/app", n) {
					if cm.Author == g.BotLogin {
						out = append(out, cm.Body)
					}
				}
				return out
			}
			return c, task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n},
				func(body string) { g.AddComment("acme/app", n, "mallory", body) }, mine
		}},
		{"gitlab", func(t *testing.T) (report.Forge, task.Ref, func(string), func() []string) {
			g := forgetest.NewGitLab(t)
			g.AddProject("acme/app")
			n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
			c, err := gitlab.New(gitlab.Options{APIURL: g.URL(), Token: g.Token, HTTPClient: g.Client(), Sleep: noWait})
			if err != nil {
				t.Fatal(err)
			}
			mine := func() []string {
				var out []string
				for _, note := range g.Notes("acme/app", forgetest.KindIssue, n) {
					if note.Author == g.BotUsername && !note.System {
						out = append(out, note.Body)
					}
				}
				return out
			}
			return c, task.Ref{Forge: task.GitLab, Repo: "acme/app", Kind: task.Issue, Number: n},
				func(body string) {
					g.AddNote("acme/app", forgetest.KindIssue, n, "mallory", body, false)
					g.AddNote("acme/app", forgetest.KindIssue, n, g.BotUsername, body, true) // a system note
				}, mine
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ref, other, mine := tc.setup(t)
			ctx := context.Background()
			since := time.Now()
			p := report.NewPoster(report.PosterOptions{Commenter: f, Ref: ref})
			// Someone copies the key of the comment to come, before it is posted.
			other(postonce.Mark("Done.", "r/2/closing"))
			noErr(t, p.Post(ctx, engine.Key{Name: "r/1/step"}, "Writing hello.txt."))
			noErr(t, p.Post(ctx, engine.Key{Name: "r/1/step", Doubt: true, Since: since}, "Writing hello.txt."))
			noErr(t, p.Post(ctx, engine.Key{Name: "r/2/closing", Doubt: true, Since: since}, "Done."))
			got := mine()
			if len(got) != 2 || !strings.Contains(got[0], "r/1/step") || !strings.Contains(got[1], "r/2/closing") {
				t.Errorf("the bot's comments %q, want the step comment once and the closing comment", got)
			}
		})
	}
}
