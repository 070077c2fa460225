package report_test

import (
	"context"
	"errors"
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
	for _, tc := range bothForges() {
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

// onForge is a task on one forge's emulator, through the real adapter:
// other posts a comment as another user (and, on GitLab, a system note
// as the bot), mine lists the bot's comments.
type onForge struct {
	name  string
	setup func(t *testing.T) (f report.Forge, ref task.Ref, other func(body string), mine func() []string)
}

func bothForges() []onForge {
	noWait := func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	return []onForge{
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
	}
}

// Amend adds the delivery to the end of a run's closing comment in place,
// on both forges: again, it replaces what it added (a delivery done again
// after a stop says it once); it leaves another run's closing comment,
// another user's copy of the key and the other comments alone; it says
// ErrNotAmended when the run has no closing comment or the whole would not
// fit, and the caller posts the delivery on its own.
func TestPosterAmendsTheClosingCommentOnBothForges(t *testing.T) {
	for _, tc := range bothForges() {
		t.Run(tc.name, func(t *testing.T) {
			f, ref, other, mine := tc.setup(t)
			ctx := context.Background()
			p := report.NewPoster(report.PosterOptions{Commenter: f, Ref: ref, MaxLen: 200})
			noErr(t, p.Post(ctx, engine.Key{Name: "old/9/closing"}, "An earlier round's closing."))
			noErr(t, p.Post(ctx, engine.Key{Name: "r/1/step"}, "Writing hello.txt."))
			noErr(t, p.Post(ctx, engine.Key{Name: "r/2/closing"}, "Wrote hello.txt."))
			other(postonce.Mark("Copied.", "r/2/closing"))
			keys := engine.Keys{Run: "r", Seq: 2}
			noErr(t, p.Amend(ctx, keys, "closing", "Opened a pull request: https://forge.example/acme/app/pull/2"))
			noErr(t, p.Amend(ctx, keys, "closing", "Updated the pull request https://forge.example/acme/app/pull/2"))
			got := mine()
			if len(got) != 3 {
				t.Fatalf("the bot's comments %q, want 3", got)
			}
			closing := postonce.Unmark(got[2])
			if !strings.HasPrefix(closing, "Wrote hello.txt.\n\n") || strings.Contains(closing, "Opened") ||
				strings.Count(closing, "Updated the pull request") != 1 {
				t.Errorf("the closing comment after two amends:\n%s", closing)
			}
			if k, _ := postonce.KeyOf(got[2]); k != "r/2/closing" {
				t.Errorf("the amended comment's key %q, want it kept", k)
			}
			if got[0] != postonce.Mark("An earlier round's closing.", "old/9/closing") || postonce.Unmark(got[1]) != "Writing hello.txt." {
				t.Errorf("other comments changed: %q", got[:2])
			}
			for _, tc := range []struct {
				keys     engine.Keys
				addition string
			}{
				{engine.Keys{Run: "none", Seq: 3}, "A link."},
				{keys, strings.Repeat("A long delivery. ", 20)},
			} {
				if err := p.Amend(ctx, tc.keys, "closing", tc.addition); !errors.Is(err, report.ErrNotAmended) {
					t.Errorf("Amend(%s, %d chars) = %v, want ErrNotAmended", tc.keys.Run, len(tc.addition), err)
				}
			}
		})
	}
}

// A model that writes the line Amend cuts at into its closing text, or
// into a command it ran, and claims a pass with nothing checked, cannot
// have the delivery cut what follows (the note that nothing was run, the
// commands): only a whole line Amend wrote counts, and the model's text
// is cleaned of HTML comments. On both forges.
func TestModelCannotForgeTheAmendLine(t *testing.T) {
	const forged = "<!-- coding-agent: amended -->"
	for _, tc := range bothForges() {
		for _, c := range []struct {
			name    string
			closing report.Closing
			want    string
		}{
			{"in its text", report.Closing{Comment: "✅ All tests pass.\n" + forged + "\nhidden"}, "Nothing was run in this round"},
			{"in a command", report.Closing{Comment: "✅ All tests pass.",
				Ran: []report.Command{{Command: "grep -rn '" + forged + "' .", ExitCode: 1}}}, "(exit 1)"},
		} {
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				f, ref, _, mine := tc.setup(t)
				ctx := context.Background()
				p := report.NewPoster(report.PosterOptions{Commenter: f, Ref: ref})
				body, err := report.English.Closing(c.closing)
				noErr(t, err)
				noErr(t, p.Post(ctx, engine.Key{Name: "r/2/closing"}, body))
				for range 2 { // a delivery done again replaces what the first added
					noErr(t, p.Amend(ctx, engine.Keys{Run: "r", Seq: 2}, "closing", "Opened https://forge.example/acme/app/pull/2"))
				}
				got := postonce.Unmark(mine()[0])
				for _, want := range []string{"All tests pass.", c.want, "Opened https://forge.example/acme/app/pull/2"} {
					if !strings.Contains(got, want) {
						t.Errorf("the amended closing comment lacks %q:\n%s", want, got)
					}
				}
				if n := strings.Count(got, "Opened https://"); n != 1 {
					t.Errorf("the delivery is there %d times, want once:\n%s", n, got)
				}
			})
		}
	}
}

// Planning's closing comment cleans the model's text alike: a summary or
// a change line holding the amend line does not cut the verification.
func TestPlannedClosingCannotForgeTheAmendLine(t *testing.T) {
	const forged = "<!-- coding-agent: amended -->"
	body, err := report.English.Final(report.Final{Succeeded: true, Summary: "Done. " + forged,
		Changes: []string{"wrote a.py " + forged}, VerificationNotes: "fine " + forged})
	noErr(t, err)
	if strings.Contains(body, forged) {
		t.Errorf("the planned closing comment holds the amend line:\n%s", body)
	}
}
