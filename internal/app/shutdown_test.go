package app_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/plan"
	"github.com/coding-agent/coding-agent/internal/task"
)

// SIGTERM while the model is answering: serve lets the step finish, stops
// at the next checkpoint, keeps the task queued; the next run resumes it
// without asking the model again for what it already answered.
func TestServeShutdownCheckpointsAndRunResumes(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	serveStoppedMidAnswer(t, e)

	if rec := e.record(); rec.Status != task.Queued || rec.Counters.LLMCalls != 1 || rec.Counters.ToolCalls != 1 {
		t.Fatalf("after shutdown: %+v", rec)
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent processing"}) {
		t.Fatalf("labels after shutdown %v", l)
	}
	c := e.botComments()
	if len(c) != 2 || !strings.Contains(c[0], "Writing hello.txt.") || !strings.Contains(c[1], "stopped while working") {
		t.Fatalf("comments after shutdown %q", c)
	}

	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests in all, want 2", len(reqs))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1].Content
	if !strings.HasPrefix(last, engine.ResultPrefix+"fs/write_file") {
		t.Fatalf("the resumed request does not continue the conversation:\n%s", last)
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent done"}) {
		t.Fatalf("final labels %v", l)
	}
	if rec := e.record(); rec.Status != task.Done || rec.Counters.LLMCalls != 2 {
		t.Fatalf("final record %+v", rec)
	}
	// The resumed round edits the living comment it began, then closes.
	if c := e.botComments(); len(c) != 3 || !strings.HasPrefix(c[0], "## 🤖 coding-agent worked on this") ||
		strings.Count(c[0], "Writing hello.txt.") != 1 || c[2] != closingHello {
		t.Errorf("comments after the resumed run %q", c)
	}
}

// SIGTERM while the model writes the plan: the plan is taken, the task
// stops before its first action, and the next run starts at action a1
// without planning again.
func TestPlannedServeShutdownResumesAtTheFirstAction(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	arrived, release := make(chan struct{}), make(chan struct{})
	var slowed bool
	e := planned(t, setup{forge: task.GitLab, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if w := where(r); w.Phase == "planning" && !slowed {
				slowed = true
				return llmtest.Slow{Arrived: arrived, Release: release, Then: fourActions("計画しました。")}
			}
			return fullPlan(e, r)
		}})
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, e.cfg, app.Options{Sleep: noWait, Now: e.now})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx) }()
	<-arrived
	cancel()
	close(release)
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	a.Close()
	before := len(e.model.Requests())
	if rec := e.record(); rec.Status != task.Queued || before != 3 {
		t.Fatalf("after shutdown: %+v, %d model requests (want queued, 3)", rec, before)
	}
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	reqs := e.model.Requests()
	if w := where(reqs[before]); w.Phase != "execution" || w.Action != "a1" || w.Tools != 0 {
		t.Errorf("the first request after the restart is %+v, want the start of a1", w)
	}
	e.wantLabels(t, "bug", "coding agent done")
	if got := e.history(t); got[0].Type != "plan" || slices.IndexFunc(got[1:], func(en plan.Entry) bool { return en.Type == "plan" }) >= 0 {
		t.Errorf("history %+v, want one plan", got)
	}
}

// serveStoppedMidAnswer runs serve on e and stops it (as SIGTERM does)
// while the model is answering its first request, which then answers a
// call to write hello.txt; it returns once serve has returned.
func serveStoppedMidAnswer(t *testing.T, e *env) {
	t.Helper()
	arrived, release := make(chan struct{}), make(chan struct{})
	e.model.Script(llmtest.Slow{Arrived: arrived, Release: release,
		Then: llmtest.Reply{Content: `{"comment":"Writing hello.txt.","command":{"tool":"fs/write_file","args":{"path":"` +
			e.workspace + `/hello.txt","content":"hello from coding-agent\n"}}}`}})
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, e.cfg, app.Options{Sleep: noWait})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx) }()
	<-arrived
	cancel() // the signal arrives while the model is working
	close(release)
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	a.Close()
}
