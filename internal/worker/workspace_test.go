package worker

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/task"
)

// fakeWorkspaces records what the worker does with workspaces; the real
// one (workspace.Tasks) is walked end to end in internal/app.
type fakeWorkspaces struct {
	keep    string
	opened  int
	closed  []bool // Close's keep, in order
	removed int
	deliver error
	said    string
	checker engine.Checker
}

func (f *fakeWorkspaces) Open(context.Context, task.Task) (Workspace, error) {
	f.opened++
	return &fakeWorkspace{f: f}, nil
}
func (f *fakeWorkspaces) Remove(task.Ref) error { f.removed++; return nil }
func (f *fakeWorkspaces) Keep() string          { return f.keep }

type fakeWorkspace struct {
	f      *fakeWorkspaces
	closed bool
}

func (w *fakeWorkspace) Tools() engine.Caller { return nil }
func (w *fakeWorkspace) Deliver(_ context.Context, out engine.Outcome) (string, error) {
	if w.f.deliver != nil {
		return "", w.f.deliver
	}
	summary := cmp.Or(out.Comment, out.Summary)
	w.f.said = summary
	return "📦 delivered: " + summary, nil
}
func (w *fakeWorkspace) Where() string           { return "ws/issue-1" }
func (w *fakeWorkspace) Checker() engine.Checker { return w.f.checker }
func (w *fakeWorkspace) Setup() string           { return "" }
func (w *fakeWorkspace) Close(keep bool) error {
	if !w.closed { // the worker's deferred Close(true) comes after the row's
		w.closed = true
		w.f.closed = append(w.f.closed, keep)
	}
	return nil
}

// Every way a run ends does with its workspace what its row says, under
// each workspace.keep: kept while the task goes on, removed when done
// unless always, kept when failed or stopped unless never; the failure
// comment says where a kept one is.
func TestWorkspaceFollowsTheRow(t *testing.T) {
	ends := []struct {
		name string
		out  engine.Outcome
		err  error
		fate fate
	}{
		{"done", engine.Outcome{End: engine.Done, Comment: "did it"}, nil, wsDone},
		{"failed", engine.Outcome{End: engine.Failed, Reason: "gave up"}, nil, wsFailed},
		{"system error", engine.Outcome{}, errors.New("503"), wsFailed},
		{"paused", engine.Outcome{End: engine.Paused, Reason: "label"}, nil, wsKeep},
		{"stopped", engine.Outcome{End: engine.Stopped, Reason: "closed"}, nil, wsFailed},
		{"interrupted", engine.Outcome{End: engine.Interrupted, Reason: "shutdown"}, nil, wsKeep},
	}
	for _, keep := range []string{"never", "failed", "always"} {
		for _, end := range ends {
			t.Run(keep+"/"+end.name, func(t *testing.T) {
				wd := newWorld(t, false)
				ws := &fakeWorkspaces{keep: keep}
				wd.w.o.Workspaces = ws
				wd.claim()
				wd.run.out, wd.run.err = end.out, end.err
				if err := wd.w.Process(t.Context(), wd.ref); err != nil {
					t.Fatal(err)
				}
				want := end.fate.keeps(keep)
				if ws.opened != 1 || len(ws.closed) != 1 || ws.closed[0] != want {
					t.Fatalf("opened %d, closed %v; want one open and one close keeping %v", ws.opened, ws.closed, want)
				}
				kept := slicesContain(wd.comments(), "ws/issue-1")
				if wantSaid := end.fate == wsFailed && want && end.name != "stopped"; kept != wantSaid {
					t.Errorf("a comment says where the workspace is: %v, want %v (%q)", kept, wantSaid, wd.comments())
				}
			})
		}
	}
}

