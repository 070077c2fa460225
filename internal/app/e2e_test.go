package app_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// Every forge and item kind, with both reply protocols and both wire
// formats: the task is claimed before the first model request, a file is
// written through the real filesystem MCP server, the comments appear, and
// the final labels are right.
func TestEndToEnd(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	items := []struct {
		forge string
		kind  task.Kind
	}{
		{task.GitHub, task.Issue}, {task.GitHub, task.PullRequest},
		{task.GitLab, task.Issue}, {task.GitLab, task.MergeRequest},
		{task.Gitea, task.Issue}, {task.Gitea, task.PullRequest},
	}
	for _, it := range items {
		for _, provider := range []string{config.ProviderOpenAI, config.ProviderOllama} {
			for _, native := range []bool{true, false} {
				name := fmt.Sprintf("%s/%s/%s/native=%v", it.forge, it.kind, provider, native)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					// The npm filesystem server, the one users run, for each
					// forge and kind once; the test server's file tools
					// (half a second less CPU) for the other providers and
					// modes.
					npm := provider == config.ProviderOpenAI && native
					e := newEnv(t, setup{forge: it.forge, kind: it.kind, provider: provider, native: native, npm: npm})
					if err := e.run(context.Background()); err != nil {
						t.Fatalf("run: %v", err)
					}
					checkDone(t, e, provider, native)
				})
			}
		}
	}
}

func checkDone(t *testing.T, e *env, provider string, native bool) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(e.workspace, "hello.txt"))
	if err != nil || string(got) != "hello from coding-agent\n" {
		t.Fatalf("hello.txt = %q, %v", got, err)
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent done"}) {
		t.Errorf("final labels %v, want [bug, coding agent done]", l)
	}
	if !slices.Contains(e.claimedAt, "coding agent processing") || slices.Contains(e.claimedAt, "coding agent") {
		t.Errorf("labels at the first model request %v: the claim must come first", e.claimedAt)
	}
	if c := e.botComments(); !helloDone(c) {
		t.Errorf("bot comments %q", c)
	}
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	wantWire := llmtest.WireOpenAI
	if provider == config.ProviderOllama {
		wantWire = llmtest.WireOllama
	}
	first := reqs[0]
	if first.Wire != wantWire {
		t.Errorf("wire %s, want %s", first.Wire, wantWire)
	}
	if first.MaxTokens != maxToken {
		t.Errorf("reply token limit %d, want max_token %d", first.MaxTokens, maxToken)
	}
	if native != (first.ToolNames != nil) {
		t.Errorf("native=%v but tools offered: %v", native, first.ToolNames)
	}
	prompt := first.Messages[1].Content
	for _, want := range []string{"Add a greeting file", "Create hello.txt saying hello.", "@bob", "Please keep it short."} {
		if !strings.Contains(prompt, want) {
			t.Errorf("first user message lacks %q:\n%s", want, prompt)
		}
	}
	if e.ref.Kind != task.Issue && !strings.Contains(prompt, "feature/greeting → main") {
		t.Errorf("first user message lacks the branches:\n%s", prompt)
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1].Content
	if !strings.Contains(last, "fs/write_file") || !strings.Contains(last, "hello.txt") {
		t.Errorf("tool result message lacks the command and args:\n%s", last)
	}
	rec := e.record()
	if rec.Status != task.Done || rec.Counters.LLMCalls != 2 || rec.Counters.ToolCalls != 1 ||
		rec.Counters.TokensIn != 220 || rec.Counters.TokensOut != 30 {
		t.Errorf("store record %+v", rec)
	}
	checkNoSecrets(t, e)
}

// checkNoSecrets: the forge token and the API key appear nowhere in the log
// or in the comments.
func checkNoSecrets(t *testing.T, e *env) {
	t.Helper()
	logs, err := os.ReadFile(e.cfg.Logging.File)
	if err != nil {
		t.Fatalf("reading log: %v", err)
	}
	secrets := []string{apiKey, e.token()}
	text := string(logs) + strings.Join(e.botComments(), "\n")
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("secret %q leaked into logs or comments", s[:6])
		}
	}
	if !strings.Contains(string(logs), "task done") {
		t.Errorf("log file lacks the task's end:\n%s", logs)
	}
}

