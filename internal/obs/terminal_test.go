package obs

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The terminal shows an operator one line per task event and every error,
// secrets redacted, whatever the file's level; nothing else.
func TestTerminalShowsTaskEvents(t *testing.T) {
	var out strings.Builder
	log, closer, err := NewLogger(LogOptions{File: t.TempDir() + "/a.log", Level: "warn", Secrets: []string{"s3cretvalue123"}, Terminal: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	task := log.With("task", "github:acme/app#1")
	task.Info("claimed task")
	task.Info("working on task", "title", "Add a file\nwith two lines", "url", "https://github.com/acme/app/issues/1")
	task.Info("tool call", "phase", "", "tool", "fs/write_file", "is_error", false, "bytes", 10)
	task.Info("tool call", "phase", "", "tool", "fs/read_file", "is_error", true)
	task.Debug("git", "command", "fetch", "took", time.Second)
	task.Info("some detail the log keeps")
	task.Info("task done", "status", "done", "reason", "")
	other := log.With("task", "gitlab:acme/app#2")
	other.Error("task failed", "status", "failed", "reason", "the model answered 503 with key s3cretvalue123")
	other.Info("task paused", "status", "paused", "reason", "the paused label was added")
	log.Error("polling pass failed; retrying at the next tick", "error", "forge unreachable")
	task.Warn("could not remove every label while claiming")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"github:acme/app#1 claimed",
		"github:acme/app#1 working: Add a file",
		"github:acme/app#1   step: fs/write_file",
		"github:acme/app#1   step: fs/read_file (error)",
		"github:acme/app#1 done https://github.com/acme/app/issues/1",
		"gitlab:acme/app#2 failed: the model answered 503 with key [REDACTED]",
		"gitlab:acme/app#2 paused: the paused label was added",
		"error: polling pass failed; retrying at the next tick: forge unreachable",
		"github:acme/app#1 warning: could not remove every label while claiming",
	}
	if len(lines) != len(want) {
		t.Fatalf("terminal lines:\n%s\nwant %d lines", out.String(), len(want))
	}
	for i, l := range lines {
		if _, rest, ok := strings.Cut(l, " "); !ok || rest != want[i] {
			t.Errorf("line %d = %q, want a time then %q", i, l, want[i])
		}
	}
}

// A duration is written one way, whether logged as a time.Duration or as
// its text.
func TestDurationsHaveOneFormat(t *testing.T) {
	file := t.TempDir() + "/a.log"
	log, closer, err := NewLogger(LogOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("a", "took", 1500*time.Millisecond, "grace", (1500 * time.Millisecond).String())
	closer.Close()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"took":"1.5s","grace":"1.5s"`) {
		t.Errorf("log line %s: want both durations as 1.5s", b)
	}
}

// The terminal says what a daemon does besides tasks: what it listens on
// and watches as it starts, that it is idle, that it stops and why; what a
// run found to do; and each error once, whole: the command's own failure
// is printed by the command as it exits, so the terminal leaves it out,
// and a record that leads to it ("fatal") is shown without it.
func TestTerminalSaysWhatTheDaemonDoes(t *testing.T) {
	var out strings.Builder
	log, closer, err := NewLogger(LogOptions{File: t.TempDir() + "/a.log", Terminal: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	log = log.With("host", "h1", "pid", 7)
	log.Info("listening", "address", "127.0.0.1:8080", "github_webhook", true, "gitlab_webhook", false)
	log.Info("serving", "forge", "github", "watching", "acme/app, acme/lib", "label", "coding agent", "mode", "plain",
		"workers", 2, "interval", "1m0s")
	log.Info("idle", "label", "coding agent", "interval", "1m0s")
	log.Error("polling pass failed; retrying at the next tick", "error", "first line\nsecond line", "interval", "1m0s")
	log.Error("the consumer stopped; polling stops too", "error", "disk full", "fatal", true)
	log.Info("shutting down: the tasks in hand stop at their next checkpoint, or are cut", "grace", "30s",
		"reason", "interrupt signal received")
	log.Info("serve stopped", "reason", "interrupt signal received")
	log.Info("serve stopped", "reason", "error")
	log.Info("run: nothing to do", "forge", "gitlab", "watching", "group acme", "label", "coding agent")
	log.Error(CommandFailed, "command", "run", "error", "discovering tasks: 401")
	want := []string{
		"listening on 127.0.0.1:8080: GitHub webhooks at /webhooks/github, /healthz, /readyz, /metrics",
		`watching github acme/app, acme/lib for "coding agent" (plain mode, 2 workers), looking every 1m0s`,
		`idle: nothing labelled "coding agent" to work on; looking again every 1m0s`,
		"error: polling pass failed; retrying at the next tick: first line",
		"    second line",
		"error: the consumer stopped; polling stops too",
		"stopping (interrupt signal received): the tasks in hand stop at their next checkpoint (grace 30s)",
		"stopped: interrupt signal received",
		"stopped by the error below",
		`nothing to do: nothing labelled "coding agent" in gitlab group acme`,
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("terminal lines:\n%s\nwant %d lines", out.String(), len(want))
	}
	for i, l := range lines {
		if strings.HasPrefix(want[i], " ") {
			if l != want[i] {
				t.Errorf("line %d = %q, want %q", i, l, want[i])
			}
			continue
		}
		if _, rest, ok := strings.Cut(l, " "); !ok || rest != want[i] {
			t.Errorf("line %d = %q, want a time then %q", i, l, want[i])
		}
	}
}
