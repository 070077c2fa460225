package report_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/google/go-cmp/cmp"
)

// githubBoard returns a Board on an issue of the GitHub emulator, through
// the real adapter, redacting the emulator's token.
func githubBoard(t *testing.T) (*report.Board, *forgetest.GitHub, *github.Client, task.Ref) {
	t.Helper()
	g := forgetest.NewGitHub(t)
	g.AddRepo("acme/app")
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "Add --dry-run", Body: "please"})
	c, err := github.New(github.Options{
		APIURL: g.URL(), Token: g.Token, Repositories: []string{"acme/app"}, HTTPClient: g.Client(),
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n}
	redact := func(s string) string { return strings.ReplaceAll(s, g.Token, "[redacted]") }
	return report.NewBoard(report.BoardOptions{Forge: c, Ref: ref, Redact: redact}, report.BoardState{}), g, c, ref
}

// issueBodies returns the bodies of the comments on issue n, oldest first.
func issueBodies(g *forgetest.GitHub, n int) []string {
	var out []string
	for _, c := range g.Comments("acme/app", n) {
		out = append(out, postonce.Unmark(c.Body)) // the key's hidden line is the run's own
	}
	return out
}

func wantIssue(t *testing.T, g *forgetest.GitHub, n int, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, issueBodies(g, n)); diff != "" {
		t.Errorf("comments on the issue (-want +got):\n%s", diff)
	}
}

func TestBoardOnGitHubEditsInPlaceAndContinuesAfterRestart(t *testing.T) {
	b, g, c, ref := githubBoard(t)
	noErr(t, b.SetProgress(ctx, "progress 0/2"))
	noErr(t, b.AddSection(ctx, "planning", "plan made with "+g.Token))
	noErr(t, b.SetProgress(ctx, "progress 1/2"))
	noErr(t, b.AddSection(ctx, "planning", "plan checked"))
	wantIssue(t, g, ref.Number, "progress 1/2", "plan made with [redacted]"+sep+"plan checked")
	cs := g.Comments("acme/app", ref.Number)
	if st := b.State(); st.ProgressID != cs[0].ID || st.PhaseID != cs[1].ID || cs[0].Author != g.BotLogin {
		t.Errorf("state %+v does not name the comments %d and %d posted by the bot", st, cs[0].ID, cs[1].ID)
	}

	// Restart: the state goes through the checkpoint as JSON.
	raw, err := json.Marshal(b.State())
	noErr(t, err)
	var st report.BoardState
	noErr(t, json.Unmarshal(raw, &st))
	b2 := report.NewBoard(report.BoardOptions{Forge: c, Ref: ref}, st)
	noErr(t, b2.SetProgress(ctx, "progress 2/2"))
	noErr(t, b2.AddSection(ctx, "planning", "plan revised"))
	noErr(t, b2.AddSection(ctx, "execution", "a1 done"))
	wantIssue(t, g, ref.Number, "progress 2/2", "plan made with [redacted]"+sep+"plan checked"+sep+"plan revised", "a1 done")
	if n := g.Count("POST", "/comments"); n != 3 {
		t.Errorf("%d comment POSTs, want 3 (progress, planning, execution)", n)
	}
	if n := g.Count("PATCH", "/issues/comments/"); n != 4 {
		t.Errorf("%d comment PATCHes, want 4", n)
	}
}

func TestBoardOnGitHubDeletedCommentIsPostedAgain(t *testing.T) {
	b, g, _, ref := githubBoard(t)
	noErr(t, b.SetProgress(ctx, "p1"))
	noErr(t, b.AddSection(ctx, "planning", "s1"))
	old := b.State()
	// GitHub answers 404 for a comment someone deleted.
	g.Inject(forgetest.Fault{Method: "PATCH", Path: "/issues/comments/", Status: 404, Times: 2})
	noErr(t, b.SetProgress(ctx, "p2"))
	noErr(t, b.AddSection(ctx, "planning", "s2"))
	st := b.State()
	if st.ProgressID == old.ProgressID || st.PhaseID == old.PhaseID {
		t.Errorf("state %+v still names the deleted comments of %+v", st, old)
	}
	wantIssue(t, g, ref.Number, "p1", "s1", "p2", "s1"+sep+"s2")
	noErr(t, b.SetProgress(ctx, "p3"))
	wantIssue(t, g, ref.Number, "p1", "s1", "p3", "s1"+sep+"s2")
}

func TestBoardOnGitHubFailedPostKeepsSections(t *testing.T) {
	b, g, _, ref := githubBoard(t)
	// The adapter tries a comment four times (looking for it after each
	// 503) and gives up: the Board returns the error and does not retry.
	g.Inject(forgetest.Fault{Method: "POST", Path: "/comments", Status: 503, Times: 4})
	err := b.AddSection(ctx, "execution", "a1 started")
	if err == nil {
		t.Fatal("AddSection hid the failed post")
	}
	if n := g.Count("POST", "/comments"); n != 4 {
		t.Errorf("%d POSTs, want the adapter's 4 and none from the Board", n)
	}
	if st := b.State(); st.PhaseID != 0 || st.PhaseKey != "execution" {
		t.Errorf("state after the failed post = %+v, want no phase comment id", st)
	}
	wantIssue(t, g, ref.Number)
	noErr(t, b.AddSection(ctx, "execution", "a1 done"))
	wantIssue(t, g, ref.Number, "a1 started"+sep+"a1 done")

	// A failed edit (not a 404) keeps the section for the next edit.
	g.Inject(forgetest.Fault{Method: "PATCH", Path: "/issues/comments/", Status: 422})
	if err := b.AddSection(ctx, "execution", "a2 done"); err == nil || errors.Is(err, forge.ErrNotFound) {
		t.Fatalf("AddSection error = %v, want the edit's failure", err)
	}
	noErr(t, b.AddSection(ctx, "execution", "a3 done"))
	wantIssue(t, g, ref.Number, "a1 started"+sep+"a1 done"+sep+"a2 done"+sep+"a3 done")
}

func TestBoardOnGitHubLongProgressIsCut(t *testing.T) {
	b, g, _, ref := githubBoard(t)
	long := strings.Repeat("- [x] **a1** 日本語の説明 🙂\n", 4000) // over GitHub's 65536
	noErr(t, b.SetProgress(ctx, long))
	noErr(t, b.Post(ctx, long))
	cs := issueBodies(g, ref.Number)
	if len(cs) < 3 {
		t.Fatalf("got %d comments, want one cut progress comment and a final split in several", len(cs))
	}
	if !strings.Contains(cs[0], "✂️") || !strings.HasPrefix(cs[1], "(1/") {
		t.Errorf("progress not cut or final not split: %q… / %q…", head(cs[0]), head(cs[1]))
	}
	for i, c := range g.Comments("acme/app", ref.Number) { // with their keys' hidden lines
		if n := len([]rune(c.Body)); n > report.GitHubMaxComment {
			t.Errorf("comment %d has %d runes, over GitHub's limit", i+1, n)
		}
	}
}
