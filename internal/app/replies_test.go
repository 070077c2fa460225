package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// isJudgeRequest reports whether r is the reply judge's question to the
// model (watch.AskReply), not a step of a round.
func isJudgeRequest(r llmtest.Received) bool {
	return len(r.Messages) == 2 && r.Messages[0].Role == llm.System &&
		strings.Contains(r.Messages[0].Content, "Decide whether the reply asks the agent for anything more")
}

// judgeOr answers the reply judge's question with verdict, and every other
// request as writeThenDone does.
func judgeOr(verdict string) func(e *env, r llmtest.Received) llmtest.Step {
	return func(e *env, r llmtest.Received) llmtest.Step {
		if isJudgeRequest(r) {
			return llmtest.Reply{Content: `{"verdict": "` + verdict + `"}`, Usage: llmtest.Usage{In: 180, Out: 7}}
		}
		return writeThenDone(e, r)
	}
}

// judgeRequests counts the reply judge's requests among the model's.
func (e *env) judgeRequests() int {
	n := 0
	for _, r := range e.model.Requests() {
		if isJudgeRequest(r) {
			n++
		}
	}
	return n
}

func (e *env) announcements() []string {
	var out []string
	for _, c := range e.botComments() {
		if strings.Contains(c, "Marked done: reply or relabel to continue") {
			out = append(out, c)
		}
	}
	return out
}

// Replies through `run` on both forges, judged as a person would: a request
// hidden after thanks starts a round with no question to the model; thanks
// alone ends the conversation, announced once; a reply the judge is unsure
// of asks the model once, and that request is counted with the task's.
func TestRepliesThroughRun(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, forge := range emulatedForges {
		start := func(t *testing.T, verdict string) *env {
			e := newEnv(t, setup{forge: forge, kind: task.Issue, provider: config.ProviderOpenAI, conversation: true,
				respond: judgeOr(verdict)})
			e.cfg.Language = config.LanguageEnglish
			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent awaiting response")
			return e
		}
		t.Run(forge+"/request hidden after thanks", func(t *testing.T) {
			e := start(t, "end")
			round1 := len(e.model.Requests())
			e.addComment("alice", "Thanks, that looks right. One more thing: please keep `slugify` as it is.")
			e.runOK(t)
			reqs := e.model.Requests()
			if len(reqs) == round1 || !seen(reqs[round1], "please keep `slugify` as it is") {
				t.Fatalf("the reply did not start round 2 (%d requests after it)", len(reqs)-round1)
			}
			if n := e.judgeRequests(); n != 0 {
				t.Errorf("%d questions to the model about a plain request", n)
			}
			e.wantLabels(t, "bug", "coding agent awaiting response")
			if a := e.announcements(); len(a) != 0 {
				t.Errorf("announcements %q after a request", a)
			}
		})
		t.Run(forge+"/thanks only", func(t *testing.T) {
			e := start(t, "continue")
			before := len(e.model.Requests())
			e.addComment("alice", "Thanks, looks good!")
			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent done")
			if n := len(e.model.Requests()); n != before {
				t.Errorf("the thanks made %d model requests", n-before)
			}
			a := e.announcements()
			if len(a) != 1 || !strings.Contains(a[0], "@alice's reply reads as thanks") {
				t.Fatalf("announcements %q, want one", a)
			}
			e.runOK(t)
			if n := len(e.announcements()); n != 1 {
				t.Errorf("%d announcements after another run, want 1", n)
			}
		})
		t.Run(forge+"/unsure asks the model once", func(t *testing.T) {
			e := start(t, "end")
			before, calls := len(e.model.Requests()), e.record().Counters.LLMCalls
			e.addComment("alice", "Thanks, I will merge it after lunch.")
			e.runOK(t)
			if n, j := len(e.model.Requests())-before, e.judgeRequests(); n != 1 || j != 1 {
				t.Fatalf("%d model requests (%d the judge's), want the judge's one", n, j)
			}
			if got := e.record().Counters.LLMCalls - calls; got != 1 {
				t.Errorf("the store counted %d model calls for the question, want 1", got)
			}
			e.wantLabels(t, "bug", "coding agent done")
			if a := e.announcements(); len(a) != 1 || !strings.Contains(a[0], "the model read @alice's reply as an ending") {
				t.Errorf("announcements %q", a)
			}
			e.runOK(t)
			if n := e.judgeRequests(); n != 1 {
				t.Errorf("the reply was asked about %d times over two runs, want 1", n)
			}
		})
	}
}

// `stop` on a task awaiting a reply takes effect at once: the labels and
// the row say stopped before anyone replies, and a reply then starts
// nothing.
func TestStopAnAwaitingTask(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, forge := range emulatedForges {
		t.Run(forge, func(t *testing.T) {
			e := newEnv(t, setup{forge: forge, kind: task.Issue, provider: config.ProviderOpenAI, conversation: true})
			e.cfg.Language = config.LanguageEnglish
			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent awaiting response")
			a, err := app.New(context.Background(), e.cfg, app.Options{Sleep: noWait})
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			err = a.Signal(context.Background(), app.SignalStop, e.ref, &out)
			a.Close()
			if err != nil {
				t.Fatal(err)
			}
			e.wantLabels(t, "bug", "coding agent stopped")
			if rec := e.record(); rec.Status != task.Stopped {
				t.Errorf("row %+v, want stopped", rec)
			}
			if !strings.Contains(out.String(), "stopped; it no longer awaits a reply") {
				t.Errorf("the command said %q", out.String())
			}
			before := len(e.model.Requests())
			e.addComment("alice", "Please also add a goodbye file.")
			e.runOK(t)
			if n := len(e.model.Requests()); n != before {
				t.Errorf("a reply to the stopped task made %d model requests", n-before)
			}
			e.wantLabels(t, "bug", "coding agent stopped")
		})
	}
}