// A done round is delivered before it is called done, and what was
// delivered is the last comment; a delivery that fails fails the task,
// keeping the workspace as a failure does.
func TestDeliveryBeforeDone(t *testing.T) {
	wd := newWorld(t, false)
	ws := &fakeWorkspaces{keep: "failed"}
	wd.w.o.Workspaces = ws
	wd.claim()
	wd.run.out = engine.Outcome{End: engine.Done, Comment: "Added hello.txt."}
	if err := wd.w.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	wd.want(task.Done, "bug", testLabels.Done)
	cs := wd.comments()
	if ws.said != "Added hello.txt." || len(cs) != 1 || !strings.Contains(cs[0], "📦 delivered: Added hello.txt.") {
		t.Errorf("delivered %q, comments %q", ws.said, cs)
	}

	wd = newWorld(t, false)
	ws = &fakeWorkspaces{keep: "failed", deliver: errors.New("push rejected: non-fast-forward")}
	wd.w.o.Workspaces = ws
	wd.claim()
	wd.run.out = engine.Outcome{End: engine.Done, Comment: "Added hello.txt.", Reported: true}
	if err := wd.w.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	wd.want(task.Failed, "bug", testLabels.Failed)
	cs = wd.comments()
	if len(cs) != 1 || !strings.Contains(cs[0], "delivering the work failed: push rejected") || !strings.Contains(cs[0], "ws/issue-1") {
		t.Errorf("comments %q, want one failure saying why and where the workspace is", cs)
	}
	if len(ws.closed) != 1 || !ws.closed[0] {
		t.Errorf("closed %v, want the workspace kept", ws.closed)
	}
}

// A conversation that ends while awaiting a reply removes the workspace
// the rounds kept, unless keep is always.
func TestConversationEndRemovesTheWorkspace(t *testing.T) {
	for keep, removed := range map[string]int{"never": 1, "failed": 1, "always": 0} {
		t.Run(keep, func(t *testing.T) {
			wd := newWorld(t, true)
			ws := &fakeWorkspaces{keep: keep}
			wd.w.o.Workspaces = ws
			wd.claim()
			wd.run.out = engine.Outcome{End: engine.Done, Comment: "ok"}
			if err := wd.w.Process(t.Context(), wd.ref); err != nil {
				t.Fatal(err)
			}
			if len(ws.closed) != 1 || !ws.closed[0] {
				t.Fatalf("after the round: closed %v, want kept for the next round", ws.closed)
			}
			wd.gh.AddComment(wd.ref.Repo, wd.ref.Number, "alice", "thanks")
			if _, err := wd.w.Replies(t.Context()); err != nil {
				t.Fatal(err)
			}
			wd.want(task.Done, "bug", testLabels.Done)
			if ws.removed != removed {
				t.Errorf("removed %d times, want %d", ws.removed, removed)
			}
		})
	}
}

func slicesContain(ss []string, sub string) bool {
	for _, s := range ss {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

type fakeChecker struct{}

func (fakeChecker) Check(context.Context) ([]engine.CheckResult, error) { return nil, nil }

// The workspace's checks and the configured rounds reach the run; a round
// the checks failed follows the failed row and delivers nothing.
func TestChecksReachTheRunAndAFailedRoundDeliversNothing(t *testing.T) {
	for _, checker := range []engine.Checker{nil, fakeChecker{}} {
		wd := newWorld(t, false)
		ws := &fakeWorkspaces{keep: "failed", checker: checker}
		wd.w.o.Workspaces, wd.w.o.CheckRounds = ws, 3
		wd.claim()
		wd.run.out = engine.Outcome{End: engine.Failed, Reason: "the repository's checks still fail after 3 feedback round(s): `make test` (exit 2)",
			Checks: []engine.CheckResult{{Command: "make test", ExitCode: 2, Output: "boom"}}}
		if err := wd.w.Process(t.Context(), wd.ref); err != nil {
			t.Fatal(err)
		}
		in := wd.run.in
		if in.Checks != checker || (checker != nil) != (in.CheckRounds == 3) {
			t.Errorf("Input.Checks %v, CheckRounds %d; want %v and 3 with a checker", in.Checks, in.CheckRounds, checker)
		}
		if ws.said != "" {
			t.Errorf("a round failed on its checks was delivered: %q", ws.said)
		}
		wd.want(task.Failed, "bug", testLabels.Failed)
		if c := wd.comments(); len(c) != 1 || !strings.Contains(c[0], "❌ `make test` (exit 2)") || !strings.Contains(c[0], "boom") ||
			!strings.Contains(c[0], "ws/issue-1") {
			t.Errorf("failure comment %q: want the failing check, its output and the kept workspace", c)
		}
	}
}
