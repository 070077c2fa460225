package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	ghforge "github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/task"
)

// appWorld is a world whose worker acts as a GitHub App installed on
// acme, the app's tokens on the world's clock.
func appWorld(t *testing.T) *world {
	t.Helper()
	wd := newWorld(t, false)
	key, err := ghforge.ParseAppKey(wd.gh.InstallApp(77, "helper-app", "acme"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := ghforge.New(ghforge.Options{APIURL: wd.gh.URL(), App: &ghforge.App{ID: 77, Key: key},
		Repositories: []string{"acme/app"}, Now: func() time.Time { return wd.now },
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	wd.w.o.Forge, wd.w.o.BotName = f, wd.gh.BotLogin
	return wd
}

// uninstalling is a runner that removes the app's installation while it
// runs, then ends done: the final labels are refused.
type uninstalling struct {
	*fakeRunner
	wd *world
}

func (r uninstalling) Run(ctx context.Context, in engine.Input) (engine.Outcome, error) {
	r.wd.gh.Uninstall("acme")
	return r.fakeRunner.Run(ctx, in)
}

// A forge that refuses the credentials, during the run or at its final
// labels, neither fails the task nor leaves it running: it goes back to
// queued with its checkpoint and labels, nothing posted, and Refused names
// it for `run` to fail with. Process returns no error: the worker goes on
// (serve backs off in the adapter). Once the credentials work again, the
// next pass resumes the task and finishes it.
func TestRefusedCredentialsLeaveTheTaskQueued(t *testing.T) {
	for _, tc := range []struct {
		name  string
		world func(*testing.T) *world
		set   func(*world) // makes the forge refuse
		mend  func(*world) // makes it take the credentials again
		runs  int          // runs before it is mended
		want  string       // in Refused
	}{
		{name: "the run ends on a refusal", world: func(t *testing.T) *world { return newWorld(t, false) },
			set: func(wd *world) {
				wd.run.err = fmt.Errorf("posting a step comment: %w: installation 1000 of app 77 was removed", forge.ErrAuth)
			},
			mend: func(wd *world) { wd.run.err = nil }, runs: 1, want: "was removed"},
		{name: "the final labels are refused", world: appWorld,
			set: func(wd *world) { wd.w.o.Agent = uninstalling{fakeRunner: wd.run, wd: wd} },
			mend: func(wd *world) {
				wd.gh.Install("acme")
				wd.w.o.Agent = wd.run
				wd.now = wd.now.Add(time.Minute) // the adapter's wait after the refusal
			}, runs: 1, want: "installation was removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd := tc.world(t)
			wd.claim()
			wd.run.out = engine.Outcome{End: engine.Done, Comment: "ok"}
			tc.set(wd)
			if err := wd.w.Process(t.Context(), wd.ref); err != nil {
				t.Fatalf("Process returned %v, want nil: the worker goes on", err)
			}
			wd.want(task.Queued, "bug", testLabels.Processing)
			if c := wd.comments(); len(c) != 0 {
				t.Errorf("comments %q, want none: the forge refuses them", c)
			}
			if !wd.checkpoint() {
				t.Error("the checkpoint was dropped")
			}
			err := wd.w.Refused()
			if !errors.Is(err, forge.ErrAuth) || !strings.Contains(err.Error(), wd.ref.String()) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Refused = %v, want the refusal naming %s and saying %q", err, wd.ref, tc.want)
			}
			if wd.run.runs != tc.runs {
				t.Errorf("%d runs, want %d", wd.run.runs, tc.runs)
			}

			tc.mend(wd)
			if n, err := wd.w.Backlog(t.Context()); err != nil || n != 1 {
				t.Fatalf("backlog: %d, %v", n, err)
			}
			if err := wd.w.Process(t.Context(), wd.ref); err != nil {
				t.Fatal(err)
			}
			wd.want(task.Done, "bug", testLabels.Done)
			if l := wd.labels(); slices.Contains(l, testLabels.Failed) {
				t.Errorf("labels %q", l)
			}
		})
	}
}