// checkFailed: failed label, an error comment, never the done label.
func checkFailed(t *testing.T, e *env, wantInComment string) {
	t.Helper()
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent failed"}) {
		t.Errorf("final labels %v, want [bug, coding agent failed]", l)
	}
	c := e.botComments()
	if len(c) == 0 || !strings.Contains(c[len(c)-1], "## ❌ coding-agent") || !strings.Contains(c[len(c)-1], wantInComment) {
		t.Errorf("last comment should report the failure (%q): %q", wantInComment, c)
	}
	if rec := e.record(); rec.Status != task.Failed || !strings.Contains(rec.Error, wantInComment) {
		t.Errorf("store record %+v", rec)
	}
}

func TestModelDownFailsAfterFourAttempts(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitLab, kind: task.Issue, provider: config.ProviderOllama,
		respond: func(*env, llmtest.Received) llmtest.Step { return llmtest.Fault{Status: 503} }})
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	if n := len(e.model.Requests()); n != 4 {
		t.Fatalf("%d model requests, want 4 (3 retries)", n)
	}
	checkFailed(t, e, "503")
}

func TestForgeTransient5xxIsRetried(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true})
	e.gh.Inject(forgetest.Fault{Method: "GET", Path: "/repos/acme/app/issues/1", Status: 502, Times: 3})
	e.gh.Inject(forgetest.Fault{Method: "POST", Path: "/comments", Status: 502, Times: 1, AfterServe: true})
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	checkDone(t, e, config.ProviderOpenAI, true) // the comment that landed despite the 502 is not posted twice
}

func TestForgePersistent5xxFailsVisibly(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitLab, kind: task.MergeRequest, provider: config.ProviderOpenAI})
	e.gl.Inject(forgetest.Fault{Method: "POST", Path: "/notes", Status: 500, Times: -1})
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent failed"}) {
		t.Errorf("final labels %v, want [bug, coding agent failed]", l)
	}
	if rec := e.record(); rec.Status != task.Failed || !strings.Contains(rec.Error, "posting step comment") {
		t.Errorf("store record %+v", rec)
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("%d model requests; the task must stop when it cannot report", n)
	}
}

func TestUnreachableForgeAtStartIsAnError(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	e.gh.Inject(forgetest.Fault{Method: "GET", Path: "/repos/acme/app/issues", Status: 500, Times: -1})
	if err := e.run(context.Background()); err == nil || !strings.Contains(err.Error(), "discovering tasks") {
		t.Fatalf("err = %v, want a discovery error", err)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("%d model requests, want none", n)
	}
}

// A model server that does not answer stops `run` at its start, before any
// task is claimed (the task keeps its bot label for a later run), on
// either wire.
func TestUnreachableModelAtStartIsAnError(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, provider := range []string{config.ProviderOpenAI, config.ProviderOllama, config.ProviderLMStudio} {
		t.Run(provider, func(t *testing.T) {
			e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: provider})
			down := unreachable(t)
			e.cfg.LLM.OpenAI.BaseURL, e.cfg.LLM.Ollama.Endpoint, e.cfg.LLM.LMStudio.BaseURL = down+"/v1", down, down+"/v1"
			err := e.run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "model server at "+down) || !strings.Contains(err.Error(), "does not answer") {
				t.Fatalf("run = %v, want the model server named as not answering", err)
			}
			if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent"}) {
				t.Errorf("labels %v: the task was touched", l)
			}
		})
	}
}

// An MCP server that dies mid-call: the model is told, the server is
// restarted, and the task goes on.
func TestMCPServerCrashIsSurvived(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			switch toolResults(r) {
			case 0:
				return e.call(r, "Crashing the server.", "t/crash", map[string]any{})
			case 1:
				return e.call(r, "Echoing.", "t/echo", map[string]any{"text": "still here"})
			}
			return done("Survived.")
		}})
	e.cfg.MCPServers = append(e.cfg.MCPServers, config.MCPServer{Name: "t", Command: []string{mcptest.Build(t)}})
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	reqs := e.model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	afterCrash := reqs[1].Messages[len(reqs[1].Messages)-1].Content
	if !strings.Contains(afterCrash, "crashed") {
		t.Errorf("the model was not told of the crash:\n%s", afterCrash)
	}
	afterEcho := reqs[2].Messages[len(reqs[2].Messages)-1].Content
	if !strings.Contains(afterEcho, "still here") || strings.Contains(afterEcho, "reported an error") {
		t.Errorf("the restarted server did not answer:\n%s", afterEcho)
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent done"}) {
		t.Errorf("final labels %v", l)
	}
}

