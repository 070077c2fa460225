package app_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/buildtest"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/plan"
	"github.com/coding-agent/coding-agent/internal/task"
)

// A `coding-agent run` process killed (SIGKILL) in the middle of a task: the
// next run on the same state directory takes the dead process's task over
// and continues the conversation from the last checkpoint.
func TestKilledRunIsResumedByTheNextRun(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	arrived := make(chan struct{})
	e.model.Script(
		llmtest.Reply{Content: `{"comment":"Writing hello.txt.","command":{"tool":"fs/write_file","args":{"path":"` +
			e.workspace + `/hello.txt","content":"hello from coding-agent\n"}}}`},
		// The second request hangs until the client goes away: the process
		// is killed while the model is answering.
		llmtest.Slow{Arrived: arrived},
	)
	cmd, stderr := runKilled(t, e, arrived)

	if rec := e.record(); rec.Status != task.Running || rec.PID != cmd.Process.Pid {
		t.Fatalf("after the kill the store should hold the task as running under the dead process: %+v\n%s", rec, stderr.String())
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent processing"}) {
		t.Fatalf("labels after the kill %v", l)
	}

	if err := e.run(context.Background()); err != nil {
		t.Fatalf("second run: %v", err)
	}
	reqs := e.model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests in all, want 3 (two before the kill, one after)", len(reqs))
	}
	last := reqs[2].Messages[len(reqs[2].Messages)-1].Content
	if !strings.HasPrefix(last, engine.ResultPrefix+"fs/write_file") {
		t.Fatalf("the resumed request does not continue the conversation:\n%s", last)
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent done"}) {
		t.Fatalf("final labels %v", l)
	}
	if c := e.botComments(); !helloDone(c) {
		t.Fatalf("bot comments %q", c)
	}
}

// runKilled starts `coding-agent run` on e's config in its own process and
// kills it (SIGKILL) once arrived is closed, that is, while the model is
// answering. It returns the dead command and what it wrote to stderr.
func runKilled(t *testing.T, e *env, arrived <-chan struct{}) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(buildBinary(t), "run", "--config", writeConfig(t, e.cfg))
	cmd.Env = append(os.Environ(), "CA_TEST_TOKEN="+e.gh.Token, "CA_TEST_KEY="+apiKey)
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-arrived:
	case err := <-exited:
		t.Fatalf("run exited (%v) before the step it was to be killed in:\n%s", err, stderr.String())
	case <-time.After(2 * time.Minute): // only turns a hang into a failure that says where
		cmd.Process.Kill()
		<-exited
		t.Fatalf("run did not reach the step it was to be killed in within 2 minutes; log:\n%s", readTree(t, filepath.Dir(e.cfg.Logging.File)))
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	return cmd, stderr
}

// buildBinary is the daemon's binary (buildtest.Command: built once for
// each state of the sources, a dozen tests start it).
func buildBinary(t testing.TB) string {
	t.Helper()
	return buildtest.Command(t, "./cmd/coding-agent")
}

// writeConfig writes the GitHub + OpenAI config of an env as the YAML a user
// would write, secrets taken from the environment (CA_TEST_TOKEN and
// CA_TEST_KEY; an MCP server's env may name them as ${...} too).
func writeConfig(t testing.TB, c *config.Config) string {
	t.Helper()
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	var mcp strings.Builder
	for _, s := range c.MCPServers {
		args := make([]string, len(s.Command))
		for i, a := range s.Command {
			args[i] = q(a)
		}
		fmt.Fprintf(&mcp, "  - mcp_server_name: %s\n    command: [%s]\n    system_prompt: %s\n", s.Name, strings.Join(args, ", "), q(s.SystemPrompt))
		if s.Scope != "" {
			fmt.Fprintf(&mcp, "    scope: %s\n", s.Scope)
		}
		if len(s.Env) > 0 {
			mcp.WriteString("    env:\n")
			for _, k := range slices.Sorted(maps.Keys(s.Env)) {
				fmt.Fprintf(&mcp, "      %s: %s\n", k, q(s.Env[k]))
			}
		}
	}
	source, apiURL, reposKey, repos := "github", c.GitHub.APIURL, "repositories", c.GitHub.Repositories
	switch c.TaskSource {
	case task.GitLab:
		source, apiURL, reposKey, repos = c.TaskSource, c.GitLab.APIURL, "project_id", c.GitLab.Projects
	case task.Gitea:
		source, apiURL, repos = c.TaskSource, c.Gitea.APIURL, c.Gitea.Repositories
	}
	yaml := fmt.Sprintf(`task_source: %s
state_dir: %s
%s:
  api_url: %s
  token: ${CA_TEST_TOKEN}
  %s: [%s]
llm:
  provider: openai
  function_calling: %t
  openai:
    base_url: %s
    api_key: ${CA_TEST_KEY}
    model: gpt-test
    context_length: %d
    max_token: %d
mcp_servers:
%slogging:
  file: %s
shutdown_grace_seconds: %d
planning:
  enabled: %t
  reflection:
    trigger_interval: %d
  history:
    directory: %s
conversation:
  enabled: %t
workspace:
  root: %s
  keep: %s
delivery:
  enabled: %t
  draft: %t
  branch_prefix: %s
`, source, q(c.StateDir), source, q(apiURL), reposKey, strings.Join(repos, ", "), c.LLM.FunctionCalling, q(c.LLM.OpenAI.BaseURL),
		c.LLM.OpenAI.ContextLength, c.LLM.OpenAI.MaxToken, mcp.String(), q(c.Logging.File), c.ShutdownGraceSeconds, c.Planning.Enabled,
		c.Planning.Reflection.TriggerInterval, q(c.Planning.History.Directory), c.Conversation.Enabled,
		q(c.Workspace.Root), c.Workspace.Keep, c.Delivery.Enabled, c.Delivery.Draft, q(c.Delivery.BranchPrefix))
	if c.HostName != "" {
		yaml += "host_name: " + q(c.HostName) + "\n"
	}
	if c.Language != "" {
		yaml += "language: " + c.Language + "\n"
	}
	if c.Comments.Mode != "" {
		yaml += "comments:\n  mode: " + c.Comments.Mode + "\n"
	}
	if c.LeaseSeconds != 0 {
		yaml += fmt.Sprintf("lease_seconds: %d\n", c.LeaseSeconds)
	}
	if c.ForgeLeaseSeconds != nil {
		yaml += fmt.Sprintf("forge_lease_seconds: %d\n", *c.ForgeLeaseSeconds)
	}
	if c.Database.URL != "" {
		yaml += "database:\n  url: " + q(c.Database.URL) + "\n"
	}
	if r := c.Queue.RabbitMQ; c.Queue.Type == config.QueueRabbitMQ {
		yaml += fmt.Sprintf("queue:\n  type: rabbitmq\n  rabbitmq:\n    url: %s\n    name: %s\n    max_deliveries: %d\n",
			q(r.URL), q(r.Name), r.MaxDeliveries)
	}
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// killPlannedAt runs the scripted planned task (fullPlan) in a process
// killed (SIGKILL) while the model answers the first request of action, then
// runs it again in-process. It returns the env and how many requests the
// killed process made; the first request after the restart must start
// action again.
func killPlannedAt(t *testing.T, action string, interval int) (*env, int) {
	t.Helper()
	arrived := make(chan struct{})
	var killed atomic.Bool
	e := planned(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if w := where(r); w.Action == action && w.Tools == 0 && killed.CompareAndSwap(false, true) {
				return llmtest.Slow{Arrived: arrived}
			}
			return fullPlan(e, r)
		}})
	e.cfg.Planning.Reflection.TriggerInterval = interval
	_, stderr := runKilled(t, e, arrived)
	before := len(e.model.Requests())
	e.now = nil
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("second run: %v\nfirst run's stderr:\n%s", err, stderr.String())
	}
	if w := where(e.model.Requests()[before]); w.Action != action || w.Tools != 0 {
		t.Errorf("the first request after the restart is %+v, want the start of action %s", w, action)
	}
	return e, before
}

