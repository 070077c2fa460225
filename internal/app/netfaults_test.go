package app_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Faults that must not wedge the daemon: answers that are not what they
// should be, and the state store that cannot be written.

// exitBound is how long a command may take to exit before the test calls
// it wedged: far more than shutdown_grace_seconds (1 in these tests) plus
// the notice and the close, far less than the 120 s a hanging step took.
const exitBound = 30 * time.Second

// A forge read answered 200 with its body cut short or with an HTML page is
// retried like a 5xx: a discovery and a task read that get one bad answer
// each, then good ones, make a run that finishes the task as if nothing
// had happened.
func TestBadForgeAnswerIsRetried(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, tc := range []struct {
		name   string
		forge  string
		faults []forgetest.Fault // each answered once, then the request is asked again
	}{
		{"GitHub", task.GitHub, []forgetest.Fault{
			{Method: "GET", Path: "/repos/acme/app/issues", Truncate: true}, // the discovery
			forgetest.HTMLFault("GET", "/repos/acme/app/issues/1", 1),       // the task, re-read before the claim
			{Method: "GET", Path: "/repos/acme/app/issues/1/comments", Truncate: true},
		}},
		{"GitLab", task.GitLab, []forgetest.Fault{
			forgetest.HTMLFault("GET", "/projects/acme%2Fapp/issues", 1),
			{Method: "GET", Path: "/projects/acme%2Fapp/issues/1", Truncate: true},
			forgetest.HTMLFault("GET", "/projects/acme%2Fapp/issues/1/notes", 1),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, setup{forge: tc.forge, kind: task.Issue, provider: config.ProviderOpenAI, native: true})
			for _, f := range tc.faults {
				e.inject(f)
			}
			if err := e.run(context.Background()); err != nil {
				t.Fatalf("run: %v", err)
			}
			checkDone(t, e, config.ProviderOpenAI, true)
			for _, f := range tc.faults {
				if !e.askedAgain(f.Path) {
					t.Errorf("the bad answer to GET %s was not followed by the same request", f.Path)
				}
			}
		})
	}
}

// Four bad answers in a row to the discovery spend its retries: run fails
// (exit 1) saying what was wrong, and nothing is claimed.
func TestFourBadAnswersToTheDiscoveryFailTheRun(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	e.gh.Inject(forgetest.HTMLFault("GET", "/repos/acme/app/issues", 4))
	err := e.run(context.Background())
	if err == nil {
		t.Fatal("run succeeded on four HTML pages")
	}
	for _, want := range []string{"discovering tasks", "not the JSON it should be", "text/html", "<!DOCTYPE html>"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := e.gh.Count("GET", "/repos/acme/app/issues"); n != 4 {
		t.Errorf("%d discovery requests, want 4", n)
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent"}) {
		t.Errorf("labels %v, want the task untouched", l)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("%d model requests, want none", n)
	}
}

// Four cut answers in a row to a task's comments fail that task with a
// reason that says so; the run itself went fine.
func TestFourBadAnswersToATaskReadFailTheTask(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitLab, kind: task.Issue, provider: config.ProviderOpenAI})
	e.gl.Inject(forgetest.Fault{Method: "GET", Path: "/issues/1/notes", Truncate: true, Times: 4})
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	checkFailed(t, e, "cut short in the middle of its JSON")
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("%d model requests, want none", n)
	}
}

// A model answer that stalls mid-body is cut at llm.timeout_seconds and
// asked again, as a 5xx is: the retry is the same turn (the same request,
// counted once), and the task finishes.
func TestStalledModelAnswerIsRetried(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, provider := range []string{config.ProviderOpenAI, config.ProviderOllama} {
		t.Run(provider, func(t *testing.T) {
			e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: provider, native: true,
				respond: func(e *env, r llmtest.Received) llmtest.Step {
					if r.N == 1 {
						return llmtest.Stall{Then: writeThenDone(e, r)}
					}
					return writeThenDone(e, r)
				}})
			e.cfg.LLM.TimeoutSeconds = 1
			if err := e.run(context.Background()); err != nil {
				t.Fatalf("run: %v", err)
			}
			reqs := e.model.Requests()
			if len(reqs) != 3 || !bytes.Equal(reqs[0].Body, reqs[1].Body) {
				t.Fatalf("%d model requests, want 3: the stalled one asked again as it was, then the next turn", len(reqs))
			}
			if rec := e.record(); rec.Status != task.Done || rec.Counters.LLMCalls != 2 || rec.Counters.ToolCalls != 1 {
				t.Errorf("store record %+v, want done after 2 model calls (the retry is not a turn)", rec)
			}
			if c := e.botComments(); !helloDone(c) {
				t.Errorf("bot comments %q", c)
			}
			e.wantLabels(t, "bug", "coding agent done")
		})
	}
}

