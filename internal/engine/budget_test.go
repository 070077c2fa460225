package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/tokens"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// longModel asks for a big tool output turns times, then says done; it
// answers the engine's summary requests, and records every request's size
// by the tokenizer and in bytes. serverLimit > 0 refuses a request over it
// as a server would (context_length_exceeded).
type longModel struct {
	mu          sync.Mutex
	turns       int
	asked       int
	counter     llm.Counter
	serverLimit int
	sizes       []int // tokens of each request, tools included
	bytes       []int
	requests    []llm.Request
	summaries   int
	refused     int
}

func (m *longModel) size(req llm.Request) (int, int) {
	n, b := 0, 0
	for _, msg := range req.Messages {
		n += 4 + m.counter.Count(msg.Content)
		b += len(msg.Content)
		for _, c := range msg.ToolCalls {
			n += 4 + m.counter.Count(c.Name) + m.counter.Count(string(c.Arguments))
			b += len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += 4 + m.counter.Count(t.Name) + m.counter.Count(t.Description) + m.counter.Count(string(t.Parameters))
	}
	return n, b
}

func (m *longModel) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, b := m.size(req)
	if m.serverLimit > 0 && n > m.serverLimit {
		m.refused++
		return llm.Response{}, fmt.Errorf("http status 400: %w", llm.ErrContextLength)
	}
	m.sizes, m.bytes, m.requests = append(m.sizes, n), append(m.bytes, b), append(m.requests, req)
	usage := llm.Usage{InputTokens: n, OutputTokens: 20}
	if req.Messages[0].Content == "You summarise a coding agent's work for the agent itself." {
		m.summaries++
		return llm.Response{Message: llm.Message{Content: "I called test/big many times; each returned a long text."}, Usage: usage}, nil
	}
	m.asked++
	if m.asked > m.turns {
		return llm.Response{Message: llm.Message{Content: `{"done": true, "comment": "Read every output."}`}, Usage: usage}, nil
	}
	return llm.Response{Message: llm.Message{Content: cmd("test/big", output(m.asked), "")}, Usage: usage}, nil
}

// output is the arguments of the big call of turn i: 8 KB of text unique
// to the turn.
func output(i int) string {
	return fmt.Sprintf(`{"bytes": 8192, "unit": "turn %03d wrote this line of output; "}`, i)
}

func outputText(i int) string {
	unit := fmt.Sprintf("turn %03d wrote this line of output; ", i)
	return strings.Repeat(unit, (8192+len(unit)-1)/len(unit))
}

