package app_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// BenchmarkTenTurnTask runs `run` on one GitHub issue with a scripted model
// that answers at once: nine file writes through the real filesystem MCP
// server, then done. The time is therefore the daemon's own (start-up of
// the MCP server included), not the model's. It reports the GitHub API
// requests and model requests per task and the process's peak RSS.
func BenchmarkTenTurnTask(b *testing.B) {
	var ghRequests, modelRequests int
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
			respond: func(e *env, r llmtest.Received) llmtest.Step {
				n := toolResults(r)
				if n < 9 {
					return e.call(r, "Writing file "+strconv.Itoa(n+1)+".", "fs/write_file", map[string]any{
						"path": filepath.Join(e.workspace, "f"+strconv.Itoa(n)+".txt"), "content": strings.Repeat("x", 1000)})
				}
				return done("Wrote nine files.")
			}})
		b.StartTimer()
		if err := e.run(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if l := e.labels(); len(l) != 2 || l[1] != "coding agent done" {
			b.Fatalf("labels %v", l)
		}
		ghRequests = len(e.gh.Requests())
		modelRequests = len(e.model.Requests())
		b.StartTimer()
	}
	b.ReportMetric(float64(ghRequests), "github-requests/op")
	b.ReportMetric(float64(modelRequests), "model-requests/op")
	b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
}

// peakRSSMiB is VmHWM of this process (Linux), 0 elsewhere.
func peakRSSMiB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// cleanFour scripts a planned four-action task that goes right: one
// read-only look, the plan, each action one tool call then its end, the
// interval reflection after three actions, a verification that reads a
// file and passes.
func cleanFour(e *env, r llmtest.Received) llmtest.Step {
	w := where(r)
	switch {
	case w.Phase == "pre-planning" && w.Tools == 0:
		return e.call(r, "", "fs/list_directory", map[string]any{"path": e.workspace})
	case w.Phase == "pre-planning":
		return understanding("")
	case w.Phase == "planning":
		return fourActions("")
	case w.Phase == "execution" && w.Tools == 0 && w.Action == "a2":
		return e.read(r, "", "hello.txt")
	case w.Phase == "execution" && w.Tools == 0:
		return e.write(r, "", w.Action+".txt", strings.Repeat("x", 1000))
	case w.Phase == "execution":
		return actionEnd(w.Action, "completed", "ok", "")
	case w.Phase == "reflection":
		return reflection(false, "on track", "")
	case w.Phase == "verification" && w.Tools == 0:
		return e.read(r, "", "a4.txt")
	case w.Phase == "verification":
		return verification(true, "")
	}
	e.t.Errorf("request %d: unexpected %+v", r.N, w)
	return llmtest.Fault{Status: 400}
}

// BenchmarkPlannedFourActionTask runs `run` in planning mode on one GitHub
// issue with a scripted model that answers at once (cleanFour). It reports
// the model and GitHub requests per task, the comment POSTs and PATCHes
// among the latter, the comments the issue ends with, and peak RSS.
func BenchmarkPlannedFourActionTask(b *testing.B) {
	var gh []forgetest.Request
	var modelRequests, comments int
	for b.Loop() {
		b.StopTimer()
		e := planned(b, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, respond: cleanFour})
		e.hello()
		b.StartTimer()
		if err := e.run(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if l := e.labels(); len(l) != 2 || l[1] != "coding agent done" {
			b.Fatalf("labels %v", l)
		}
		gh, modelRequests, comments = e.gh.Requests(), len(e.model.Requests()), len(e.botComments())
		b.StartTimer()
	}
	count := func(method, path string) (n int) {
		for _, r := range gh {
			if r.Method == method && strings.HasSuffix(r.Path, path) {
				n++
			}
		}
		return n
	}
	b.ReportMetric(float64(len(gh)), "github-requests/op")
	b.ReportMetric(float64(count("POST", "/comments")), "comment-POSTs/op")
	b.ReportMetric(float64(countPrefix(gh, "PATCH")), "comment-PATCHes/op")
	b.ReportMetric(float64(modelRequests), "model-requests/op")
	b.ReportMetric(float64(comments), "comments-on-issue")
	b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
}

func countPrefix(reqs []forgetest.Request, method string) (n int) {
	for _, r := range reqs {
		if r.Method == method {
			n++
		}
	}
	return n
}

