package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm/tokens"
)

// The summary of earlier work outlives later compactions: each later note
// carries it, and each later summary covers it (it used to be dropped with
// the note it was in).
func TestSummaryIsNotLostByALaterCompaction(t *testing.T) {
	counter := tokens.ForModel("gpt-4o")
	budget := engine.Budget{ContextLength: 16384, Reserve: 2048, Counter: counter}
	m := &longModel{turns: 200, counter: counter}
	out, _, err := longRun(t, m, budget)
	if err != nil || out.End != engine.Done {
		t.Fatalf("%+v %v", out, err)
	}
	seen, lost := -1, 0
	for i, req := range m.requests {
		if req.Messages[0].Content == "You summarise a coding agent's work for the agent itself." {
			if seen < 0 {
				seen = i
			}
			continue
		}
		if seen >= 0 && !strings.Contains(req.Messages[1].Content, "I called test/big many times") {
			lost++
			if lost == 1 {
				t.Logf("request %d task message note: %q", i+1, req.Messages[1].Content[strings.Index(req.Messages[1].Content, "[Context"):])
			}
		}
	}
	if seen < 0 {
		t.Fatal("no summary")
	}
	if lost > 0 {
		t.Errorf("%d requests after the first summary carry no summary at all (%d summaries in %d requests)", lost, m.summaries, len(m.requests))
	}
}

// bigOnce calls test/big once with a result of `bytes` bytes, then says
// done; it refuses requests over serverLimit by its own count.
type bigOnce struct {
	counter     llm.Counter
	bytes       int
	serverLimit int
	asked       int
	refused     int
	sizes       []int
}

func (m *bigOnce) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	n, _ := (&longModel{counter: m.counter}).size(req)
	m.sizes = append(m.sizes, n)
	if m.serverLimit > 0 && n > m.serverLimit {
		m.refused++
		return llm.Response{}, fmt.Errorf("http status 400: %w", llm.ErrContextLength)
	}
	if req.Messages[0].Content == "You summarise a coding agent's work for the agent itself." {
		return llm.Response{Message: llm.Message{Content: "summary"}}, nil
	}
	m.asked++
	if m.asked == 1 {
		return llm.Response{Message: llm.Message{Content: cmd("test/big", fmt.Sprintf(`{"bytes": %d, "unit": "a varied line %%d of output text; "}`, m.bytes), "")}}, nil
	}
	return llm.Response{Message: llm.Message{Content: `{"done": true, "comment": "ok"}`}}, nil
}