func longRun(t *testing.T, m *longModel, budget engine.Budget) (engine.Outcome, *world, error) {
	t.Helper()
	w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
	e, err := engine.New(engine.Options{LLM: m, Tools: tools{Host: startHost(t)}, State: w, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	l, err := agent.New(e, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := l.Run(t.Context(), engine.Input{Task: task.Task{Ref: ref, Title: "Read outputs", Body: "Call test/big."}, Post: w})
	return out, w, err
}

// A 200-turn task with 8 KB tool results in a 16k context: every request
// stays under the budget by the tokenizer, no request carries a tool output
// twice, and the requests stop growing once the window is full.
func TestLongTaskStaysInsideTheBudget(t *testing.T) {
	counter := tokens.ForModel("gpt-4o")
	budget := engine.Budget{ContextLength: 16384, Reserve: 2048, Counter: counter}
	m := &longModel{turns: 200, counter: counter}
	out, w, err := longRun(t, m, budget)
	if err != nil || out.End != engine.Done {
		t.Fatalf("%+v %v", out, err)
	}
	limit := 16384 - 2048
	maxSize, maxBytes := 0, 0
	for i, n := range m.sizes {
		maxSize, maxBytes = max(maxSize, n), max(maxBytes, m.bytes[i])
		if n > limit {
			t.Errorf("request %d holds %d tokens, over the budget of %d", i+1, n, limit)
		}
	}
	for i, req := range m.requests {
		var all strings.Builder
		for _, msg := range req.Messages {
			all.WriteString(msg.Content)
		}
		for turn := 1; turn <= 200; turn++ {
			if c := strings.Count(all.String(), outputText(turn)); c > 1 {
				t.Fatalf("request %d carries the output of turn %d %d times", i+1, turn, c)
			}
		}
	}
	// Linear growth of what is sent: no request is bigger than the window
	// allows, so the total is at most requests × window.
	if maxBytes > 4*limit {
		t.Errorf("the largest request is %d bytes", maxBytes)
	}
	var st struct {
		Compactions int `json:"compactions"`
	}
	if err := jsonOf(w.cps[ref].Data, &st); err != nil {
		t.Fatal(err)
	}
	// What is checkpointed is the compacted conversation: a resume sends
	// none of the elided outputs again.
	for turn := 1; turn <= 196; turn++ {
		if strings.Contains(string(w.cps[ref].Data), outputText(turn)[:1000]) {
			t.Fatalf("the checkpoint still holds the output of turn %d", turn)
		}
	}
	if m.summaries == 0 || st.Compactions == 0 {
		t.Errorf("%d summaries, %d compactions; want both", m.summaries, st.Compactions)
	}
	t.Logf("%d requests, %d summaries, %d compactions; largest request %d tokens, %d bytes", len(m.sizes), m.summaries, st.Compactions, maxSize, maxBytes)
}

// A server that counts more than the engine (its tokenizer differs) and
// refuses a request as over its context length: one harder compaction and a
// retry, not a failed task.
func TestContextLengthExceededIsRecovered(t *testing.T) {
	counter := tokens.ForModel("gpt-4o")
	budget := engine.Budget{ContextLength: 16384, Reserve: 2048, Counter: counter}
	m := &longModel{turns: 40, counter: counter, serverLimit: 9000}
	out, _, err := longRun(t, m, budget)
	if err != nil || out.End != engine.Done {
		t.Fatalf("%+v %v", out, err)
	}
	if m.refused == 0 {
		t.Fatal("the server never refused a request: the test proves nothing")
	}
	for i, n := range m.sizes {
		if n > 9000 {
			t.Errorf("request %d, %d tokens, was answered over the server's limit", i+1, n)
		}
	}
}

// Planning mode keeps the plan and the action in hand in every request
// after a compaction, and a run resumed after a compaction does not send
// the elided outputs again.
func TestPlanStaysInViewAfterCompaction(t *testing.T) {
	counter := tokens.ForModel("gpt-4o")
	script := []string{
		`{"phase": "pre_planning", "understanding": {"goal": "read", "deliverables": ["outputs"], "confidence": "high"}}`,
		`{"phase": "planning", "goal_understanding": {"main_objective": "Read twelve outputs", "success_criteria": ["read"]},
		  "task_decomposition": {"subtasks": [{"id": "t1", "description": "read"}]},
		  "action_plan": {"actions": [{"id": "a1", "task_id": "t1", "description": "read twelve big outputs"}]}}`,
	}
	for i := 1; i <= 12; i++ {
		script = append(script, cmd("test/big", output(i), ""))
	}
	script = append(script, `{"phase": "execution", "action_id": "a1", "status": "completed", "summary": "read them"}`,
		`{"phase": "verification", "verification": {"passed": true, "criteria": [{"criterion": "read", "met": true}]}}`)
	rec := &recorder{model: &model{script: script}, counter: counter}
	w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
	budget := engine.Budget{ContextLength: 8192, Reserve: 1024, Counter: counter}
	out, err := plannedRun(t, w, rec, budget)
	if err != nil || out.End != engine.Done {
		t.Fatalf("%+v %v", out, err)
	}
	compacted := false
	for i, req := range rec.requests {
		text := joined(req)
		if strings.Contains(text, "[Context compacted") {
			compacted = true
		}
		if compacted && (!strings.Contains(text, "Read twelve outputs") || !strings.Contains(text, "a1")) {
			t.Errorf("request %d after a compaction lacks the goal or the action in hand", i+1)
		}
		if n := rec.sizes[i]; n > 8192-1024 {
			t.Errorf("request %d holds %d tokens", i+1, n)
		}
	}
	if !compacted {
		t.Fatal("no compaction happened: the test proves nothing")
	}
}

// recorder wraps a model, answering the engine's summary requests itself.
type recorder struct {
	model    *model
	counter  llm.Counter
	requests []llm.Request
	sizes    []int
}

func (r *recorder) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	n, _ := (&longModel{counter: r.counter}).size(req)
	r.requests, r.sizes = append(r.requests, req), append(r.sizes, n)
	if req.Messages[0].Content == "You summarise a coding agent's work for the agent itself." {
		return llm.Response{Message: llm.Message{Content: "Read several big outputs."}}, nil
	}
	return r.model.Chat(ctx, req)
}

func joined(req llm.Request) string {
	var b strings.Builder
	for _, m := range req.Messages {
		b.WriteString(m.Content + "\n")
	}
	return b.String()
}

func plannedRun(t *testing.T, w *world, m llm.Client, budget engine.Budget) (engine.Outcome, error) {
	t.Helper()
	e, err := engine.New(engine.Options{LLM: m, Tools: tools{Host: startHost(t)}, State: w, Budget: budget, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	return policyRun(t, "planning", e, w)()
}

func jsonOf(data []byte, v any) error { return json.Unmarshal(data, v) }
