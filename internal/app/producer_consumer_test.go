package app_test

import (
	"context"
	"slices"
	"testing"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/task"
)

func (e *env) app(t *testing.T) *app.App {
	t.Helper()
	a, err := app.New(context.Background(), e.cfg, app.Options{Sleep: noWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// produce and consume as two processes sharing a state directory: the
// producer claims and queues, the consumer works.
func TestProduceThenConsume(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitLab, kind: task.MergeRequest, provider: config.ProviderOllama, native: true})
	if err := e.app(t).Produce(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if rec := e.record(); rec.Status != task.Queued {
		t.Fatalf("after produce: %+v", rec)
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent processing"}) {
		t.Fatalf("labels after produce %v", l)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("produce made %d model requests", n)
	}
	if err := e.app(t).Consume(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	checkDone(t, e, config.ProviderOllama, true)
}

// A task closed after it was claimed is not worked on: it is stopped and
// its processing label removed.
func TestTaskClosedBeforeWorkIsStopped(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	if err := e.app(t).Produce(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	e.gh.SetState(e.ref.Repo, e.ref.Number, "closed")
	if err := e.app(t).Consume(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("%d model requests for a closed task", n)
	}
	if rec := e.record(); rec.Status != task.Stopped {
		t.Fatalf("record %+v, want stopped", rec)
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug"}) {
		t.Fatalf("labels %v, want [bug]", l)
	}
}

// A closed item carrying the label is never claimed.
func TestClosedItemsAreLeftAlone(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	e.gh.SetState(e.ref.Repo, e.ref.Number, "closed")
	if err := e.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent"}) {
		t.Fatalf("labels %v: a closed item must not be touched", l)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("%d model requests", n)
	}
}
