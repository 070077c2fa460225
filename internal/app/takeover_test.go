package app_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/store/postgres/pgtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// A host killed (SIGKILL) in the middle of a task, under a host name no
// process will have again (a container): another host sharing the store
// leaves the task alone while the dead host's lease runs, then takes it
// over, says so on the task, and resumes the conversation from the last
// checkpoint. Nothing is posted twice. On the embedded store (one state
// directory, two host names) and on PostgreSQL.
func TestKilledHostsTaskIsTakenOverByAnotherHost(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
			if db == "postgres" {
				e.cfg.Database.URL = pgtest.Schema(t)
			}
			e.cfg.LeaseSeconds = 3
			e.cfg.HostName = "host-a"
			arrived := make(chan struct{})
			e.model.Script(
				llmtest.Reply{Content: `{"comment":"Writing hello.txt.","command":{"tool":"fs/write_file","args":{"path":"` +
					e.workspace + `/hello.txt","content":"hello from coding-agent\n"}}}`},
				llmtest.Slow{Arrived: arrived},
			)
			_, stderr := runKilled(t, e, arrived)
			killed := time.Now()
			if rec := e.record(); rec.Status != task.Running || rec.Host != "host-a" || rec.Instance == "" {
				t.Fatalf("after the kill the store should hold the task as running under host-a: %+v\n%s", rec, stderr.String())
			}

			e.cfg.HostName = "host-b"
			if err := e.run(context.Background()); err != nil {
				t.Fatalf("host-b's run within the lease: %v", err)
			}
			if n := len(e.model.Requests()); n != 2 {
				t.Fatalf("host-b made %d model requests within host-a's lease, want none (2 in all)", n-2)
			}
			if rec := e.record(); rec.Host != "host-a" || rec.Status != task.Running {
				t.Fatalf("host-b took the task within host-a's lease: %+v", rec)
			}

			for rec := e.record(); time.Now().Before(rec.LeaseUntil); {
				time.Sleep(time.Until(rec.LeaseUntil) + 50*time.Millisecond)
			}
			if err := e.run(context.Background()); err != nil {
				t.Fatalf("host-b's run after the lease lapsed: %v", err)
			}
			t.Logf("taken over and finished %.1f s after the kill (lease %d s)", time.Since(killed).Seconds(), e.cfg.LeaseSeconds)
			reqs := e.model.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d model requests in all, want 3 (two before the kill, one after)", len(reqs))
			}
			if last := reqs[2].Messages[len(reqs[2].Messages)-1].Content; !strings.HasPrefix(last, engine.ResultPrefix+"fs/write_file") {
				t.Fatalf("the resumed request does not continue the conversation:\n%s", last)
			}
			if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent done"}) {
				t.Fatalf("final labels %v", l)
			}
			c := e.botComments()
			if len(c) != 3 || !living(c[0], "Writing hello.txt.") || !strings.Contains(c[1], "took over this task") ||
				!strings.Contains(c[1], "(host-a, pid ") || !strings.Contains(c[1], "on host-b continues") ||
				c[2] != closingHello {
				t.Fatalf("bot comments %q, want the living comment (begun by host-a, finished by host-b), the takeover, and the closing one, once each", c)
			}
			if rec := e.record(); rec.Status != task.Done || rec.Host != "host-b" {
				t.Errorf("final record %+v", rec)
			}
		})
	}
}

// A task whose host vanished while its lease is long: `release` from a
// host that never held it frees it at once, and the next run takes it
// over from its checkpoint, saying an operator released it. `release` of a
// task that is done is refused.
func TestReleaseFreesATaskFromAnyHost(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	e.cfg.LeaseSeconds = 3600
	e.cfg.HostName = "host-a"
	arrived := make(chan struct{})
	e.model.Script(
		llmtest.Reply{Content: `{"comment":"Writing hello.txt.","command":{"tool":"fs/write_file","args":{"path":"` +
			e.workspace + `/hello.txt","content":"hello from coding-agent\n"}}}`},
		llmtest.Slow{Arrived: arrived},
	)
	runKilled(t, e, arrived)

	e.cfg.HostName = "host-c"
	release := func() (string, error) {
		a, err := app.New(t.Context(), e.cfg, app.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		var out strings.Builder
		err = a.Release(t.Context(), e.ref, &out)
		return out.String(), err
	}
	out, err := release()
	if err != nil || !strings.Contains(out, "released from host-a, pid ") {
		t.Fatalf("release = %q, %v", out, err)
	}
	e.cfg.HostName = "host-b"
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run after the release: %v", err)
	}
	if n := len(e.model.Requests()); n != 3 {
		t.Fatalf("%d model requests in all, want 3", n)
	}
	c := e.botComments()
	if len(c) != 3 || !strings.Contains(c[1], "An operator released it") {
		t.Fatalf("bot comments %q, want the takeover of a released task between the steps", c)
	}
	if _, err := release(); err == nil || !strings.Contains(err.Error(), "it is done") {
		t.Errorf("release of a done task: %v, want it refused as done", err)
	}
}
