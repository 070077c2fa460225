package app_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// signal is `coding-agent pause|resume|stop REF` on the env's config.
func (e *env) signal(action string) {
	e.t.Helper()
	a, err := app.New(context.Background(), e.cfg, app.Options{Sleep: noWait})
	if err != nil {
		e.t.Fatal(err)
	}
	defer a.Close()
	if err := a.Signal(context.Background(), action, e.ref, io.Discard); err != nil {
		e.t.Fatal(err)
	}
}

// Paused mid-run (from the command line, while the model works on a1): the
// task stops at the next checkpoint with its state saved and says so;
// resumed, it continues at the same step without planning again.
func TestPauseMidRunThenResume(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	paused := false
	e := planned(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if w := where(r); w.Action == "a1" && w.Tools == 0 && !paused {
				paused = true
				e.signal(app.SignalPause)
			}
			return fullPlan(e, r)
		}})
	e.cfg.Language = config.LanguageEnglish
	e.runOK(t)
	if rec := e.record(); rec.Status != task.Paused {
		t.Fatalf("after the pause: %+v", rec)
	}
	e.wantLabels(t, "bug", "coding agent paused")
	c := e.botComments()
	if !strings.Contains(c[len(c)-1], "paused") {
		t.Errorf("the last comment should say the task paused:\n%s", c[len(c)-1])
	}
	if l := e.living(); !strings.Contains(l, "coding-agent paused its work on this") || !strings.Contains(l, "*Paused: resuming it continues from here") {
		t.Errorf("the living comment does not say the run paused:\n%s", l)
	}
	before := len(e.model.Requests())

	e.runOK(t) // still paused: nothing happens
	if n := len(e.model.Requests()); n != before {
		t.Fatalf("a paused task made %d model requests", n-before)
	}
	e.signal(app.SignalResume)
	e.runOK(t)
	reqs := e.model.Requests()
	if w := where(reqs[before]); w.Action != "a1" || w.Tools != 1 {
		t.Errorf("the first request after resuming is %+v, want a1 after its tool call", w)
	}
	for _, r := range reqs[before:] {
		if where(r).Phase == "planning" {
			t.Errorf("request %d plans again after resuming", r.N)
		}
	}
	e.wantLabels(t, "bug", "coding agent done")
	if l := e.living(); !strings.Contains(l, "coding-agent worked on this") || strings.Contains(l, "Paused") {
		t.Errorf("the living comment once done:\n%s", l)
	}
}

// living is the task's living comment: the first of the bot's comments
// that is one; "" when there is none.
func (e *env) living() string {
	for _, c := range e.botComments() {
		if strings.HasPrefix(strings.TrimSpace(c), "## 🤖 coding-agent") {
			return c
		}
	}
	return ""
}

// Stopped mid-run: the task ends at the next checkpoint with the stopped
// label and a comment, never done; the model is not asked again.
func TestStopMidRun(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitLab, kind: task.MergeRequest, provider: config.ProviderOllama,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if r.N == 1 {
				e.signal(app.SignalStop)
			}
			return writeThenDone(e, r)
		}})
	e.runOK(t)
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
	e.wantLabels(t, "bug", "coding agent stopped")
	if rec := e.record(); rec.Status != task.Stopped {
		t.Errorf("store record %+v", rec)
	}
	c := e.botComments()
	if !strings.Contains(c[len(c)-1], "stopped") || slices.ContainsFunc(c, func(s string) bool { return strings.Contains(s, "Created hello.txt") }) {
		t.Errorf("comments %q", c)
	}
	if l := e.living(); !strings.Contains(l, "coding-agent stopped working on this") || !strings.Contains(l, "*Stopped") {
		t.Errorf("the living comment does not say the run stopped:\n%s", l)
	}
}

// The living comment's last edit says how the run halted, in both loops
// and for both halts a person asks for (pause, stop), on both forges: it
// said "working" for ever before.
func TestLivingCommentSaysTheRunHalted(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, planning := range []bool{false, true} {
		for _, c := range []struct {
			signal, forge, header, footer string
		}{
			{app.SignalPause, task.GitHub, "coding-agent paused its work on this", "*Paused: resuming it continues from here"},
			{app.SignalStop, task.GitLab, "coding-agent stopped working on this", "*Stopped"},
			{app.SignalPause, task.Gitea, "coding-agent paused its work on this", "*Paused: resuming it continues from here"},
			{app.SignalStop, task.Gitea, "coding-agent stopped working on this", "*Stopped"},
		} {
			t.Run(fmt.Sprintf("planning=%v/%s/%s", planning, c.forge, c.signal), func(t *testing.T) {
				t.Parallel()
				respond := writeThenDone
				if planning {
					respond = fullPlan
				}
				s := setup{forge: c.forge, kind: task.Issue, provider: config.ProviderOpenAI, native: true, planning: planning,
					respond: func(e *env, r llmtest.Received) llmtest.Step {
						if r.N == 1 { // the run halts at the next checkpoint, before the done
							e.signal(c.signal)
						}
						return respond(e, r)
					}}
				e := newEnv(t, s)
				if planning {
					e = planned(t, s)
				}
				e.cfg.Language = config.LanguageEnglish
				e.runOK(t)
				if l := e.living(); !strings.Contains(l, c.header) || !strings.Contains(l, c.footer) || strings.Contains(l, "is working on this") {
					t.Errorf("the living comment after %s:\n%s", c.signal, l)
				}
			})
		}
	}
}
