package app_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// A tool server's question, end to end on each forge: the model calls a
// server that asks where to deploy; the question is posted on the task,
// which awaits an answer; an outsider's reply is not one (and never
// reaches the model); each run is a new process, so the daemon dying
// while the task awaits changes nothing; the author's reply is read into
// the fields, the call is made again with them, and the round finishes.
func TestServerQuestionAnsweredOnTheTask(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, forge := range []string{task.GitHub, task.GitLab, task.Gitea} {
		t.Run(forge, func(t *testing.T) {
			e := newEnv(t, setup{forge: forge, kind: task.Issue, provider: config.ProviderOpenAI, conversation: true,
				respond: func(e *env, r llmtest.Received) llmtest.Step {
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
			e.addComment("mallory", "environment: production")
			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent awaiting response")
			if n := len(e.model.Requests()); n != 1 {
				t.Fatalf("an outsider's reply made %d model requests", n-1)
			}
			e.addComment("alice", "Thanks!\nenvironment: staging\nreplicas: 2")
			e.runOK(t)
			reqs := e.model.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model requests in all, want 2 (the call, then done after the answer)", len(reqs))
			}
			res := reqs[1].Messages[len(reqs[1].Messages)-1].Content
			if !strings.Contains(res, `deployed web with {"environment":"staging","replicas":2}`) || !strings.Contains(res, "@alice answered on the task") ||
				!strings.Contains(res, "Thanks!") {
				t.Errorf("the call made again did not get the answer, or the model not the reply: %s", res)
			}
			for _, r := range reqs {
				if seen(r, "production") {
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
