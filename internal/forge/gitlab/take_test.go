package gitlab_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forgetest"
)

// Of many clients (one token, as hosts share the bot's) taking one label at
// once, exactly one takes it; the others hear ErrLabelAbsent, the label is
// gone, and no lock award is left behind.
func TestTakeLabelHasOneWinner(t *testing.T) {
	for _, kind := range []string{forgetest.KindIssue, forgetest.KindMergeRequest} {
		t.Run(kind, func(t *testing.T) {
			g := forgetest.NewGitLab(t)
			g.AddProject("grp/app")
			seed := forgetest.IssueSeed{Title: "a", Labels: []string{label, "bug"}}
			r := issueRef("grp/app", g.AddIssue("grp/app", seed))
			if kind == forgetest.KindMergeRequest {
				r = mrRef("grp/app", g.AddMR("grp/app", forgetest.MRSeed{IssueSeed: seed}))
			}
			const n = 8
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for range n {
				c, _ := newClient(t, g, nil) // a host of its own
				wg.Go(func() { errs <- c.TakeLabel(t.Context(), r, label) })
			}
			wg.Wait()
			close(errs)
			won := 0
			for err := range errs {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, forge.ErrLabelAbsent):
					t.Errorf("a loser heard %v, want ErrLabelAbsent", err)
				}
			}
			if won != 1 {
				t.Errorf("%d clients took the label, want 1", won)
			}
			if got := g.Labels("grp/app", kind, r.Number); len(got) != 1 || got[0] != "bug" {
				t.Errorf("labels %q, want only bug", got)
			}
			if a := g.ItemAwards("grp/app", kind, r.Number); len(a) != 0 {
				t.Errorf("awards left: %q", a)
			}
		})
	}
}

// The lock award of a taker at work makes another taker lose at once; a
// lock left by a taker that died (older than five minutes) is removed and
// the label taken. Removing a label with RemoveLabel stays idempotent.
func TestTakeLabelLock(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("grp/app")
	n := g.AddIssue("grp/app", forgetest.IssueSeed{Title: "a", Labels: []string{label}})
	r := issueRef("grp/app", n)
	c, _ := newClient(t, g, nil)

	g.AwardItemBy("grp/app", forgetest.KindIssue, n, "lock", "someone") // not the bot's: no lock
	g.AwardItemBy("grp/app", forgetest.KindIssue, n, "lock", g.BotUsername)
	if err := c.TakeLabel(t.Context(), r, label); !errors.Is(err, forge.ErrLabelAbsent) {
		t.Fatalf("taking under another taker's lock: %v, want ErrLabelAbsent", err)
	}
	if got := g.Labels("grp/app", forgetest.KindIssue, n); len(got) != 1 {
		t.Fatalf("labels %q: the label must stay", got)
	}

	g2 := forgetest.NewGitLab(t)
	clock := time.Now().Add(-10 * time.Minute) // GitLab's clock never goes back: set before seeding
	g2.SetClock(func() time.Time { return clock })
	g2.AddProject("grp/app")
	n2 := g2.AddIssue("grp/app", forgetest.IssueSeed{Title: "a", Labels: []string{label}})
	g2.AwardItemBy("grp/app", forgetest.KindIssue, n2, "lock", g2.BotUsername)
	g2.SetClock(nil)
	c2, _ := newClient(t, g2, nil)
	if err := c2.TakeLabel(t.Context(), issueRef("grp/app", n2), label); err != nil {
		t.Fatalf("taking past a stale lock: %v", err)
	}
	if a := g2.ItemAwards("grp/app", forgetest.KindIssue, n2); len(a) != 0 {
		t.Errorf("awards left: %q", a)
	}
	if err := c2.TakeLabel(t.Context(), issueRef("grp/app", n2), label); !errors.Is(err, forge.ErrLabelAbsent) {
		t.Errorf("taking it again: %v, want ErrLabelAbsent", err)
	}
	if err := c2.RemoveLabel(t.Context(), issueRef("grp/app", n2), label); err != nil {
		t.Errorf("removing the absent label: %v, want nil", err)
	}
	if err := c2.TakeLabel(t.Context(), issueRef("grp/app", 99), label); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("taking from a missing issue: %v, want ErrNotFound", err)
	}
}

// Of clients deleting one note at once, one deletes it; the others hear
// ErrNotFound.
func TestDeleteCommentHasOneWinner(t *testing.T) {
	g := forgetest.NewGitLab(t)
	g.AddProject("grp/app")
	n := g.AddIssue("grp/app", forgetest.IssueSeed{Title: "a"})
	r := issueRef("grp/app", n)
	c, _ := newClient(t, g, nil)
	posted, err := c.PostComment(t.Context(), r, "holder")
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { errs <- c.DeleteComment(t.Context(), r, posted.ID) })
	}
	wg.Wait()
	close(errs)
	deleted := 0
	for err := range errs {
		switch {
		case err == nil:
			deleted++
		case !errors.Is(err, forge.ErrNotFound):
			t.Errorf("a second delete heard %v, want ErrNotFound", err)
		}
	}
	if deleted != 1 || len(g.Notes("grp/app", forgetest.KindIssue, n)) != 0 {
		t.Errorf("%d deletes succeeded, %d notes left; want 1 and 0", deleted, len(g.Notes("grp/app", forgetest.KindIssue, n)))
	}
}
