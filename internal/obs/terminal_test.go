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
