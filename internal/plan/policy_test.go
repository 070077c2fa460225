package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
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

// CommentsSince has nothing for a run that resumes to find: these tests
// kill no process after a comment landed (engine/resume_test.go does).
func (f *memForge) CommentsSince(context.Context, task.Ref, time.Time) ([]task.Comment, error) {
	return nil, nil
}

func (f *memForge) BotUser(context.Context) (string, error) { return "coding-agent", nil }

var testRef = task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 3}

// testSettings are config's defaults of the planning section.
func testSettings() Settings {
	return Settings{MaxSubtasks: 100, DecompositionLevel: "moderate", PrePlanning: true, MaxGatherCalls: 10,
		MaxCallsPerAction: 20, MaxAttempts: 2, Reflection: true, ReflectOnError: true, ReflectEvery: 3,
		MaxRevisions: 3, Verification: true, MaxVerifyRounds: 2, MaxReplans: 1, CallComments: true}
}

func newTestCoordinator(t *testing.T, st *memState, f *memForge, model llm.Client) *Coordinator {
	t.Helper()
	e, err := engine.New(engine.Options{LLM: model, Tools: noTools{}, State: st})
	if err != nil {
		t.Fatal(err)
	}
	s := testSettings()
	s.HistoryDir = t.TempDir()
	c, err := New(Options{Engine: e, Forge: f, Settings: s, Lang: report.English})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pausedAtNext is planning mode ending every run before its first request:
// its state is then as Begin left it.
type pausedAtNext struct{ *policy }

func (pausedAtNext) Next(context.Context) (string, *engine.Outcome, error) {
	return "", &engine.Outcome{End: engine.Paused}, nil
}

// begin runs c on testRef up to its first request and returns the policy.
func begin(t *testing.T, c *Coordinator) *policy {
	t.Helper()
	p := &policy{c: c}
	if out, err := c.o.Engine.Run(context.Background(), engine.Input{Task: task.Task{Ref: testRef, Title: "t"}}, pausedAtNext{p}); err != nil || out.End != engine.Paused {
		t.Fatalf("%+v %v", out, err)
	}
	return p
}

// checkpointOf is what the engine saves, with planning mode's state.
func checkpointOf(t *testing.T, st state, messages ...llm.Message) []byte {
	t.Helper()
	pol, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if messages == nil {
		messages = []llm.Message{{Role: llm.System, Content: "x"}}
	}
	data, err := json.Marshal(map[string]any{"version": 2, "mode": mode, "messages": messages, "policy": json.RawMessage(pol)})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A checkpoint of the plain loop is not resumed in planning mode: the run
// starts over instead of failing on it forever.
func TestPlainLoopCheckpointStartsOver(t *testing.T) {
	for _, data := range []string{
		`{"version":1,"turn":3,"messages":[{"role":"system","content":"plain"},{"role":"user","content":"task"}]}`,
		`{"version":2,"mode":"plain","messages":[{"role":"system","content":"plain"},{"role":"user","content":"task"}]}`,
	} {
		st := &memState{cp: map[task.Ref]store.Checkpoint{testRef: {Data: []byte(data)}}}
		p := begin(t, newTestCoordinator(t, st, &memForge{}, &noLLM{}))
		if p.st.At.Phase != PhasePrePlanning || p.st.Plan != nil {
			t.Errorf("state after a plain-loop checkpoint %s: %+v", data, p.st.At)
		}
	}
}

// A checkpoint whose phase needs a plan but has none, or names an action
// the plan does not hold, is not resumed.
func TestInconsistentCheckpointStartsOver(t *testing.T) {
	for _, bad := range []state{
		{At: At{Phase: PhaseExecution, Action: "a1"}},
		{At: At{Phase: PhaseReplan, Action: "gone"}, Plan: validPlan()},
		{At: At{Phase: "dreaming"}},
	} {
		st := &memState{cp: map[task.Ref]store.Checkpoint{testRef: {Data: checkpointOf(t, bad)}}}
		p := begin(t, newTestCoordinator(t, st, &memForge{}, &noLLM{}))
		if p.st.At.Phase != PhasePrePlanning || p.st.Plan != nil {
			t.Errorf("resumed %+v: %+v", bad.At, p.st.At)
		}
	}
}

// A run that ended before its closing comment was posted posts it on
// resume, once, without asking the model.
func TestEndedRunAnnouncesOnce(t *testing.T) {
	pol, _ := json.Marshal(state{At: At{Phase: PhaseVerification}, Plan: &Plan{}})
	data, _ := json.Marshal(map[string]any{"version": 2, "mode": mode, "messages": []llm.Message{{Role: llm.System, Content: "x"}},
		"calls": 7, "final": engine.Outcome{End: engine.Done, Calls: 7, Reported: true}, "policy": json.RawMessage(pol)})
	st := &memState{cp: map[task.Ref]store.Checkpoint{testRef: {Data: data}}}
	f, model := &memForge{}, &noLLM{}
	c := newTestCoordinator(t, st, f, model)
	for i := 0; i < 2; i++ {
		got, err := c.Run(context.Background(), engine.Input{Task: task.Task{Ref: testRef}})
		if err != nil || got.End != engine.Done || got.Calls != 7 {
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

// startWith starts a run of testRef from a checkpoint holding st, with the
// history already holding entries.
func startWith(t *testing.T, st state, entries ...Entry) (*policy, *History) {
	t.Helper()
	c := newTestCoordinator(t, &memState{cp: map[task.Ref]store.Checkpoint{testRef: {Data: checkpointOf(t, st)}}}, &memForge{}, &noLLM{})
	h, err := OpenHistory(c.o.Settings.HistoryDir, testRef)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := h.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	p := begin(t, c)
	if p.st.At.Phase != st.At.Phase {
		t.Fatalf("the checkpoint was not resumed: phase %q, want %q", p.st.At.Phase, st.At.Phase)
	}
	return p, h
}

func historyTypes(t *testing.T, h *History) []string {
	t.Helper()
	entries, err := h.Load()
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range entries {
		types = append(types, e.Type)
	}
	return types
}

// An entry written just before the process stopped (the checkpoint does not
// count it yet) is not written again by the resumed run; later entries are.
func TestRecordWritesEachEntryOnce(t *testing.T) {
	refl := Entry{Type: EntryReflection, Trigger: "error", Action: "a1", Evaluation: &Reflection{Status: "failure"}}
	r, h := startWith(t, state{At: At{Phase: PhaseReflection, Trigger: "error", Action: "a1"}, Plan: validPlan(), HistoryLen: 1},
		Entry{Type: EntryPlan, Plan: validPlan()}, refl)

	if err := r.record(refl); err != nil {
		t.Fatal(err)
	}
	if got := historyTypes(t, h); !slices.Equal(got, []string{EntryPlan, EntryReflection}) || r.st.HistoryLen != 2 {
		t.Fatalf("after recording the reflection again: history %v, HistoryLen %d; want it written once and counted", got, r.st.HistoryLen)
	}
	for _, e := range []Entry{refl, {Type: EntryRevision, Plan: validPlan(), Reason: "r"}} {
		if err := r.record(e); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{EntryPlan, EntryReflection, EntryReflection, EntryRevision}
	if got := historyTypes(t, h); !slices.Equal(got, want) || r.st.HistoryLen != len(want) {
		t.Errorf("history %v, HistoryLen %d; want %v and %d", got, r.st.HistoryLen, want, len(want))
	}
}

// An entry of another type than the one about to be recorded is not taken
// for it: the new entry is written.
func TestRecordAfterAnUncountedEntryOfAnotherType(t *testing.T) {
	r, h := startWith(t, state{At: At{Phase: PhaseReflection}, Plan: validPlan(), HistoryLen: 1},
		Entry{Type: EntryPlan, Plan: validPlan()}, Entry{Type: EntryVerification, Round: 1})
	if err := r.record(Entry{Type: EntryReflection, Trigger: "interval"}); err != nil {
		t.Fatal(err)
	}
	want := []string{EntryPlan, EntryVerification, EntryReflection}
	if got := historyTypes(t, h); !slices.Equal(got, want) || r.st.HistoryLen != 3 {
		t.Errorf("history %v, HistoryLen %d; want %v and 3", got, r.st.HistoryLen, want)
	}
}

// A revision written to the history but not yet to the checkpoint is
// resumed from the history, keeping the progress the checkpoint recorded;
// one the checkpoint already counts is not.
func TestResumeTakesAnUncountedPlanFromTheHistory(t *testing.T) {
	old := validPlan()
	old.ActionPlan.Actions[0].Status, old.ActionPlan.Actions[0].Summary = Done, "read it"
	old.ActionPlan.Actions[1].Status, old.ActionPlan.Actions[2].Status = Pending, Pending
	revised := validPlan()
	revised.ActionPlan.Actions[1].ID = "a2b"
	for i := range revised.ActionPlan.Actions {
		revised.ActionPlan.Actions[i].Status = Pending
	}
	entries := []Entry{{Type: EntryPlan, Plan: validPlan()}, {Type: EntryRevision, Plan: revised, Reason: "r"}}

	r, _ := startWith(t, state{At: At{Phase: PhaseRevision}, Plan: old, HistoryLen: 1}, entries...)
	var got []string
	for _, a := range r.st.Plan.ActionPlan.Actions {
		got = append(got, a.ID+":"+string(a.Status))
	}
	if want := []string{"a1:done", "a2b:pending", "a3:pending"}; !slices.Equal(got, want) {
		t.Errorf("resumed plan %v, want the history's revision with a1 done %v", got, want)
	}
	if a := r.st.Plan.action("a1"); a.Summary != "read it" {
		t.Errorf("a1 lost its summary: %+v", a)
	}

	r, _ = startWith(t, state{At: At{Phase: PhaseExecution}, Plan: old, HistoryLen: 2}, entries...)
	if r.st.Plan.action("a2") == nil || r.st.Plan.action("a2b") != nil {
		t.Errorf("a plan the checkpoint counts replaced the checkpoint's: %+v", r.st.Plan.ActionPlan.Actions)
	}
}

// The revision phase is told the reason the newest reflection gave,
// including one recorded by this run.
func TestRevisionReasonIsTheNewestReflections(t *testing.T) {
	reflection := func(reason, evaluation string) Entry {
		return Entry{Type: EntryReflection, Evaluation: &Reflection{Evaluation: evaluation, RevisionReason: reason}}
	}
	r, _ := startWith(t, state{At: At{Phase: PhaseReflection}, Plan: validPlan(), HistoryLen: 2},
		Entry{Type: EntryPlan, Plan: validPlan()}, reflection("first reason", "e1"))
	if got := r.lastRevisionReason(); got != "first reason" {
		t.Errorf("reason = %q, want the history's", got)
	}
	if err := r.record(reflection("", "only an evaluation")); err != nil {
		t.Fatal(err)
	}
	if got := r.lastRevisionReason(); got != "only an evaluation" {
		t.Errorf("reason = %q, want the evaluation of the reflection just recorded", got)
	}
}