// A planned run killed (SIGKILL) after action 2 of 4: the next run continues
// from the saved plan at action 3. It does not plan again, repeat a1 or a2,
// or post a second progress report.
func TestKilledPlannedRunContinuesAtTheNextAction(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e, before := killPlannedAt(t, "a3", 3)
	reqs := e.model.Requests()
	planning := 0
	for _, r := range reqs {
		if w := where(r); w.Phase == "planning" {
			planning++
		}
		if w := where(r); r.N > before && (w.Action == "a1" || w.Action == "a2") {
			t.Errorf("request %d after the restart repeats %s", r.N, w.Action)
		}
	}
	if planning != 1 {
		t.Errorf("%d planning requests, want 1", planning)
	}
	e.wantLabels(t, "bug", "coding agent done")
	progress := 0
	for _, c := range e.botComments() {
		if strings.Contains(c, "実行計画の進捗") {
			progress++
		}
	}
	if progress != 1 {
		t.Errorf("%d progress comments, want 1 edited in place", progress)
	}
	if plans := slices.IndexFunc(e.history(t)[1:], func(en plan.Entry) bool { return en.Type == plan.EntryPlan }); plans >= 0 {
		t.Errorf("the history holds a second plan")
	}
}

// A planned run killed after a plan revision continues at the action it was
// at: the revision replaced a3 by new actions (a3b, a4), and a kill while the
// model answers the first request of either must not start the task over.
// Before the turn engine, the resumed run found the failed action a3 missing
// from the revised plan, ignored the checkpoint and planned again.
func TestKilledPlannedRunAfterARevisionContinues(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, action := range []string{"a3b", "a4"} {
		t.Run(action, func(t *testing.T) {
			e, _ := killPlannedAt(t, action, 2) // the reflection interval of the golden run: 18 requests
			reqs := e.model.Requests()
			// 18 requests for the whole task, and the one the kill cut off.
			if len(reqs) != 19 {
				t.Errorf("%d model requests in all, want 19", len(reqs))
			}
			e.wantLabels(t, "bug", "coding agent done")
			comments := strings.Join(e.botComments(), "\n")
			if n := strings.Count(comments, "実行計画の進捗"); n != 1 || len(e.botComments()) != 2 {
				t.Errorf("%d progress reports in %d comments, want 1 in the living comment, edited in place, and the closing one",
					n, len(e.botComments()))
			}
			for n := 1; n <= 18; n++ { // the living comment's steps, each once
				if c := strings.Count(comments, fmt.Sprintf("**ステップ %d**", n)); c != 1 {
					t.Errorf("the step of call #%d appears %d times, want 1", n, c)
				}
			}
			if !strings.Contains(comments, "LLM呼び出し: 18 回") {
				t.Errorf("the receipt does not count 18 calls:\n%s", comments)
			}
			var types []string
			for _, en := range e.history(t) {
				types = append(types, en.Type)
			}
			if want := []string{"plan", "reflection", "reflection", "revision", "verification"}; !slices.Equal(types, want) {
				t.Errorf("history %v, want %v", types, want)
			}
		})
	}
}