// `run` whose store cannot be written (here the kernel refuses every write
// of the process to a file: ulimit -f 0, as a full disk does, while another
// process keeps the database open) exits 1 saying why, and the task it had
// queued says so in a comment instead of sitting in processing; once the
// store can be written, the next run finishes it. `serve` stops polling and
// exits 1 the same way, for its supervisor to restart it.
func TestStoreThatCannotBeWrittenStopsTheCommand(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, command := range []string{"run", "serve"} {
		t.Run(command, func(t *testing.T) {
			e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
			a, err := app.New(context.Background(), e.cfg, app.Options{Sleep: noWait})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Produce(context.Background(), true); err != nil { // claimed and queued, as a producer does
				t.Fatal(err)
			}
			a.Close()
			holder, err := sqlite.Open(context.Background(), e.cfg.StateDir) // the other process
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close()

			code, stderr := runUnwritable(t, e, command)
			if code != 1 {
				t.Fatalf("%s exited %d, want 1\n%s", command, code, stderr)
			}
			if !strings.Contains(stderr, "coding-agent "+command+": state store: ") || !strings.Contains(stderr, "I/O error") {
				t.Errorf("stderr does not give the store's failure:\n%s", stderr)
			}
			if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent processing"}) {
				t.Errorf("labels %v", l)
			}
			if c := e.botComments(); len(c) != 1 || !strings.Contains(c[0], "cannot record its work") || !strings.Contains(c[0], "I/O error") {
				t.Errorf("bot comments %q, want one saying the store cannot be written and why", c)
			}
			if n := len(e.model.Requests()); n != 0 {
				t.Errorf("%d model requests, want none", n)
			}
			holder.Close()

			if err := e.run(context.Background()); err != nil {
				t.Fatalf("run once the store can be written: %v", err)
			}
			if rec := e.record(); rec.Status != task.Done {
				t.Errorf("record %+v, want done", rec)
			}
			e.wantLabels(t, "bug", "coding agent done")
		})
	}
}

// runUnwritable runs `coding-agent command` on e's config in a process that
// may not write to any file (ulimit -f 0) and returns its exit code and
// stderr. A process still running after exitBound is killed: the test fails.
func runUnwritable(t *testing.T, e *env, command string) (int, string) {
	t.Helper()
	return runArgs(t, e, command, "sh", "-c", `ulimit -f 0 && exec "$0" "$@"`, buildBinary(t), command, "--config", writeConfig(t, e.cfg))
}

func (e *env) inject(f forgetest.Fault) {
	e.emu().Inject(f)
}

// askedAgain reports whether the first GET of path (exactly) was followed
// by the same request, query included.
func (e *env) askedAgain(path string) bool {
	var log []forgetest.Request
	prefix := ""
	switch {
	case e.gh != nil:
		log = e.gh.Requests()
	case e.gt != nil:
		log, prefix = e.gt.Requests(), "/api/v1"
	default:
		log, prefix = e.gl.Requests(), "/api/v4"
	}
	i := slices.IndexFunc(log, func(r forgetest.Request) bool { return r.Method == "GET" && r.Path == prefix+path })
	return i >= 0 && i+1 < len(log) && log[i+1].Method == "GET" && log[i+1].Path == log[i].Path && log[i+1].Query == log[i].Query
}

// A model server's error sent with status 200 is retried like a 5xx by the
// daemon's own model client, and the task fails with a comment quoting the
// server's message, not "the reply was empty".
func TestModelErrorIn200IsQuotedInTheFailure(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, tc := range []struct{ provider, body, message string }{
		{config.ProviderOpenAI, `{"error":{"message":"Upstream error: the model is overloaded","type":"server_error"}}`,
			"the server answered status 200 with an error: Upstream error: the model is overloaded"},
		{config.ProviderOllama, `{"error":"model runner has unexpectedly stopped"}`,
			"the server answered status 200 with an error: model runner has unexpectedly stopped"},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: tc.provider,
				respond: func(*env, llmtest.Received) llmtest.Step { return llmtest.Garbage{Body: tc.body} }})
			if err := e.run(context.Background()); err != nil {
				t.Fatalf("run: %v", err)
			}
			if n := len(e.model.Requests()); n != 4 {
				t.Fatalf("%d model requests, want 4 (3 retries)", n)
			}
			checkFailed(t, e, tc.message)
		})
	}
}

// A model server that streams although no stream was asked for is read by
// the daemon's own model client on the first attempt, and the task
// finishes.
func TestUnaskedModelStreamIsRead(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, provider := range []string{config.ProviderOpenAI, config.ProviderOllama} {
		t.Run(provider, func(t *testing.T) {
			e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: provider, native: true,
				respond: func(e *env, r llmtest.Received) llmtest.Step {
					return llmtest.Streamed{Reply: writeThenDone(e, r).(llmtest.Reply), ContentType: "application/json"}
				}})
			if err := e.run(context.Background()); err != nil {
				t.Fatalf("run: %v", err)
			}
			if n := len(e.model.Requests()); n != 2 {
				t.Fatalf("%d model requests, want 2: each stream read on its first attempt", n)
			}
			if c := e.botComments(); !helloDone(c) {
				t.Errorf("bot comments %q", c)
			}
			e.wantLabels(t, "bug", "coding agent done")
		})
	}
}