// A server that counts more than the engine refuses a request whose bulk
// is the newest tool output: the forced compaction cuts below what was
// sent, so the retry is smaller (it used to resend the same request).
func TestForcedCompactionShrinksALargeNewestOutput(t *testing.T) {
	counter := tokens.ForModel("gpt-4o")
	budget := engine.Budget{ContextLength: 16384, Reserve: 2048, Counter: counter}
	m := &bigOnce{counter: counter, bytes: 30000, serverLimit: 5000}
	w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
	e, err := engine.New(engine.Options{LLM: m, Tools: tools{Host: startHost(t)}, State: w, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := agent.New(e, agent.Options{})
	out, err := l.Run(t.Context(), engine.Input{Task: task.Task{Ref: ref, Title: "Read", Body: "Call test/big."}, Post: w})
	t.Logf("request sizes %v, refused %d", m.sizes, m.refused)
	if err != nil || out.End != engine.Done {
		t.Fatalf("after a refusal and a forced compaction: %+v %v", out, err)
	}
}

// searcher searches the catalog with query n times, then calls tool `then`
// (if any) and finishes; it records every request.
type searcher struct {
	query    string
	n        int
	then     string
	counter  llm.Counter
	requests []llm.Request
	sizes    []int
}

func (s *searcher) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	if req.Messages[0].Content == "You summarise a coding agent's work for the agent itself." {
		return llm.Response{Message: llm.Message{Content: "searched"}}, nil
	}
	s.requests = append(s.requests, req)
	if s.counter != nil {
		n, _ := (&longModel{counter: s.counter}).size(req)
		s.sizes = append(s.sizes, n)
	}
	k := len(s.requests)
	call := func(name, args string) llm.Response {
		return llm.Response{Message: llm.Message{ToolCalls: []llm.ToolCall{{ID: fmt.Sprint("c", k), Name: name, Arguments: json.RawMessage(args)}}}}
	}
	if k <= s.n {
		return call("catalog__find_tools", fmt.Sprintf(`{"query": %q}`, s.query)), nil
	}
	if k == s.n+1 && s.then != "" {
		return call("catalog__find_tools", fmt.Sprintf(`{"query": %q}`, s.then)), nil
	}
	return llm.Response{Message: llm.Message{Content: `{"done": true, "comment": "done"}`}}, nil
}

// Without a tool-count limit (Ollama, LM Studio), the tools searches loaded
// are offered within the catalog's token share, the newest first: requests
// stay inside the budget.
func TestLoadedToolsStayInsideTheBudget(t *testing.T) {
	host := manyTools(t, 118, "")
	counter := tokens.ForModel("gpt-4o")
	w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
	m := &searcher{query: "widgets", n: 14, counter: counter}
	budget := engine.Budget{ContextLength: 8192, Reserve: 2048, Counter: counter}
	e, err := engine.New(engine.Options{LLM: m, Tools: host, State: w, FunctionCalling: true, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	l, err := agent.New(e, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := l.Run(t.Context(), engine.Input{Task: task.Task{Ref: ref, Title: "Search"}, Post: w})
	if err != nil || out.End != engine.Done {
		t.Fatalf("%+v %v", out, err)
	}
	for i, n := range m.sizes {
		if n > 8192-2048 {
			t.Errorf("request %d holds %d tokens (%d tools), over the budget of %d", i+1, n, len(m.requests[i].Tools), 8192-2048)
		}
	}
}

// With a tool limit (OpenAI, 128) only the newest loaded tools are offered;
// a tool loaded long ago is found and offered again by a new search.
func TestEvictedLoadedToolCanBeFoundAgain(t *testing.T) {
	host := manyTools(t, 140, "")
	w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
	m := &searcher{query: "widgets", n: 3, then: "number 112"}
	e, err := engine.New(engine.Options{LLM: m, Tools: host, State: w, FunctionCalling: true, MaxTools: 128,
		Budget: engine.Budget{ContextLength: 128000, Reserve: 4096, Counter: tokens.ForModel("gpt-4o")}})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := agent.New(e, agent.Options{})
	if _, err := l.Run(t.Context(), engine.Input{Task: task.Task{Ref: ref, Title: "Search"}, Post: w}); err != nil {
		t.Fatal(err)
	}
	last := m.requests[len(m.requests)-1]
	offered := false
	for _, tool := range last.Tools {
		offered = offered || tool.Name == "many__tool_112"
	}
	answer := last.Messages[len(last.Messages)-1].Content
	if !offered {
		t.Errorf("tool 112 was loaded, then evicted, and a search for it does not bring it back: %q", answer)
	}
}

// outage wraps longModel: from the first summary request on, the provider is
// down (every request fails, as a 503 would).
type outage struct {
	*longModel
	down bool
}

func (o *outage) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if req.Messages[0].Content == "You summarise a coding agent's work for the agent itself." {
		o.down = true
	}
	if o.down {
		return llm.Response{}, fmt.Errorf("http status 503: service unavailable")
	}
	return o.longModel.Chat(ctx, req)
}

// A provider outage that begins with the summary request loses nothing:
// the conversation stays shortened, not cut, for the resume.
func TestOutageDuringSummaryLosesNoWork(t *testing.T) {
	counter := tokens.ForModel("gpt-4o")
	budget := engine.Budget{ContextLength: 16384, Reserve: 2048, Counter: counter}
	m := &outage{longModel: &longModel{turns: 200, counter: counter}}
	w2 := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
	e, _ := engine.New(engine.Options{LLM: m, Tools: tools{Host: startHost(t)}, State: w2, Budget: budget})
	l, _ := agent.New(e, agent.Options{})
	_, err := l.Run(t.Context(), engine.Input{Task: task.Task{Ref: ref, Title: "Read outputs", Body: "Call test/big."}, Post: w2})
	if err == nil {
		t.Fatal("expected the outage to end the run with a system error")
	}
	var cp struct {
		Messages []llm.Message `json:"messages"`
	}
	if err := jsonOf(w2.cps[ref].Data, &cp); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cp.Messages[1].Content, "earlier messages were left out") {
		t.Errorf("after a failed summary request and a failed model request (%v), the checkpoint holds %d messages and says %q",
			err, len(cp.Messages), cp.Messages[1].Content[strings.Index(cp.Messages[1].Content, "[Context"):])
	}
}

// inflating reports 2.5 times the tokens its counter sees, and refuses
// requests over limit by that count (a tokenizer that splits finer than the
// engine's, e.g. CJK text under byte fallback).
type inflating struct {
	*longModel
	limit int
	over  []int
}

func (m *inflating) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	n, _ := m.size(req)
	real := n * 5 / 2
	if real > m.limit {
		m.over = append(m.over, real)
	}
	resp, err := m.longModel.Chat(ctx, req)
	resp.Usage.InputTokens = real
	return resp, err
}

// Once the server has shown it counts far more than the engine, a request
// that cannot be cut under the window is not sent: the run ends on an
// error saying so.
func TestScaledRequestStaysUnderTheLimit(t *testing.T) {
	counter := tokens.ForModel("gpt-4o")
	budget := engine.Budget{ContextLength: 4096, Reserve: 1024, Counter: counter}
	m := &inflating{longModel: &longModel{turns: 20, counter: counter}, limit: 3072}
	w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
	e, _ := engine.New(engine.Options{LLM: m, Tools: tools{Host: startHost(t)}, State: w, Budget: budget})
	l, err := agent.New(e, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := l.Run(t.Context(), engine.Input{Task: task.Task{Ref: ref, Title: "Read outputs", Body: "Call test/big."}, Post: w})
	t.Logf("%+v %v; system prompt %d tokens by the engine", out.End, err, counter.Count(m.requests[0].Messages[0].Content))
	if len(m.over) > 0 {
		t.Errorf("%d requests over the server's %d tokens: %v", len(m.over), m.limit, m.over)
	}
	if err != nil && !strings.Contains(err.Error(), "cannot be brought under the context window") {
		t.Errorf("the run ended on %v, want done or the error saying the conversation cannot fit", err)
	}
	if err == nil && out.End != engine.Done {
		t.Errorf("outcome %+v", out)
	}
}

// A task message larger than the budget (a long description in LM Studio's
// default 4096-token window) is cut in its middle: the newest comment, the
// one that says what to do now, stays.
func TestNewestCommentSurvivesTrimming(t *testing.T) {
	counter := tokens.ForModel("gpt-4o")
	budget := engine.Budget{ContextLength: 4096, Reserve: 1024, Counter: counter}
	m := &longModel{turns: 0, counter: counter}
	w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
	e, _ := engine.New(engine.Options{LLM: m, Tools: tools{Host: startHost(t)}, State: w, Budget: budget})
	l, _ := agent.New(e, agent.Options{})
	var body strings.Builder
	for i := 0; body.Len() < 18000; i++ {
		fmt.Fprintf(&body, "Line %d of the stack trace: at module%d.function%d (file%d.go:%d)\n", i, i*7, i*13, i, i*3)
	}
	in := engine.Input{Task: task.Task{Ref: ref, Title: "Crash", Body: body.String(), Author: "alice"}, Post: w,
		Comments: []task.Comment{{ID: 1, Author: "alice", Body: "Only fix the CHANGELOG entry, nothing else."}}}
	if _, err := l.Run(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if first := m.requests[0].Messages[1].Content; !strings.Contains(first, "CHANGELOG") {
		t.Errorf("the first request's task message (%d bytes) lost the newest comment; it ends %q", len(first), first[len(first)-120:])
	}
}

// overcounting answers its first request with a tool call and a usage far
// above what it was sent, as a server whose tokenizer splits far finer
// would; it records what it is asked.
type overcounting struct{ asked int }

func (m *overcounting) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	m.asked++
	return llm.Response{Message: llm.Message{Content: cmd("test/echo", `{"text": "hi"}`, "")},
		Usage: llm.Usage{InputTokens: 50 * len(req.Messages[0].Content)}}, nil
}

// When even the system prompt cannot be brought under the window by the
// server's count, the next request is not sent: the run ends on an error
// saying so, and the checkpoint keeps the conversation for a retry with a
// larger context_length.
func TestRequestThatCannotFitIsNotSent(t *testing.T) {
	budget := engine.Budget{ContextLength: 8192, Reserve: 1024, Counter: tokens.ForModel("gpt-4o")}
	m := &overcounting{}
	w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
	e, err := engine.New(engine.Options{LLM: m, Tools: tools{Host: startHost(t)}, State: w, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	l, err := agent.New(e, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Run(t.Context(), engine.Input{Task: task.Task{Ref: ref, Title: "Echo", Body: "Echo hi."}, Post: w})
	if err == nil || !strings.Contains(err.Error(), "cannot be brought under the context window") {
		t.Fatalf("err = %v, want the conversation refused as too large", err)
	}
	if m.asked != 1 {
		t.Errorf("the model was asked %d times, want 1: the second request was sent", m.asked)
	}
	var st struct {
		Messages []llm.Message `json:"messages"`
	}
	if err := jsonOf(w.cps[ref].Data, &st); err != nil || len(st.Messages) < 4 {
		t.Errorf("the checkpoint lost the conversation: %d messages, %v", len(st.Messages), err)
	}
}
