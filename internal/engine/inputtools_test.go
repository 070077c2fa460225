package engine_test

import (
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// A run's tool calls go to its Input.Tools, a task's session of the host,
// while the catalog is the engine's: two runs of one engine read each its
// own workspace from its own instance of the task-scoped server, and a run
// without Input.Tools calls the engine's Tools, which has no instance.
func TestRunCallsGoToItsInputTools(t *testing.T) {
	h, err := toolhost.Start(t.Context(), toolhost.Options{Servers: []toolhost.ServerConfig{{Name: "test",
		Scope: toolhost.ScopeTask, Command: []string{mcptest.Build(t)}, Env: map[string]string{"WS": "${WORKSPACE}"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	srv := llmtest.NewServer(t, llmtest.Options{})
	w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
	e, err := engine.New(engine.Options{LLM: client(t, llmtest.WireOpenAI, srv), Tools: h, State: w})
	if err != nil {
		t.Fatal(err)
	}
	l, err := agent.New(e, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	workspaces := []string{t.TempDir(), t.TempDir(), ""}
	for i, ws := range workspaces {
		srv.Script(llmtest.Reply{Content: cmd("test/env", `{"name": "WS"}`, "Reading WS.")},
			llmtest.Reply{Content: `{"done": true, "comment": "Read it."}`})
		if ws == "" { // a done right after a failed call is questioned once
			srv.Script(llmtest.Reply{Content: `{"done": true, "comment": "Read it."}`})
		}
		r := ref
		r.Number = i + 1
		in := engine.Input{Task: task.Task{Ref: r, Title: "Read WS", Body: "Call test/env."}, Post: w}
		if ws != "" {
			s, err := h.ForTask(t.Context(), toolhost.TaskVars{Workspace: ws, TaskRef: r.String(), Branch: "b"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			in.Tools = s
		}
		first := len(srv.Requests())
		if out, err := l.Run(t.Context(), in); err != nil || out.End != engine.Done {
			t.Fatalf("run %d: %+v, %v", i+1, out, err)
		}
		// The request after the call ends with its result.
		msgs := srv.Requests()[first+1].Messages
		result := msgs[len(msgs)-1].Content
		want := ws
		if ws == "" {
			want = `MCP server "test" runs one instance per task`
		}
		if !strings.Contains(result, want) {
			t.Errorf("run %d: the tool result %q does not hold %q", i+1, result, want)
		}
	}
}
