package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// scriptLLM answers each Chat with the next scripted reply and records the
// requests.
type scriptLLM struct {
	mu       sync.Mutex
	replies  []any // llm.Message or error
	requests []llm.Request
}

func (s *scriptLLM) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req.Messages = append([]llm.Message(nil), req.Messages...)
	s.requests = append(s.requests, req)
	if len(s.replies) == 0 {
		return llm.Response{}, fmt.Errorf("script exhausted at request %d", len(s.requests))
	}
	r := s.replies[0]
	s.replies = s.replies[1:]
	if err, ok := r.(error); ok {
		return llm.Response{}, err
	}
	return llm.Response{Message: r.(llm.Message), Usage: llm.Usage{InputTokens: 10, OutputTokens: 3}}, nil
}

func text(s string) llm.Message { return llm.Message{Role: llm.Assistant, Content: s} }

// memState is an in-memory State.
type memState struct {
	mu       sync.Mutex
	cp       map[task.Ref]store.Checkpoint
	counters store.Counters
	saves    int
}

func newMemState() *memState { return &memState{cp: map[task.Ref]store.Checkpoint{}} }

func (m *memState) SaveCheckpoint(_ context.Context, ref task.Ref, cp store.Checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cp[ref] = cp
	m.saves++
	return nil
}

func (m *memState) LoadCheckpoint(_ context.Context, ref task.Ref) (store.Checkpoint, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp, ok := m.cp[ref]
	return cp, ok, nil
}

func (m *memState) AddCounters(_ context.Context, _ task.Ref, d store.Counters) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counters.LLMCalls += d.LLMCalls
	m.counters.ToolCalls += d.ToolCalls
	m.counters.TokensIn += d.TokensIn
	m.counters.TokensOut += d.TokensOut
	return nil
}

// posts records comments; failNext makes the next posts fail.
type posts struct {
	mu       sync.Mutex
	bodies   []string
	failNext int
}

func (p *posts) Post(_ context.Context, _ engine.Key, body string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failNext > 0 {
		p.failNext--
		return errors.New("forge answered 502")
	}
	p.bodies = append(p.bodies, body)
	return nil
}

