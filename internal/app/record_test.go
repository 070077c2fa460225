package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/record"
	"github.com/coding-agent/coding-agent/internal/sanitize"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// With llm.record set, a task's model traffic lands in the file: each
// attempt a line under the task's ref, the one a 503 answered too. The
// model's replies quote the forge token and the API key, its tool call
// echoes them, so the requests carry them back; neither is in the file,
// in any form, and the file is the user's alone.
func TestRecordHoldsTheTaskRedacted(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			leak := "the token is " + e.gh.Token + " and the key " + apiKey
			switch {
			case r.N == 1:
				return llmtest.Fault{Status: 503, Body: `{"error": {"message": "busy, ` + leak + `"}}`}
			case toolResults(r) == 0:
				return e.call(r, "Echoing. "+leak, "t/echo", map[string]any{"text": leak})
			}
			return done("Done. " + leak)
		}})
	e.cfg.MCPServers = []config.MCPServer{{Name: "t", Command: []string{mcptest.Build(t)}}}
	path := filepath.Join(t.TempDir(), "recordings", "model.jsonl")
	e.cfg.LLM.Record = path
	if err := e.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := e.run(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.wantLabels(t, "bug", "coding agent done")

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, secret := range map[string]string{"the GitHub token": e.gh.Token, "the API key": apiKey} {
		if w := mcptest.Leaked(string(data), secret); w != "" {
			t.Errorf("%s is in the recording: %q", name, w)
		}
		carried := false
		for _, r := range e.model.Requests() {
			carried = carried || strings.Contains(string(r.Body), secret) || strings.Contains(r.Header.Get("Authorization"), secret)
		}
		if !carried {
			t.Errorf("no request carried %s: the test proves nothing", name)
		}
	}
	if !strings.Contains(string(data), sanitize.Redacted) {
		t.Errorf("the recording replaced nothing:\n%s", data)
	}
	lines := llmtest.ReadRecording(t, path)
	for _, l := range lines {
		if l.Task != e.ref.String() || l.Wire != record.WireOpenAI {
			t.Errorf("line of task %q on wire %q (%s %s), want %s on openai", l.Task, l.Wire, l.Method, l.Path, e.ref)
		}
	}
	if n := len(e.model.Requests()); len(lines) != n || n != 3 || lines[0].Status != 503 {
		t.Errorf("%d lines (the first answered %d), %d requests: want one line for each of the 3 attempts, the 503 first", len(lines), lines[0].Status, n)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the recording's mode %v, %v; want 0600", fi.Mode(), err)
	}
}
