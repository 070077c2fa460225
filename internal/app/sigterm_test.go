//go:build unix

package app_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// SIGTERM while a model request hangs: the request is cancelled once
// shutdown_grace_seconds is over, run exits, the task is left queued (it
// says so on the task), and the next run asks the same request again from
// the checkpoint and finishes. The cancelled request is no model call of
// the task.
func TestSIGTERMCutsAHangingModelRequest(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	arrived := make(chan struct{})
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if r.N == 2 {
				return llmtest.Slow{Arrived: arrived} // answers nothing until the client goes away
			}
			return writeThenDone(e, r)
		}})
	e.cfg.ShutdownGraceSeconds = 1
	took, stderr := runTerminated(t, e, arrived)
	t.Logf("run exited %s after SIGTERM (shutdown_grace_seconds: %d)", took.Round(time.Millisecond), e.cfg.ShutdownGraceSeconds)
	wantLeftToResume(t, e, stderr, 1)

	if err := e.run(context.Background()); err != nil {
		t.Fatalf("the next run: %v", err)
	}
	reqs := e.model.Requests()
	if len(reqs) != 3 || !bytes.Equal(reqs[1].Body, reqs[2].Body) {
		t.Fatalf("%d model requests, want 3: the cut one asked again as it was", len(reqs))
	}
	if rec := e.record(); rec.Status != task.Done || rec.Counters.LLMCalls != 2 || rec.Counters.ToolCalls != 1 {
		t.Errorf("record %+v, want done after 2 model calls and 1 tool call", rec)
	}
	e.wantLabels(t, "bug", "coding agent done")
}

// SIGTERM while a tool call hangs: the call is cancelled once
// shutdown_grace_seconds is over, run exits, the task is left queued, and
// the next run does the call again (from the checkpoint holding the reply,
// without asking the model again) and finishes.
func TestSIGTERMCutsAHangingToolCall(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	started := filepath.Join(t.TempDir(), "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if toolResults(r) == 0 {
				return e.call(r, "Waiting.", "t/sleep", map[string]any{"ms": 600000})
			}
			return done("Waited.")
		}})
	e.cfg.MCPServers = append(e.cfg.MCPServers, config.MCPServer{Name: "t", Command: []string{mcptest.Build(t)},
		Env: map[string]string{"MCPTEST_SLEEP_STARTED": started}})
	e.cfg.ShutdownGraceSeconds = 1
	first := announced(started)
	took, stderr := runTerminated(t, e, first.arrived)
	t.Logf("run exited %s after SIGTERM (shutdown_grace_seconds: %d)", took.Round(time.Millisecond), e.cfg.ShutdownGraceSeconds)
	wantLeftToResume(t, e, stderr, 1)

	// The server started again redoes the call at once.
	e.cfg.MCPServers[1].Env["MCPTEST_MAX_SLEEP_MS"] = "1"
	again := announced(started)
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("the next run: %v", err)
	}
	if got := again.wait(started); got != "sleeping\n" {
		t.Errorf("the call was not done again (the server announced %q)", got)
	}
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2: the reply with the call is not asked again", len(reqs))
	}
	if last := reqs[1].Messages[len(reqs[1].Messages)-1].Content; !strings.HasPrefix(last, engine.ResultPrefix+"t/sleep") ||
		!strings.Contains(last, "slept 1 ms") {
		t.Errorf("the last request does not carry the redone call's result:\n%s", last)
	}
	if rec := e.record(); rec.Status != task.Done || rec.Counters.LLMCalls != 2 || rec.Counters.ToolCalls != 1 {
		t.Errorf("record %+v, want done after 2 model calls and 1 tool call", rec)
	}
	if c := e.botComments(); len(c) != 3 || !living(c[0], "Waiting.") || !strings.HasPrefix(c[2], "Waited.\n\nNo command was run") {
		t.Errorf("bot comments %q", c)
	}
}

// runTerminated starts `coding-agent run` on e's config in its own process,
// sends it SIGTERM once arrived is closed, and waits for it to exit, at
// most exitBound. It returns how long the exit took and its stderr.
func runTerminated(t *testing.T, e *env, arrived <-chan struct{}) (time.Duration, string) {
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
		t.Fatalf("run exited before the step began: %v\n%s", err, stderr)
	}
	signalled := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("run after SIGTERM: %v\n%s", err, stderr)
		}
		return time.Since(signalled), stderr.String()
	case <-time.After(exitBound):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("run did not exit within %s of SIGTERM\n%s", exitBound, stderr)
	}
	return 0, ""
}

// wantLeftToResume checks a task whose run was terminated: queued in the
// store, still labelled processing, the interruption said on the task after
// the step comments before it.
func wantLeftToResume(t *testing.T, e *env, stderr string, stepComments int) {
	t.Helper()
	if rec := e.record(); rec.Status != task.Queued {
		t.Errorf("after SIGTERM: %+v, want queued\n%s", rec, stderr)
	}
	if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent processing"}) {
		t.Errorf("labels after SIGTERM %v", l)
	}
	if c := e.botComments(); len(c) != stepComments+1 || !strings.Contains(c[stepComments], "stopped while working") {
		t.Errorf("comments after SIGTERM %q, want the interruption said after %d step comment(s)", c, stepComments)
	}
}

// announcement reads one line the sleep tool writes to a named pipe.
type announcement struct {
	arrived chan struct{}
	got     string
}

// announced waits in the background for the sleep tool to announce its
// start on the pipe at path.
func announced(path string) *announcement {
	a := &announcement{arrived: make(chan struct{})}
	go func() {
		b, _ := os.ReadFile(path) // opening the pipe waits for the writer
		a.got = string(b)
		close(a.arrived)
	}()
	return a
}

// wait returns what was announced; when nothing was, it releases the
// reader (a writer that writes nothing) and returns "".
func (a *announcement) wait(path string) string {
	select {
	case <-a.arrived:
	default:
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-a.arrived
	}
	return a.got
}
