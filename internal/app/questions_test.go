package app_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// A tool server's question, end to end on each forge: the model calls a
// server that asks where to deploy; the question is posted on the task,
// which awaits an answer; an outsider's reply is not one (and never
// reaches the model); each run is a new process, so the daemon dying
// while the task awaits changes nothing; the author's reply is read into
// the fields (a prose reply by the model, through each provider's wire:
// the reading request holds the author's reply and not the outsider's),
// the call is made again with them, and the round finishes.
func TestServerQuestionAnsweredOnTheTask(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, c := range []struct {
		forge, provider, reply string
		reads                  int
	}{
		{task.GitHub, config.ProviderOpenAI, "Thanks!\nenvironment: staging\nreplicas: 2", 0},
		{task.GitLab, config.ProviderOllama, "Thanks! Let's go with staging, and two replicas.", 1},
		{task.Gitea, config.ProviderLMStudio, "Thanks! Staging please, with two replicas.", 1},
	} {
		t.Run(c.forge+"-"+c.provider, func(t *testing.T) {
			e := deployerEnv(t, c.forge, c.provider, func(e *env, r llmtest.Received) llmtest.Step {
				if strings.HasPrefix(r.Messages[0].Content, "A tool server asked") {
					return llmtest.Reply{Content: `{"action": "accept", "content": {"environment": "staging", "replicas": 2}}`}
				}
				return nil
			})
			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent awaiting response")
			if rec := e.record(); rec.Status != task.Awaiting {
				t.Fatalf("after the question: %+v", rec)
			}
			bot := e.botComments()
			asked := slices.IndexFunc(bot, func(c string) bool { return strings.Contains(c, "needs an answer") })
			if asked < 0 || !strings.Contains(bot[asked], "Where should web be deployed, and with how many replicas?") ||
				!strings.Contains(bot[asked], "`replicas`: a whole number") {
				t.Fatalf("the question on the task:\n%s", strings.Join(bot, "\n---\n"))
			}
			if n := len(e.model.Requests()); n != 1 {
				t.Fatalf("%d model requests before the answer, want 1", n)
			}
			e.addComment("mallory", "environment: production (mallory-0451)")
			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent awaiting response")
			if n := len(e.model.Requests()); n != 1 {
				t.Fatalf("an outsider's reply made %d model requests", n-1)
			}
			e.addComment("alice", c.reply)
			e.runOK(t)
			reqs := e.model.Requests()
			if len(reqs) != 2+c.reads {
				t.Fatalf("%d model requests in all, want %d (the call, %d reading the reply, then done)", len(reqs), 2+c.reads, c.reads)
			}
			if c.reads > 0 && (!seen(reqs[1], "two replicas") || !strings.HasPrefix(reqs[1].Messages[0].Content, "A tool server asked")) {
				t.Errorf("the reading request: %s", reqs[1].Body)
			}
			last := reqs[len(reqs)-1]
			res := last.Messages[len(last.Messages)-1].Content
			if !strings.Contains(res, `deployed web with {"environment":"staging","replicas":2}`) || !strings.Contains(res, "@alice answered on the task") ||
				!strings.Contains(res, c.reply[:7]) {
				t.Errorf("the call made again did not get the answer, or the model not the reply: %s", res)
			}
			for _, r := range reqs {
				if seen(r, "mallory-0451") {
					t.Error("the outsider's reply reached the model")
				}
			}
			e.wantLabels(t, "bug", "coding agent awaiting response") // the round is done; the conversation goes on
			if rec := e.record(); rec.Status != task.Awaiting {
				t.Errorf("after the answer: %+v", rec)
			}
		})
	}
}

// The question is posted, then the task is moved to awaiting; when the
// move fails (here the forge refuses the awaiting label, as a process
// killed in between leaves it: the task not awaiting), the next run
// resumes, asks again, and the question is on the task once, under the
// same comment key; the task then awaits the answer.
func TestServerQuestionPostedOnceWhenTheMoveIsRetried(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := deployerEnv(t, task.GitHub, config.ProviderOpenAI, func(e *env, r llmtest.Received) llmtest.Step {
		if r.N == 1 {
			e.gh.Inject(forgetest.Fault{Method: "POST", Path: "/issues/1/labels", Status: 422})
		}
		return nil
	})
	e.runOK(t)
	if rec := e.record(); rec.Status != task.Queued {
		t.Fatalf("after the refused label: %+v (labels %v)", rec, e.labels())
	}
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent awaiting response")
	n := 0
	for _, c := range e.botComments() {
		if strings.Contains(c, "needs an answer") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the question is on the task %d times, want once:\n%s", n, strings.Join(e.botComments(), "\n---\n"))
	}
	if reqs := e.model.Requests(); len(reqs) != 1 {
		t.Errorf("%d model requests, want 1: the resumed run makes the call in hand again", len(reqs))
	}
}