// An MCP server that stops answering (issue 10, item 7): the call times out,
// the model is told the server was restarted, and the next task of the same
// process reaches the fresh server instead of timing out too.
func TestHungMCPServerIsReplacedForTheNextTask(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	const second = "Echo something"
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if toolResults(r) > 0 {
				return done("Finished.")
			}
			if strings.Contains(r.Messages[1].Content, second) {
				return e.call(r, "Echoing.", "t/echo", map[string]any{"text": "fresh server"})
			}
			return e.call(r, "Calling the hanging tool.", "t/hang", map[string]any{})
		}})
	e.cfg.Tools.CallTimeoutSeconds = 1 // a real wait: the timeout of the code under test
	e.cfg.MCPServers = append(e.cfg.MCPServers, config.MCPServer{Name: "t", Command: []string{mcptest.Build(t)}})
	n := e.gh.AddIssue("acme/app", forgetest.IssueSeed{Title: second, Body: "Echo it.", Author: "alice", Labels: []string{"coding agent"}})
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	var first, next string // the tool results each task's model read
	for _, r := range e.model.Requests() {
		for _, m := range r.Messages[2:] {
			if !strings.HasPrefix(m.Content, engine.ResultPrefix) {
				continue
			}
			if strings.Contains(r.Messages[1].Content, second) {
				next = m.Content
			} else {
				first = m.Content
			}
		}
	}
	if !strings.Contains(first, "t/hang timed out") || !strings.Contains(first, `MCP server "t" was restarted`) {
		t.Errorf("the first task was not told of the timeout and the restart:\n%s", first)
	}
	if !strings.Contains(next, "fresh server") || strings.Contains(next, "reported an error") {
		t.Errorf("the second task's echo did not reach a working server:\n%s", next)
	}
	if l := e.gh.Labels("acme/app", n); !slices.Contains(l, "coding agent done") {
		t.Errorf("the second task's labels %v", l)
	}
}

// mcp_servers[].tools.deny withholds a tool of the real filesystem server:
// it is in neither the catalog nor the tools field, and a call to it is
// answered as for an unknown tool, on both reply protocols.
func TestDeniedToolIsNeitherOfferedNorRun(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, native := range []bool{false, true} {
		t.Run(fmt.Sprintf("native=%v", native), func(t *testing.T) {
			e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: native, npm: true,
				respond: func(e *env, r llmtest.Received) llmtest.Step {
					if toolResults(r) > 0 {
						return done("Could not write.")
					}
					if !native {
						return e.call(r, "Writing hello.txt.", "fs/write_file", map[string]any{"path": "hello.txt", "content": "hi"})
					}
					return llmtest.Reply{Content: "Writing hello.txt.", ToolCalls: []llmtest.Call{{Name: "fs/write_file",
						Args: map[string]any{"path": "hello.txt", "content": "hi"}}}}
				}})
			e.cfg.MCPServers[0].Tools = config.ToolFilter{Allow: []string{"*file*", "list_*"}, Deny: []string{"write_*", "*media*"}}
			if err := e.run(context.Background()); err != nil {
				t.Fatalf("run: %v", err)
			}
			reqs := e.model.Requests()
			// The call, the done, and the done again after the loop's
			// question: the last call failed (unknown tool).
			if len(reqs) != 3 {
				t.Fatalf("%d model requests, want 3", len(reqs))
			}
			sys := reqs[0].Messages[0].Content
			for _, offered := range []string{"fs/read_text_file", "fs/edit_file", "fs/list_directory"} {
				if !strings.Contains(sys, offered) {
					t.Errorf("the catalog lacks %s", offered)
				}
			}
			for _, withheld := range []string{"write_file", "read_media_file", "directory_tree", "create_directory"} {
				if strings.Contains(sys, withheld) || slices.Contains(reqs[0].ToolNames, "fs__"+withheld) {
					t.Errorf("withheld tool %s is offered", withheld)
				}
			}
			if native != (len(reqs[0].ToolNames) > 0) {
				t.Errorf("tools field %v with native=%v", reqs[0].ToolNames, native)
			}
			answer := reqs[1].Messages[len(reqs[1].Messages)-1].Content
			if !strings.Contains(answer, `Unknown tool "write_file" on MCP server "fs"`) {
				t.Errorf("the call to the denied tool was answered:\n%s", answer)
			}
			if _, err := os.Stat(filepath.Join(e.workspace, "hello.txt")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the denied tool ran: %v", err)
			}
		})
	}
}

