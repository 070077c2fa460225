package workspace

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Delivery may be cut at any step (a crash, a forge that fails after the
// push): whichever step it stopped after, delivering again — as the resumed
// run or the next round does — leaves one commit of the work on the branch
// and one pull request, and a round with nothing new opens nothing more.
func TestDeliverAgainAfterEveryStepOpensOneChange(t *testing.T) {
	for _, failAt := range []string{"none", "push", "find", "open"} {
		t.Run(failAt, func(t *testing.T) {
			g, o := issueWorkspace(t, "Add a file")
			w := o.w
			write(t, w.Dir, "hello.txt", "hello\n")
			write(t, w.Dir, "__pycache__/hello.cpython-312.pyc", "\x00")
			switch failAt { // that step fails once
			case "push":
				g.Inject(forgetest.Fault{Method: "POST", Path: "/git-receive-pack", Status: 502, Times: 1})
			case "find":
				g.Inject(forgetest.Fault{Method: "GET", Path: "/pulls", Status: 500, Times: 1})
			case "open":
				g.Inject(forgetest.Fault{Method: "POST", Path: "/pulls", Status: 422, Times: 1})
			}
			if _, err := o.Deliver(t.Context(), engine.Outcome{End: engine.Done, Comment: "Wrote hello.txt."}); (err != nil) != (failAt != "none") {
				t.Fatalf("first delivery: %v", err)
			}
			for round := range 2 { // the resumed run, then a round with nothing new
				said, err := o.Deliver(t.Context(), engine.Outcome{End: engine.Done, Comment: "Wrote hello.txt."})
				if err != nil {
					t.Fatalf("delivery %d: %v", round+2, err)
				}
				if !strings.Contains(said, "/pull/") {
					t.Errorf("delivery %d does not link the pull request:\n%s", round+2, said)
				}
				if !strings.Contains(said, "`__pycache__/`: "+ReasonBuildOutput) {
					t.Errorf("delivery %d does not say __pycache__ was left out:\n%s", round+2, said)
				}
			}
			branch := "coding-agent/issue-1"
			if got, ok := g.FileAt("acme/app", branch, "hello.txt"); !ok || got != "hello\n" {
				t.Errorf("the branch holds hello.txt = %q, %v", got, ok)
			}
			if _, ok := g.FileAt("acme/app", branch, "__pycache__/hello.cpython-312.pyc"); ok {
				t.Error("the branch holds __pycache__")
			}
			if log := g.Log("acme/app", branch); len(log) != 2 { // the seed commit and ours
				t.Errorf("%d commits on %s, want 2: %+v", len(log), branch, log)
			}
			ps := g.Pulls("acme/app")
			if len(ps) != 1 || ps[0].Head != branch || !ps[0].Draft {
				t.Fatalf("pull requests %+v, want one draft from %s", ps, branch)
			}
			if n := strings.Count(ps[0].Body, "<!-- coding-agent:round "); n != 1 || !strings.Contains(ps[0].Body, "`hello.txt`") {
				t.Errorf("the pull request's body holds %d round sections, want one naming hello.txt:\n%s", n, ps[0].Body)
			}
		})
	}
}

// A description that could not be updated leaves its round's commits to
// the next delivery's section: round 2's edit of the pull request fails,
// and round 3's section names round 2's file as well as its own.
func TestFailedDescriptionIsCoveredByTheNextRound(t *testing.T) {
	g, o := issueWorkspace(t, "Add files")
	w := o.w
	for i, file := range []string{"one.txt", "two.txt", "three.txt"} {
		write(t, w.Dir, file, file+"\n")
		if i == 1 {
			g.Inject(forgetest.Fault{Method: "PATCH", Path: "/pulls/", Status: 422, Times: 1})
		}
		if _, err := o.Deliver(t.Context(), engine.Outcome{End: engine.Done, Comment: "Wrote " + file + "."}); err != nil {
			t.Fatalf("round %d: %v", i+1, err)
		}
	}
	ps := g.Pulls("acme/app")
	if len(ps) != 1 {
		t.Fatalf("pull requests %+v, want one", ps)
	}
	sections := strings.Split(ps[0].Body, "<!-- coding-agent:round ")
	if len(sections) != 3 { // before the first, and two rounds described
		t.Fatalf("%d round sections, want 2 (round 2's edit failed):\n%s", len(sections)-1, ps[0].Body)
	}
	if last := sections[2]; !strings.Contains(last, "`two.txt`") || !strings.Contains(last, "`three.txt`") {
		t.Errorf("the last section does not name two.txt and three.txt:\n%s", last)
	}
}

// issueWorkspace is the delivering workspace of an issue titled title on
// a GitHub emulator, through the real adapter, its branch
// coding-agent/issue-1.
func issueWorkspace(t *testing.T, title string) (*forgetest.GitHub, *TaskWorkspace) {
	t.Helper()
	g := forgetest.NewGitHub(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: title, Labels: []string{"coding agent"}})
	c, err := github.New(github.Options{APIURL: g.URL(), Token: g.Token, Repositories: []string{"acme/app"},
		HTTPClient: g.Client(), Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	ref := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n}
	tk, err := c.Get(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	auth := Static("Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+g.Token)))
	ts := NewTasks(TasksOptions{Manager: newManager(t, Options{}), Forge: c, Auth: auth, Keep: "failed",
		Delivery: Delivery{Enabled: true, Draft: true, BranchPrefix: "coding-agent/"}})
	repo, err := c.Repository(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	w := prepare(t, ts.o.Manager, Spec{Ref: ref, CloneURL: repo.CloneURL, Auth: auth, Base: repo.DefaultBranch,
		Branch: "coding-agent/issue-" + strings.TrimPrefix(ref.String(), "github:acme/app#")})
	return g, &TaskWorkspace{ts: ts, t: tk, w: w}
}