// hello puts hello.txt in the workspace, for scripts that read it.
func (e *env) hello() {
	if err := os.WriteFile(filepath.Join(e.workspace, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// BenchmarkJudgeHundredCommentReply times one pass over a task awaiting a
// reply whose thread holds 100 comments (spec 003: judged in under 5 s):
// the reply is the 100th comment, a thanks that ends the conversation. It
// reports the GitHub requests the pass made.
func BenchmarkJudgeHundredCommentReply(b *testing.B) {
	var requests int
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, conversation: true})
		if err := e.run(context.Background()); err != nil {
			b.Fatal(err)
		}
		for i := range 98 {
			who := "bob"
			if i%2 == 0 {
				who = "alice"
			}
			e.addComment(who, strings.Repeat("A long discussion line. ", 20))
		}
		e.addComment("alice", "Thanks, that is all.")
		a, err := app.New(context.Background(), e.cfg, app.Options{Sleep: noWait})
		if err != nil {
			b.Fatal(err)
		}
		before := len(e.gh.Requests())
		b.StartTimer()
		if err := a.Produce(context.Background(), true); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		requests = len(e.gh.Requests()) - before
		a.Close()
		if l := e.labels(); l[len(l)-1] != "coding agent done" {
			b.Fatalf("labels %v", l)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(requests), "github-requests/op")
}

// BenchmarkTwentyTasksAtOnce runs 20 labelled issues with 20 workers: each
// task makes one tool call and is done. Without a workspace the call goes
// to the filesystem server shared by the process; with the built-in tools
// each task clones its checkout, writes a file and runs `true` in its
// sandbox, and its work is delivered. peak-MB is the test process's peak
// resident memory during the run (the sandbox helpers are processes of
// their own, short-lived).
func BenchmarkTwentyTasksAtOnce(b *testing.B) {
	for _, v := range []struct {
		name             string
		builtin, deliver bool
		npm              bool // the npm filesystem server per task, the quickstart's tools before the built-in ones
	}{{"without-workspace", false, false, false}, {"builtin-tools-no-delivery", true, false, false}, {"builtin-tools", true, true, false},
		{"npm-filesystem-per-task", false, true, true}} {
		builtin := v.builtin
		b.Run(v.name, func(b *testing.B) {
			var peak float64
			for b.Loop() {
				b.StopTimer()
				e := newEnv(b, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true, npm: v.npm,
					respond: func(e *env, r llmtest.Received) llmtest.Step {
						switch n := toolResults(r); {
						case n == 0 && builtin:
							return e.call(r, "Writing.", "workspace/write_file", map[string]any{"path": "hello.txt", "content": "hi\n"})
						case n == 1 && builtin:
							return e.call(r, "Running.", "workspace/run_command", map[string]any{"command": "true"})
						case n == 0 && v.npm:
							ref := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: taskNumber(b, r)}
							return e.call(r, "Writing.", "fs/write_file", map[string]any{
								"path": filepath.Join(e.checkout(b, ref), "hello.txt"), "content": "hi\n"})
						case n == 0:
							return e.call(r, "Writing.", "fs/write_file", map[string]any{
								"path": filepath.Join(e.workspace, "hello-"+strconv.Itoa(taskNumber(b, r))+".txt"), "content": "hi\n"})
						}
						return done("Done.")
					}})
				if builtin {
					builtinOnly(b, e)
					e.cfg.Delivery.Enabled = v.deliver
				}
				if v.npm {
					e.cfg.MCPServers[0].Scope, e.cfg.MCPServers[0].Command[1] = config.ScopeTask, "${WORKSPACE}"
					e.cfg.Workspace.Root = filepath.Join(filepath.Dir(e.cfg.StateDir), "workspaces")
				}
				e.cfg.Continuous.Consumer.Workers = 20
				for i := 1; i < 20; i++ {
					e.gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "Task " + strconv.Itoa(i), Body: "Write hello.txt.",
						Author: "alice", Labels: []string{"coding agent"}})
				}
				debug.FreeOSMemory()
				_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets the peak (VmHWM)
				b.StartTimer()
				if err := e.run(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				peak = max(peak, vmHWM(b))
				if n := doneTasks(e); n != 20 {
					b.Fatalf("%d of 20 tasks done", n)
				}
				b.StartTimer()
			}
			b.ReportMetric(peak, "peak-MB")
		})
	}
}

// vmHWM is the process's peak resident memory in MB.
func vmHWM(b *testing.B) float64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// doneTasks counts the repository's issues labelled done.
func doneTasks(e *env) int {
	n := 0
	for i := 1; i <= 40; i++ {
		if slices.Contains(e.gh.Labels("acme/app", i), "coding agent done") {
			n++
		}
	}
	return n
}
