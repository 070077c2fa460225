package app_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/postgres"
	"github.com/coding-agent/coding-agent/internal/store/postgres/pgtest"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Tasks left in processing by a process that died, with the default
// settings: put up again after the lease by any host, never before, and
// `release` and `resume` handle them.

// known reports whether the env's store has a row for the task.
func (e *env) known(t *testing.T) bool {
	t.Helper()
	var st store.Store
	var err error
	if e.cfg.Database.URL != "" {
		st, err = postgres.Open(t.Context(), e.cfg.Database.URL, postgres.Options{})
	} else {
		st, err = sqlite.Open(t.Context(), e.cfg.StateDir)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = st.Get(t.Context(), e.ref)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// killedBetweenTakeAndClaim runs `coding-agent run` and kills it (SIGKILL)
// once the forge has taken the bot label for it (the removal is done, its
// answer held back), before its store claims the task.
func killedBetweenTakeAndClaim(t *testing.T, e *env) {
	t.Helper()
	took := make(chan struct{})
	e.gh.Inject(forgetest.Fault{Method: "DELETE", Path: "/labels/coding%20agent", Arrived: took})
	runKilled(t, e, took)
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent processing"}) {
		t.Fatalf("labels after the kill %v", l)
	}
	if e.known(t) {
		t.Fatal("the store knows the task: the kill came after the claim")
	}
}

// later is a clock d ahead of the wall clock.
func later(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }

// Default settings: killed between the forge's take and the store's claim,
// the task is in processing and known to no store. The next run, within
// the lease, leaves it (its taker may still be about to claim it), and
// `resume` says from when it is put up; once the lease has passed since
// the take, a run puts it up and does it. Before, it stayed in processing
// forever. With the embedded store the lease is the forge lease (the
// default 300 s: hosts with stores of their own may watch the repository);
// with PostgreSQL, which every host shares, the store's (lease_seconds).
func TestTaskKilledBetweenTakeAndClaimIsPutUpAfterTheLease(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
			lease := time.Duration(config.DefaultForgeLeaseSeconds) * time.Second
			if db == "postgres" {
				e.cfg.Database.URL = pgtest.Schema(t)
				lease = e.cfg.Lease()
			}
			killedBetweenTakeAndClaim(t, e)

			if err := e.run(context.Background()); err != nil {
				t.Fatalf("run within the lease: %v", err)
			}
			if n := len(e.model.Requests()); n != 0 || !slices.Equal(e.labels(), []string{"bug", "coding agent processing"}) {
				t.Fatalf("run within the lease: %d model requests, labels %v; want the task left", n, e.labels())
			}
			err := e.signalErr(app.SignalResume)
			if err == nil || !strings.Contains(err.Error(), "not paused") || !strings.Contains(err.Error(), "puts it up again from") {
				t.Errorf("resume within the lease: %v; want it refused, saying from when the task is put up", err)
			}

			if err := e.runWith(context.Background(), app.Options{Clock: later(lease - 20*time.Second)}); err != nil {
				t.Fatalf("run before the lease ends: %v", err)
			}
			if n := len(e.model.Requests()); n != 0 {
				t.Fatalf("a run before the lease ended took the task (%d model requests)", n)
			}
			if err := e.runWith(context.Background(), app.Options{Clock: later(lease + time.Second)}); err != nil {
				t.Fatalf("run after the lease: %v", err)
			}
			e.wantLabels(t, "bug", "coding agent done")
			if c, h := e.botComments(), e.holderComments(); !helloDone(c) || len(h) != 0 {
				t.Errorf("bot comments %q, holder comments %q", c, h)
			}
			if rec := e.record(); rec.Status != task.Done {
				t.Errorf("record %+v", rec)
			}
		})
	}
}

// Killed between the take and the claim, the task is released at once by
// `release` (it said "the store has no such task" before) and done by the
// next run.
func TestReleasePutsBackATaskNoStoreKnows(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	killedBetweenTakeAndClaim(t, e)
	if out := e.release(t); !strings.Contains(out, "put up again") {
		t.Fatalf("release said %q", out)
	}
	e.wantLabels(t, "bug", "coding agent")
	if err := e.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.wantLabels(t, "bug", "coding agent done")
	if c := e.botComments(); !helloDone(c) {
		t.Errorf("bot comments %q", c)
	}
}

// Two hosts, each with a store of its own, default settings: host-a dies
// (SIGKILL) in the middle of a task. host-b leaves the task while host-a's
// holder comment is younger than the forge lease, takes it up once it is
// older, and does it; host-a, back, finds the task is not its own and runs
// nothing. Before, the task stayed in processing until someone ran
// `release` with host-a's configuration.
func TestDeadHostsTaskIsTakenUpByAHostWithItsOwnStore(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	arrived := make(chan struct{})
	e.model.Script(llmtest.Slow{Arrived: arrived})
	e.cfg.HostName = "host-a"
	aState := e.cfg.StateDir
	runKilled(t, e, arrived)
	if h := e.holderComments(); !slices.Equal(h, []string{"host-a"}) {
		t.Fatalf("holder comments after the kill %q, want host-a's", h)
	}

	e.cfg.HostName, e.cfg.StateDir = "host-b", filepath.Join(t.TempDir(), "data")
	lease := time.Duration(config.DefaultForgeLeaseSeconds) * time.Second
	for _, clock := range []func() time.Time{nil, later(lease - time.Minute)} {
		if err := e.runWith(context.Background(), app.Options{Clock: clock}); err != nil {
			t.Fatalf("host-b within the lease: %v", err)
		}
		if n := len(e.model.Requests()); n != 1 || e.known(t) {
			t.Fatalf("host-b took the task within host-a's lease (%d model requests in all)", n)
		}
	}
	if err := e.runWith(context.Background(), app.Options{Clock: later(lease + time.Second)}); err != nil {
		t.Fatalf("host-b after the lease: %v", err)
	}
	e.wantLabels(t, "bug", "coding agent done")
	if c := e.botComments(); !helloDone(c) {
		t.Errorf("bot comments %q, want host-b's run's, once each", c)
	}
	if h := e.holderComments(); len(h) != 0 {
		t.Errorf("holder comments %q left on the done task", h)
	}
	if n := len(e.model.Requests()); n != 3 {
		t.Errorf("%d model requests in all, want 3 (host-a's, then host-b's two)", n)
	}

	e.cfg.HostName, e.cfg.StateDir = "host-a", aState
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("host-a back: %v", err)
	}
	if n := len(e.model.Requests()); n != 3 {
		t.Errorf("host-a, back, ran the task again (%d model requests in all)", n)
	}
	if rec := e.record(); rec.Status != task.Stopped {
		t.Errorf("host-a's row %+v, want let go\n%s", rec, readTree(t, filepath.Dir(e.cfg.Logging.File)))
	}
	e.wantLabels(t, "bug", "coding agent done")
	if c, h := e.botComments(), e.holderComments(); len(c) != 2 || len(h) != 0 {
		t.Errorf("bot comments %q and holder comments %q after host-a came back, want none added", c, h)
	}
}

// signalErr is `coding-agent pause|resume|stop REF`, returning its error.
func (e *env) signalErr(action string) error {
	e.t.Helper()
	a, err := app.New(context.Background(), e.cfg, app.Options{Sleep: noWait})
	if err != nil {
		e.t.Fatal(err)
	}
	defer a.Close()
	var out strings.Builder
	return a.Signal(context.Background(), action, e.ref, &out)
}