func startTools(t *testing.T) *toolhost.Host {
	t.Helper()
	h, err := toolhost.Start(context.Background(), toolhost.Options{
		Servers: []toolhost.ServerConfig{{Name: "test", SystemPrompt: "Use echo to say things."}},
		Connect: func(ctx context.Context, _ toolhost.ServerConfig) (mcp.Transport, error) {
			return mcptest.NewInMemory(ctx, t)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

var issue = task.Task{Ref: task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 7},
	Title: "Say hello", Body: "Please echo hello.", Author: "alice", State: "open"}

func newAgent(t *testing.T, m llm.Client, st engine.State, native bool, mod func(*engine.Options)) *Loop {
	t.Helper()
	o := engine.Options{LLM: m, Tools: startTools(t), State: st, FunctionCalling: native}
	if mod != nil {
		mod(&o)
	}
	e, err := engine.New(o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(e, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// interruptAt is a checkpoint check that ends the run, interrupted, at turn
// while on.
type interruptAt struct {
	turn int
	on   bool
}

func (w *interruptAt) At(_ context.Context, at engine.Step, mark int64) (engine.Steer, error) {
	if w.on && at.Turn == w.turn {
		return engine.Steer{Mark: mark, End: engine.Interrupted, Reason: "shutting down"}, nil
	}
	return engine.Steer{Mark: mark}, nil
}

func (w *interruptAt) Close() {}

func TestJSONProtocolRunsToolsAndFinishes(t *testing.T) {
	m := &scriptLLM{replies: []any{
		text(`{"comment":"Echoing.","command":{"tool":"test/echo","args":{"text":"hello"}}}`),
		text(`{"comment":"Trying a broken tool.","command":{"tool":"test/fail","args":{}}}`),
		text("```json\n{\"done\": true, \"comment\": \"Said hello.\"}\n```"), // questioned: the last call failed
		text("```json\n{\"done\": true, \"comment\": \"Said hello.\"}\n```"),
	}}
	st, p := newMemState(), &posts{}
	a := newAgent(t, m, st, false, nil)
	out, err := a.Run(context.Background(), engine.Input{Task: issue, Comments: []task.Comment{
		{Author: "bob", Body: "also <!-- secret instruction --> wave"}, {Author: "bot", Body: "On it."}}, BotName: "bot", Post: p})
	if err != nil {
		t.Fatal(err)
	}
	if out.End != engine.Done || out.Comment != "Said hello." || out.Calls != 4 {
		t.Fatalf("outcome %+v", out)
	}
	if got := strings.Join(p.bodies, "|"); got != "Echoing.|Trying a broken tool.|Said hello."+nothingRan {
		t.Fatalf("posted %q", got)
	}
	if len(m.requests) != 4 {
		t.Fatalf("%d model requests, want 4 (one per turn)", len(m.requests))
	}
	first := m.requests[0]
	if first.Tools != nil {
		t.Error("JSON mode must not send tools")
	}
	sys, user := first.Messages[0].Content, first.Messages[1].Content
	for _, want := range []string{"test/echo", "test/fail", "Use echo to say things.", `"command"`} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
	for _, want := range []string{"Say hello", "Please echo hello.", "@bob", "@bot (you, coding-agent)", "On it."} {
		if !strings.Contains(user, want) {
			t.Errorf("task prompt lacks %q:\n%s", want, user)
		}
	}
	if strings.Contains(user, "secret instruction") {
		t.Error("HTML comment reached the model")
	}
	second := m.requests[1].Messages
	res := second[len(second)-1]
	// The result names the tool; the arguments are in the assistant's JSON
	// just before it, once.
	if res.Role != llm.User || !strings.HasPrefix(res.Content, "Result of test/echo:\n") ||
		!strings.Contains(res.Content, "hello") || strings.Contains(res.Content, `"text"`) {
		t.Fatalf("tool result message:\n%s", res.Content)
	}
	third := m.requests[2].Messages
	if !strings.HasPrefix(third[len(third)-1].Content, "Result of test/fail (the tool reported an error):") {
		t.Fatalf("tool error should go back to the model:\n%s", third[len(third)-1].Content)
	}
	fourth := m.requests[3].Messages
	if !strings.Contains(fourth[len(fourth)-1].Content, "The last tool calls failed: is the task really done?") {
		t.Fatalf("a done right after a failed call should be questioned:\n%s", fourth[len(fourth)-1].Content)
	}
	if st.counters != (store.Counters{LLMCalls: 4, ToolCalls: 2, TokensIn: 40, TokensOut: 12}) {
		t.Fatalf("counters %+v", st.counters)
	}
}

func TestNativeToolCalls(t *testing.T) {
	m := &scriptLLM{}
	st, p := newMemState(), &posts{}
	a := newAgent(t, m, st, true, nil)
	m.replies = []any{
		llm.Message{Content: "Echoing twice.", ToolCalls: []llm.ToolCall{
			{ID: "call_1", Name: a.e.Toolset().Fn("test/echo"), Arguments: json.RawMessage(`{"text":"one"}`)},
			{ID: "call_2", Name: a.e.Toolset().Fn("test/echo"), Arguments: json.RawMessage(`{"text":"two"}`)},
		}},
		text(`{"done": true, "comment": "Done."}`),
	}
	out, err := a.Run(context.Background(), engine.Input{Task: issue, Post: p})
	if err != nil || out.End != engine.Done {
		t.Fatalf("%+v %v", out, err)
	}
	req := m.requests[0]
	if !hasTool(req.Tools, "test__echo") {
		t.Fatalf("native tools not offered: %+v", req.Tools)
	}
	msgs := m.requests[1].Messages
	n := len(msgs)
	if msgs[n-3].Role != llm.Assistant || len(msgs[n-3].ToolCalls) != 2 ||
		msgs[n-2].ToolCallID != "call_1" || msgs[n-1].ToolCallID != "call_2" || msgs[n-1].Role != llm.ToolRole ||
		!strings.Contains(msgs[n-1].Content, "two") {
		t.Fatalf("tool messages wrong: %+v", msgs[n-3:])
	}
	if strings.Join(p.bodies, "|") != "Echoing twice.|Done."+nothingRan {
		t.Fatalf("posted %q", p.bodies)
	}
}

func hasTool(ts []llm.Tool, name string) bool {
	for _, t := range ts {
		if t.Name == name {
			return true
		}
	}
	return false
}

func TestFiveUnusableRepliesFailTheTask(t *testing.T) {
	for _, native := range []bool{false, true} {
		t.Run(fmt.Sprint("native=", native), func(t *testing.T) {
			m := &scriptLLM{replies: []any{text("hmm"), text(`{"comment":"x"}`), text("no json"), text("{broken"), text("still nothing"), text(`{"done":true,"comment":"never read"}`)}}
			p := &posts{}
			a := newAgent(t, m, newMemState(), native, nil)
			out, err := a.Run(context.Background(), engine.Input{Task: issue, Post: p})
			if err != nil {
				t.Fatal(err)
			}
			if out.End != engine.Failed || !strings.Contains(out.Reason, "5 unusable replies") {
				t.Fatalf("outcome %+v", out)
			}
			if len(m.requests) != 5 {
				t.Fatalf("%d requests, want 5", len(m.requests))
			}
			// Each retry tells the model what was wrong, so each differs.
			seen := map[string]bool{}
			for i := 1; i < 5; i++ {
				last := m.requests[i].Messages[len(m.requests[i].Messages)-1]
				if !strings.Contains(last.Content, "could not be used") || seen[last.Content] {
					t.Fatalf("request %d correction: %q", i+1, last.Content)
				}
				seen[last.Content] = true
			}
			if len(p.bodies) != 0 {
				t.Fatalf("nothing should be posted, got %q", p.bodies)
			}
		})
	}
}

func TestUsableReplyResetsTheUnusableCount(t *testing.T) {
	var replies []any
	for range 4 {
		replies = append(replies, text("nope"))
	}
	replies = append(replies, text(`{"command":{"tool":"test/echo","args":{"text":"x"}}}`))
	for range 4 {
		replies = append(replies, text("nope"))
	}
	replies = append(replies, text(`{"done":true,"comment":"ok"}`))
	m := &scriptLLM{replies: replies}
	out, err := newAgent(t, m, newMemState(), false, nil).Run(context.Background(), engine.Input{Task: issue, Post: &posts{}})
	if err != nil || out.End != engine.Done {
		t.Fatalf("%+v %v", out, err)
	}
}

func TestTurnLimitFailsTheTask(t *testing.T) {
	m := &scriptLLM{replies: []any{
		text(`{"command":{"tool":"test/echo","args":{"text":"1"}}}`),
		text(`{"command":{"tool":"test/echo","args":{"text":"2"}}}`),
	}}
	a := newAgent(t, m, newMemState(), false, func(o *engine.Options) { o.MaxCalls = 2 })
	out, err := a.Run(context.Background(), engine.Input{Task: issue, Post: &posts{}})
	if err != nil || out.End != engine.Failed || !strings.Contains(out.Reason, "max_llm_process_num") {
		t.Fatalf("%+v %v", out, err)
	}
	if len(m.requests) != 2 {
		t.Fatalf("%d requests, want 2", len(m.requests))
	}
}

func TestRepeatedIdenticalCallsAreFlagged(t *testing.T) {
	call := text(`{"command":{"tool":"test/echo","args":{"text":"same"}}}`)
	m := &scriptLLM{replies: []any{call, call, call, text(`{"done":true,"comment":"ok"}`)}}
	if _, err := newAgent(t, m, newMemState(), false, nil).Run(context.Background(), engine.Input{Task: issue, Post: &posts{}}); err != nil {
		t.Fatal(err)
	}
	msgs := m.requests[3].Messages
	if !strings.Contains(msgs[len(msgs)-1].Content, "3 times in a row") {
		t.Fatalf("third identical call not flagged:\n%s", msgs[len(msgs)-1].Content)
	}
	if strings.Contains(m.requests[2].Messages[len(m.requests[2].Messages)-1].Content, "times in a row") {
		t.Fatal("second call flagged too early")
	}
}

func TestModelErrorIsASystemError(t *testing.T) {
	m := &scriptLLM{replies: []any{errors.New("503 after 4 attempts")}}
	_, err := newAgent(t, m, newMemState(), false, nil).Run(context.Background(), engine.Input{Task: issue, Post: &posts{}})
	if err == nil || !strings.Contains(err.Error(), "model request 1 for github:acme/app#7") {
		t.Fatalf("err = %v", err)
	}
}

// A run that stops after the model replied but before its comment landed
// resumes from the checkpoint: the model is not asked again and the comment
// is posted once.
func TestResumeDoesNotReaskOrRepost(t *testing.T) {
	m := &scriptLLM{replies: []any{
		text(`{"comment":"Step one.","command":{"tool":"test/echo","args":{"text":"a"}}}`),
		text(`{"comment":"Finished.","done":true}`),
	}}
	st, p := newMemState(), &posts{failNext: 1}
	a := newAgent(t, m, st, false, nil)
	if _, err := a.Run(context.Background(), engine.Input{Task: issue, Post: p}); err == nil {
		t.Fatal("want the posting error")
	}
	out, err := a.Run(context.Background(), engine.Input{Task: issue, Post: p})
	if err != nil || out.End != engine.Done {
		t.Fatalf("%+v %v", out, err)
	}
	if len(m.requests) != 2 {
		t.Fatalf("%d model requests, want 2", len(m.requests))
	}
	if strings.Join(p.bodies, "|") != "Step one.|Finished."+nothingRan {
		t.Fatalf("posted %q", p.bodies)
	}
}

func TestInterruptAtCheckpointThenResume(t *testing.T) {
	m := &scriptLLM{replies: []any{
		text(`{"comment":"One.","command":{"tool":"test/echo","args":{"text":"a"}}}`),
		text(`{"comment":"Two.","done":true}`),
	}}
	st, p := newMemState(), &posts{}
	w := &interruptAt{turn: 2, on: true}
	a := newAgent(t, m, st, false, nil)
	if out, err := a.Run(context.Background(), engine.Input{Task: issue, Post: p, Watch: w}); err != nil || out.End != engine.Interrupted {
		t.Fatalf("%+v %v, want interrupted", out, err)
	}
	w.on = false
	out, err := a.Run(context.Background(), engine.Input{Task: issue, Post: p, Watch: w})
	if err != nil || out.End != engine.Done || out.Calls != 2 {
		t.Fatalf("%+v %v", out, err)
	}
	if len(m.requests) != 2 || strings.Join(p.bodies, "|") != "One.|Two."+nothingRan {
		t.Fatalf("%d requests, posted %q", len(m.requests), p.bodies)
	}
	// The resumed request carries the whole conversation so far.
	if n := len(m.requests[1].Messages); n != 4 {
		t.Fatalf("resumed request has %d messages, want 4 (system, task, reply, result)", n)
	}
}

func TestEmptyReplyIsUnusableNotAnOutage(t *testing.T) {
	m := &scriptLLM{replies: []any{
		fmt.Errorf("openai chat completion: %w", llm.ErrEmptyReply),
		text(`{"comment":"  \n ","command":{"tool":"test/echo","args":{"text":"x"}}}`),
		text(`{"done":true,"comment":"ok"}`),
	}}
	p := &posts{}
	out, err := newAgent(t, m, newMemState(), false, nil).Run(context.Background(), engine.Input{Task: issue, Post: p})
	if err != nil || out.End != engine.Done {
		t.Fatalf("%+v %v", out, err)
	}
	second := m.requests[1].Messages
	if !strings.Contains(second[len(second)-1].Content, "the reply was empty") {
		t.Fatalf("the model was not told its reply was empty:\n%s", second[len(second)-1].Content)
	}
	if strings.Join(p.bodies, "|") != "ok"+nothingRan {
		t.Fatalf("a blank comment must not be posted; posted %q", p.bodies)
	}
}

// A run that ended (done, or failed on the protocol) keeps its outcome in the
// checkpoint: a resume after a crash before the labels were set returns it
// without asking the model again.
func TestResumeAfterTheEndReturnsTheOutcome(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replies []any
		want    engine.End
	}{
		{"done", []any{text(`{"done":true,"comment":"finished"}`)}, engine.Done},
		{"unusable", []any{text("a"), text("b"), text("c"), text("d"), text("e")}, engine.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &scriptLLM{replies: tc.replies}
			st, p := newMemState(), &posts{}
			a := newAgent(t, m, st, false, nil)
			first, err := a.Run(context.Background(), engine.Input{Task: issue, Post: p})
			if err != nil || first.End != tc.want {
				t.Fatalf("%+v %v", first, err)
			}
			again, err := a.Run(context.Background(), engine.Input{Task: issue, Post: p})
			// The comments after the run continue its keys, and the
			// process that returned the outcome first may have posted
			// them: they are in doubt.
			if again.Keys.Run != first.Keys.Run || again.Keys.Seq != first.Keys.Seq || !again.Keys.Doubt {
				t.Errorf("keys after the resume %+v, want those of the first run %+v, in doubt", again.Keys, first.Keys)
			}
			again.Keys, first.Keys = engine.Keys{}, engine.Keys{}
			if err != nil || !reflect.DeepEqual(again, first) {
				t.Fatalf("resume gave %+v %v, want %+v", again, err, first)
			}
			if len(m.requests) != len(tc.replies) || len(p.bodies) > 1 {
				t.Fatalf("%d requests, %d posts after resume", len(m.requests), len(p.bodies))
			}
		})
	}
}

// A done right after a step whose calls failed gets one question back; it
// is not posted until it is accepted. The question survives a resume: a
// run stopped after asking it accepts the next done without asking again.
func TestDoneAfterFailedCallsIsQuestionedOnce(t *testing.T) {
	m := &scriptLLM{replies: []any{
		text(`{"comment":"Trying the broken tool.","command":{"tool":"test/fail","args":{}}}`),
		text(`{"done": true, "comment": "All fixed."}`),
	}}
	st, p := newMemState(), &posts{}
	a := newAgent(t, m, st, false, nil)
	in := engine.Input{Task: issue, Post: p}
	if _, err := a.Run(context.Background(), in); err == nil || !strings.Contains(err.Error(), "script exhausted") {
		t.Fatalf("err = %v, want the model asked a third time", err)
	}
	third := m.requests[2].Messages
	if last := third[len(third)-1]; last.Role != llm.User || !strings.Contains(last.Content, "is the task really done?") {
		t.Fatalf("third request ends with %+v", last)
	}
	if got := strings.Join(p.bodies, "|"); got != "Trying the broken tool." {
		t.Fatalf("posted %q: the questioned done must not be posted", got)
	}
	// Resumed: the next done is accepted, and the question is not repeated.
	m2 := &scriptLLM{replies: []any{text(`{"done": true, "comment": "Really done: the tool is broken upstream."}`)}}
	out, err := newAgent(t, m2, st, false, nil).Run(context.Background(), in)
	if err != nil || out.End != engine.Done || out.Comment != "Really done: the tool is broken upstream." {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	msgs := m2.requests[0].Messages
	asked := 0
	for _, msg := range msgs {
		asked += strings.Count(msg.Content, "is the task really done?")
	}
	if len(m2.requests) != 1 || asked != 1 {
		t.Fatalf("%d requests, question asked %d times; want 1 and 1", len(m2.requests), asked)
	}
	if got := strings.Join(p.bodies, "|"); got != "Trying the broken tool.|Really done: the tool is broken upstream."+nothingRan {
		t.Fatalf("posted %q", got)
	}
}

// A model that repeats the same step comment has it posted once; the same
// comment after another one is posted again.
func TestIdenticalStepCommentIsNotPostedTwiceInARow(t *testing.T) {
	again := text(`{"comment":"Echoing again.","command":{"tool":"test/echo","args":{"text":"x"}}}`)
	replies := []any{}
	for range 20 {
		replies = append(replies, again)
	}
	replies = append(replies, text(`{"comment":"Something else.","command":{"tool":"test/echo","args":{"text":"y"}}}`), again,
		text(`{"done": true, "comment": "Done."}`))
	m := &scriptLLM{replies: replies}
	st, p := newMemState(), &posts{}
	out, err := newAgent(t, m, st, false, nil).Run(context.Background(), engine.Input{Task: issue, Post: p})
	if err != nil || out.End != engine.Done {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	if got := strings.Join(p.bodies, "|"); got != "Echoing again.|Something else.|Echoing again.|Done."+nothingRan {
		t.Fatalf("posted %q", got)
	}
}

// nothingRan ends the closing comment of a round that ran no command.
const nothingRan = "\n\nNo command was run: nothing here was executed."