// A reply that cannot be read as an answer (the model cannot either) gets
// the question again, in a comment of its own saying why; the next reply
// answers it.
func TestServerQuestionAskedAgainWhenTheReplyCannotBeRead(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := deployerEnv(t, task.GitLab, config.ProviderOpenAI, func(e *env, r llmtest.Received) llmtest.Step {
		if strings.HasPrefix(r.Messages[0].Content, "A tool server asked") {
			return llmtest.Reply{Content: `I cannot tell.`}
		}
		return nil
	})
	e.runOK(t)
	e.addComment("alice", "Hmm, wherever you think is best.")
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent awaiting response")
	var asked []string
	for _, c := range e.botComments() {
		if strings.Contains(c, "needs an answer") {
			asked = append(asked, c)
		}
	}
	if len(asked) != 2 || strings.Contains(asked[0], "could not be read") || !strings.Contains(asked[1], "The last reply could not be read as an answer") {
		t.Fatalf("the questions on the task:\n%s", strings.Join(asked, "\n---\n"))
	}
	e.addComment("alice", `{"environment": "production"}`)
	e.runOK(t)
	reqs := e.model.Requests()
	last := reqs[len(reqs)-1]
	if res := last.Messages[len(last.Messages)-1].Content; !strings.Contains(res, `deployed web with {"environment":"production"}`) {
		t.Errorf("the call made again: %s", res)
	}
}

// deployerEnv is an env on forge and provider, with the conversation on, whose model
// deploys web through the deployer server (which asks where first), then
// says it is done; first, when set, is asked before that (nil: nothing).
func deployerEnv(t *testing.T, forge, provider string, first func(e *env, r llmtest.Received) llmtest.Step) *env {
	t.Helper()
	e := newEnv(t, setup{forge: forge, kind: task.Issue, provider: provider, conversation: true,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if first != nil {
				if step := first(e, r); step != nil {
					return step
				}
			}
			if toolResults(r) == 0 {
				return e.call(r, "Deploying web.", "deployer/deploy", map[string]any{"target": "web"})
			}
			return done("Deployed web.")
		}})
	e.cfg.MCPServers = append(e.cfg.MCPServers, config.MCPServer{Name: "deployer", Command: []string{mcptest.Build(t)},
		Env: map[string]string{"MCPTEST_ASKS": "1"}})
	if err := e.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return e
}

// `coding-agent serve` killed (SIGKILL) while the task awaits the answer
// to a tool server's question, or as it moves there (once the forge added
// the awaiting label, before the store recorded it): the next process
// hears the author's reply, resumes the run from its checkpoint and makes
// the call again with the answer; the question was asked once.
func TestServerQuestionSurvivesAKillWhileAwaiting(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, moving := range []bool{true, false} {
		t.Run(map[bool]string{true: "as it moves", false: "awaiting"}[moving], func(t *testing.T) {
			labelled := make(chan struct{})
			e := deployerEnv(t, task.GitHub, config.ProviderOpenAI, func(e *env, r llmtest.Received) llmtest.Step {
				if moving && r.N == 1 { // the next label added is the awaiting one
					e.gh.Inject(forgetest.Fault{Method: "POST", Path: "/issues/1/labels", Arrived: labelled})
				}
				return nil
			})
			cmd := exec.Command(buildBinary(t), "serve", "--config", writeConfig(t, e.cfg))
			cmd.Env = append(os.Environ(), "CA_TEST_TOKEN="+e.gh.Token, "CA_TEST_KEY="+apiKey)
			stderr := &strings.Builder{}
			cmd.Stderr = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			killed := false
			defer func() {
				if !killed {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
			}()
			if moving {
				select {
				case <-labelled:
				case <-time.After(time.Minute):
					t.Fatalf("the awaiting label was not added within a minute:\n%s", stderr.String())
				}
			} else {
				waitFor(t, "the task to await the answer", func() bool {
					return slices.Contains(e.labels(), "coding agent awaiting response") && e.known(t) && e.record().Status == task.Awaiting
				})
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			killed = true
			if rec := e.record(); (rec.Status == task.Awaiting) == moving {
				t.Fatalf("killed with the row %s", rec.Status)
			}
			e.addComment("alice", "environment: production")
			e.runOK(t)
			reqs := e.model.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model requests in all, want 2 (the call before the kill, done after the answer)\n%s", len(reqs), stderr.String())
			}
			if res := reqs[1].Messages[len(reqs[1].Messages)-1].Content; !strings.Contains(res, `deployed web with {"environment":"production"}`) {
				t.Errorf("the call made again: %s", res)
			}
			n := 0
			for _, c := range e.botComments() {
				if strings.Contains(c, "needs an answer") {
					n++
				}
			}
			if n != 1 {
				t.Errorf("the question was asked %d times, want once", n)
			}
		})
	}
}