func TestMCPServerThatCannotStartIsAStartupError(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	e.cfg.MCPServers = append(e.cfg.MCPServers, config.MCPServer{Name: "broken", Command: []string{"/nonexistent/mcp-server"}})
	err := e.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"broken"`) {
		t.Fatalf("err = %v, want a startup error naming the server", err)
	}
	if l := e.labels(); !slices.Contains(l, "coding agent") {
		t.Errorf("nothing should be claimed when the run cannot start: %v", l)
	}
}

// Two runs started at the same moment on one state directory: the task is
// processed once.
func TestConcurrentRunsProcessOnce(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { errs[i] = e.run(context.Background()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := len(e.model.Requests()); n != 2 {
		t.Fatalf("%d model requests, want 2 (one task, two turns); labels %v; the log ends:\n%s", n, e.labels(), logTail(e, 60))
	}
	if c := e.botComments(); len(c) != 2 {
		t.Fatalf("bot comments %q, want 2", c)
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent done"}) {
		t.Errorf("final labels %v", l)
	}
}

// A second run finds nothing to do: a finished task is never processed twice.
func TestFinishedTaskIsNotProcessedAgain(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitLab, kind: task.Issue, provider: config.ProviderOllama})
	for range 2 {
		if err := e.run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.model.Requests()); n != 2 {
		t.Fatalf("%d model requests, want 2", n)
	}
	if c := e.botComments(); len(c) != 2 {
		t.Fatalf("bot comments %q, want the first run's 2", c)
	}
	if rec := e.record(); rec.Status != task.Done || rec.Counters.LLMCalls != 2 {
		t.Fatalf("record %+v", rec)
	}
}

// LM Studio speaks the OpenAI wire format with its own base URL.
func TestLMStudio(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderLMStudio})
	if err := e.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if reqs := e.model.Requests(); len(reqs) != 2 || reqs[0].Model != "local-model" {
		t.Fatalf("requests %d, model %q", len(reqs), reqs[0].Model)
	}
}

// The done label cannot be set (the forge fails every attempt): the task is
// not left without a final label; the next run sets it without asking the
// model again or posting again.
func TestFinalLabelFailureIsFinishedByTheNextRun(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if toolResults(r) == 0 {
				return writeThenDone(e, r)
			}
			// Every attempt to add the done label will fail.
			e.gh.Inject(forgetest.Fault{Method: "POST", Path: "/issues/1/labels", Status: 500, Times: 4})
			return done("Created hello.txt with a greeting.")
		}})
	if err := e.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent processing"}) {
		t.Fatalf("labels after the failed finish %v: processing must stay until a final label is set", l)
	}
	if rec := e.record(); rec.Status != task.Queued {
		t.Fatalf("after the failed finish: %+v", rec)
	}
	if err := e.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkDone(t, e, config.ProviderOpenAI, false)
}

// A task done in an earlier round and asked for again: when this round
// fails, the old done label goes.
func TestOldDoneLabelIsRemovedWhenTheNewRoundFails(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(*env, llmtest.Received) llmtest.Step { return llmtest.Reply{Content: "?"} }})
	e.gh.AddLabelDirect(e.ref.Repo, e.ref.Number, "coding agent done")
	if err := e.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkFailed(t, e, "5 unusable replies")
}
