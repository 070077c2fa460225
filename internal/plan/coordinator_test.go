package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

type noLLM struct{ calls int }

func (n *noLLM) Chat(context.Context, llm.Request) (llm.Response, error) {
	n.calls++
	return llm.Response{}, fmt.Errorf("no model in this test")
}

type noTools struct{}

func (noTools) Tools() []toolhost.Tool           { return nil }
func (noTools) Servers() []toolhost.ServerConfig { return nil }
func (noTools) Call(context.Context, string, json.RawMessage) (toolhost.Result, error) {
	return toolhost.Result{}, fmt.Errorf("no tools in this test")
}

type memState struct {
	mu sync.Mutex
	cp map[task.Ref]store.Checkpoint
}

func (m *memState) SaveCheckpoint(_ context.Context, ref task.Ref, cp store.Checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cp[ref] = cp
	return nil
}

func (m *memState) LoadCheckpoint(_ context.Context, ref task.Ref) (store.Checkpoint, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp, ok := m.cp[ref]
	return cp, ok, nil
}

func (m *memState) AddCounters(context.Context, task.Ref, store.Counters) error { return nil }

type memForge struct {
	mu    sync.Mutex
	posts []string
}

func (f *memForge) PostComment(_ context.Context, _ task.Ref, body string) (task.Comment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.posts = append(f.posts, body)
	return task.Comment{ID: int64(len(f.posts))}, nil
}

func (f *memForge) EditComment(context.Context, task.Ref, int64, string) error { return nil }

var testRef = task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 3}

func newTestCoordinator(t *testing.T, st *memState, f *memForge, model llm.Client) *Coordinator {
	t.Helper()
	c, err := New(Options{LLM: model, Tools: noTools{}, State: st, Forge: f, Settings: DefaultSettings(),
		Lang: report.English, HistoryDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A checkpoint of the plain loop (no mode) is not resumed in planning mode:
// the run starts over instead of failing on it forever.
func TestPlainLoopCheckpointStartsOver(t *testing.T) {
	st := &memState{cp: map[task.Ref]store.Checkpoint{testRef: {Data: []byte(
		`{"version":1,"turn":3,"messages":[{"role":"system","content":"plain"},{"role":"user","content":"task"}]}`)}}}
	c := newTestCoordinator(t, st, &memForge{}, &noLLM{})
	r, err := c.start(context.Background(), agent.Input{Task: task.Task{Ref: testRef, Title: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.st.Mode != modePlanning || r.st.Phase != report.PhasePrePlanning || r.st.Messages[0].Content != c.system {
		t.Errorf("state after a plain-loop checkpoint: mode %q phase %q", r.st.Mode, r.st.Phase)
	}
}

// A checkpoint whose phase needs a plan but has none is not resumed.
func TestInconsistentCheckpointStartsOver(t *testing.T) {
	data, _ := json.Marshal(state{Version: stateVersion, Mode: modePlanning, Phase: report.PhaseExecution, Current: "a1",
		Messages: []llm.Message{{Role: llm.System, Content: "x"}}})
	st := &memState{cp: map[task.Ref]store.Checkpoint{testRef: {Data: data}}}
	c := newTestCoordinator(t, st, &memForge{}, &noLLM{})
	r, err := c.start(context.Background(), agent.Input{Task: task.Task{Ref: testRef}})
	if err != nil {
		t.Fatal(err)
	}
	if r.st.Phase != report.PhasePrePlanning || r.st.Plan != nil {
		t.Errorf("resumed an execution checkpoint without a plan: %+v", r.st.Phase)
	}
}

// A run that ended before its closing comment was posted posts it on
// resume, once, without asking the model.
func TestEndedRunAnnouncesOnce(t *testing.T) {
	out := agent.Outcome{Status: task.Done, Turns: 7, Reported: true}
	data, _ := json.Marshal(state{Version: stateVersion, Mode: modePlanning, Phase: report.PhaseVerification,
		Plan: &Plan{}, Final: &out, Messages: []llm.Message{{Role: llm.System, Content: "x"}}})
	st := &memState{cp: map[task.Ref]store.Checkpoint{testRef: {Data: data}}}
	f, model := &memForge{}, &noLLM{}
	c := newTestCoordinator(t, st, f, model)
	for i := 0; i < 2; i++ {
		got, err := c.Run(context.Background(), agent.Input{Task: task.Task{Ref: testRef}})
		if err != nil || got.Status != task.Done || got.Turns != 7 {
			t.Fatalf("run %d: %+v, %v", i+1, got, err)
		}
	}
	closing := 0
	for _, p := range f.posts {
		if strings.Contains(p, "Task completed") {
			closing++
		}
	}
	if closing != 1 || model.calls != 0 {
		t.Errorf("%d closing comments and %d model calls; want 1 and 0 (posts %q)", closing, model.calls, f.posts)
	}
}
