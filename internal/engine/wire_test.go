package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/plan"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/task"
)

// The wire as servers really speak it, through engine.Run in both loops:
// each behaviour ends in the intended action or in a failure that quotes
// the server. The model client is the daemon's: the provider over the
// retry layer over wire.AnswerTransport.

var (
	wires = []string{llmtest.WireOpenAI, llmtest.WireOllama}
	loops = []string{"plain", "planning"}
)

// wireRun runs the task on w in loop with the engine options o (the model,
// tools and state filled in).
func wireRun(t *testing.T, loop string, w *world, m llm.Client, ts engine.Tools, o engine.Options) (engine.Outcome, error) {
	t.Helper()
	o.LLM, o.Tools = m, ts
	in := engine.Input{Task: task.Task{Ref: ref, Title: "Echo hi", Body: "Please echo hi.", Author: "alice"}, Post: w}
	return loopRun(t, loop, w, o, in, plan.Settings{
		MaxSubtasks: 10, DecompositionLevel: "moderate", MaxCallsPerAction: 10, MaxAttempts: 2,
		MaxRevisions: 1, Verification: true, MaxVerifyRounds: 1, MaxReplans: 1, CallComments: true})
}

// loopRun runs in on w through loop ("plain" or "planning", with settings
// and w's history folder) with the engine options o, the state and the
// clock filled in.
func loopRun(t *testing.T, loop string, w *world, o engine.Options, in engine.Input, settings plan.Settings) (engine.Outcome, error) {
	t.Helper()
	o.State, o.Now = w, func() time.Time { return clock }
	e, err := engine.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if loop == "plain" {
		l, err := agent.New(e, agent.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Run(t.Context(), in)
	}
	settings.HistoryDir = w.history
	c, err := plan.New(plan.Options{Engine: e, Forge: w, Lang: report.English, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	return c.Run(t.Context(), in)
}

// script puts the loop's replies before and after steps on srv (the plan
// first in planning, the end after), and returns how many come before.
func script(srv *llmtest.Server, loop string, steps ...llmtest.Step) int {
	before, after := shapeScript(loop)
	for _, c := range before {
		srv.Script(llmtest.Reply{Content: c})
	}
	srv.Script(steps...)
	for _, c := range after {
		srv.Script(llmtest.Reply{Content: c})
	}
	return len(before)
}

const echoCommand = `{"comment": "Echoing.", "command": {"tool": "test/echo", "args": {"text": "hi"}}}`

// results counts the tool results of test/echo a request carries.
func results(r llmtest.Received) int {
	n := 0
	for _, m := range r.Messages {
		n += strings.Count(m.Content, "tool output of test/echo")
	}
	return n
}

// A server error sent with status 200 is retried like a 5xx; when it goes
// on, the run fails on an error quoting the server's message (the failure
// comment's reason; planning also reports it on the task), not "the reply
// was empty"; when it goes away, the run carries on.
func TestServerErrorIn200(t *testing.T) {
	host := startHost(t)
	bodies := map[string]string{
		llmtest.WireOpenAI: `{"error":{"message":"Upstream error: the model is overloaded","type":"server_error","code":503}}`,
		llmtest.WireOllama: `{"error":"model runner has unexpectedly stopped, this may be due to resource limitations"}`,
	}
	messages := map[string]string{
		llmtest.WireOpenAI: "Upstream error: the model is overloaded",
		llmtest.WireOllama: "model runner has unexpectedly stopped, this may be due to resource limitations",
	}
	for _, wire := range wires {
		for _, loop := range loops {
			t.Run(wire+"/"+loop, func(t *testing.T) {
				srv := llmtest.NewServer(t, llmtest.Options{})
				for range 4 {
					srv.Script(llmtest.Garbage{Body: bodies[wire]})
				}
				w := newWorld(t)
				_, err := wireRun(t, loop, w, daemonClient(t, wire, srv, nil), tools{Host: host}, engine.Options{})
				want := "the server answered status 200 with an error: " + messages[wire]
				if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "empty") {
					t.Fatalf("error %v, want one quoting %q", err, want)
				}
				if n := len(srv.Requests()); n != 4 {
					t.Errorf("requests = %d, want 4: the error retried 3 times", n)
				}
				if loop == "planning" && !commented(w, messages[wire]) {
					t.Errorf("no comment quotes the server: %v", w.comments)
				}
			})
			t.Run(wire+"/"+loop+"/recovers", func(t *testing.T) {
				srv := llmtest.NewServer(t, llmtest.Options{})
				srv.Script(llmtest.Garbage{Body: bodies[wire]})
				n := script(srv, loop, llmtest.Reply{Content: echoCommand})
				out, err := wireRun(t, loop, newWorld(t), daemonClient(t, wire, srv, nil), tools{Host: host}, engine.Options{})
				if err != nil || out.End != engine.Done {
					t.Fatalf("outcome %+v, %v", out, err)
				}
				reqs := srv.Requests()
				if string(reqs[0].Body) != string(reqs[1].Body) {
					t.Errorf("the second request is not the first sent again:\n%s\n%s", reqs[0].Body, reqs[1].Body)
				}
				if results(reqs[n+2]) != 1 {
					t.Errorf("the echo did not run")
				}
			})
		}
	}
}

func commented(w *world, text string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.comments {
		if strings.Contains(c, text) {
			return true
		}
	}
	return false
}

// A server that streams although no stream was asked for is read on the
// first attempt: the call in it runs (native or written as JSON), and the
// run ends done with no request retried.
func TestUnaskedStreamIsRead(t *testing.T) {
	host := startHost(t)
	for _, wire := range wires {
		for _, loop := range loops {
			for _, native := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/native=%v", wire, loop, native), func(t *testing.T) {
					reply := llmtest.Reply{Content: echoCommand, Reasoning: "I will echo."}
					if native {
						reply = llmtest.Reply{Content: "Echoing.", ToolCalls: []llmtest.Call{{Name: "test__echo", Args: map[string]string{"text": "hi"}}}}
					}
					srv := llmtest.NewServer(t, llmtest.Options{})
					n := script(srv, loop, llmtest.Streamed{Reply: reply})
					out, err := wireRun(t, loop, newWorld(t), daemonClient(t, wire, srv, nil), tools{Host: host}, engine.Options{FunctionCalling: native})
					if err != nil || out.End != engine.Done {
						t.Fatalf("outcome %+v, %v", out, err)
					}
					reqs := srv.Requests()
					if srv.Remaining() != 0 || results(reqs[n+1]) != 1 {
						t.Errorf("%d steps left, %d echo results after the stream; want none left and one", srv.Remaining(), results(reqs[n+1]))
					}
				})
			}
		}
	}
}

var nineChars = regexp.MustCompile(`^[a-zA-Z0-9]{9}$`)

// Native calls over several steps against a server that refuses tool call
// ids not nine letters and digits (vLLM with a Mistral model): ids the
// server made in another shape, calls without an id and a server that
// repeats its ids all go back in its shape, and the run ends done.
func TestToolCallIDsAMistralServerTakes(t *testing.T) {
	host := startHost(t)
	echo := func(text string, c llmtest.Call) llmtest.Reply {
		c.Name, c.Args = "test__echo", map[string]string{"text": text}
		return llmtest.Reply{ToolCalls: []llmtest.Call{c}}
	}
	for _, loop := range loops {
		t.Run(loop, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{MistralToolCallIDs: true})
			script(srv, loop,
				echo("one", llmtest.Call{}), // call_<request>_0, as llama.cpp's and others' ids
				echo("two", llmtest.Call{ID: "chatcmpl-tool-e5add885dbb342de950be95dd89b71e7"}),
				echo("three", llmtest.Call{NoID: true}),
				echo("four", llmtest.Call{ID: "A1b2C3d4E"}),
				echo("five", llmtest.Call{ID: "A1b2C3d4E"}), // the server repeats an id
			)
			out, err := wireRun(t, loop, newWorld(t), daemonClient(t, llmtest.WireOpenAI, srv, nil), tools{Host: host},
				engine.Options{FunctionCalling: true})
			if err != nil || out.End != engine.Done {
				t.Fatalf("outcome %+v, %v", out, err)
			}
			if srv.Remaining() != 0 {
				t.Errorf("%d steps left", srv.Remaining())
			}
			reqs := srv.Requests()
			last := reqs[len(reqs)-1]
			ids := map[string]bool{}
			for _, m := range last.Messages {
				for _, c := range m.ToolCalls {
					if !nineChars.MatchString(c.ID) || ids[c.ID] {
						t.Errorf("id %q sent", c.ID)
					}
					ids[c.ID] = true
				}
			}
			if len(ids) != 5 || !ids["A1b2C3d4E"] || results(last) != 5 {
				t.Errorf("ids %v, %d results in the last request; want five ids, the server's valid one kept, five results", ids, results(last))
			}
		})
	}
}

// A tool call cut at the output token limit, native (its arguments cut) or
// written as JSON (cut inside its object), is told so with the limit; the
// next request may reply with twice the reserve; cut again, the model is
// told the raised limit was not enough and it is not raised further; the
// first reply not cut brings the limit back to the reserve.
func TestCutCallRaisesTheLimitOnce(t *testing.T) {
	host := startHost(t)
	budget := engine.Budget{ContextLength: 16384, Reserve: 512}
	for _, wire := range wires {
		for _, loop := range loops {
			for _, native := range []bool{false, true} {
				if native && wire == llmtest.WireOllama {
					continue // Ollama parses calls itself: a cut one arrives as text, the JSON case
				}
				t.Run(fmt.Sprintf("%s/%s/native=%v", wire, loop, native), func(t *testing.T) {
					cut := llmtest.Reply{Content: `{"comment": "Echoing.", "command": {"tool": "test/echo", "args": {"text": "a long te`, FinishReason: "length"}
					whole := llmtest.Reply{Content: echoCommand}
					if native {
						cut = llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "test__echo", Args: json.RawMessage(`{"text": "a long te`)}}, FinishReason: "length"}
						whole = llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "test__echo", Args: map[string]string{"text": "hi"}}}}
					}
					srv := llmtest.NewServer(t, llmtest.Options{})
					n := script(srv, loop, cut, cut, whole)
					out, err := wireRun(t, loop, newWorld(t), daemonClient(t, wire, srv, nil), tools{Host: host},
						engine.Options{FunctionCalling: native, Budget: budget})
					if err != nil || out.End != engine.Done {
						t.Fatalf("outcome %+v, %v", out, err)
					}
					reqs := srv.Requests()
					limits := []int{reqs[n].MaxTokens, reqs[n+1].MaxTokens, reqs[n+2].MaxTokens, reqs[n+3].MaxTokens}
					if fmt.Sprint(limits) != "[0 1024 1024 0]" {
						t.Errorf("reply limits %v, want the reserve (0: the client's), twice it twice, the reserve", limits)
					}
					first, second := lastUser(reqs[n+1]), lastUser(reqs[n+2])
					if !strings.Contains(first, "cut off at the output token limit") || !strings.Contains(first, "the limit was 512 tokens, and is raised to 1024 tokens") {
						t.Errorf("first correction:\n%s", first)
					}
					if !strings.Contains(second, "cut off at the output token limit") || !strings.Contains(second, "at the raised limit of 1024 tokens; it is not raised further") {
						t.Errorf("second correction:\n%s", second)
					}
					if native && !strings.Contains(first, "call of test__echo was cut off") {
						t.Errorf("the correction does not name the call:\n%s", first)
					}
					if results(reqs[n+3]) != 1 {
						t.Errorf("the whole call did not run")
					}
				})
			}
		}
	}
}

func lastUser(r llmtest.Received) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == llm.User {
			return r.Messages[i].Content
		}
	}
	return ""
}

// requestTokens counts a request as the engine does (llm.Estimate, no
// scale: the scripted server reports no usage).
func requestTokens(r llmtest.Received) int {
	c := llm.Estimate{}
	n := 0
	for _, m := range r.Messages {
		n += 4 + c.Count(m.Content)
		for _, tc := range m.ToolCalls {
			n += 4 + c.Count(tc.Name) + c.Count(string(tc.Arguments))
		}
	}
	for _, t := range r.Tools {
		n += 4 + c.Count(t.Name) + c.Count(t.Description) + c.Count(string(t.Parameters))
	}
	return n
}

// Where the window leaves less than twice the reserve beside the request,
// the raised limit is what it leaves: no request passes the window.
func TestRaisedLimitStaysInsideTheWindow(t *testing.T) {
	host := startHost(t)
	srv := llmtest.NewServer(t, llmtest.Options{})
	cut := llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "test__echo", Args: json.RawMessage(`{"text": "a long te`)}}, FinishReason: "length"}
	srv.Script(cut, llmtest.Reply{Content: `{"done": true, "comment": "Echoed."}`})
	// The system prompt and the tools take about 1,200 tokens: 3,000 of
	// the window are left for a reply, less than twice the reserve.
	budget := engine.Budget{ContextLength: 5000, Reserve: 2000}
	out, err := wireRun(t, "plain", newWorld(t), daemonClient(t, llmtest.WireOpenAI, srv, nil), tools{Host: host},
		engine.Options{FunctionCalling: true, Budget: budget})
	if err != nil || out.End != engine.Done {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	r := srv.Requests()[1]
	if r.MaxTokens <= budget.Reserve || r.MaxTokens >= 2*budget.Reserve || requestTokens(r)+r.MaxTokens > budget.ContextLength {
		t.Errorf("raised limit %d with a request of %d tokens in a %d window; want more than the reserve %d, within the window",
			r.MaxTokens, requestTokens(r), budget.ContextLength, budget.Reserve)
	}
	if !strings.Contains(lastUser(r), fmt.Sprintf("is raised to %d tokens", r.MaxTokens)) {
		t.Errorf("the correction does not say the limit sent (%d):\n%s", r.MaxTokens, lastUser(r))
	}
}

// The raised limit is in the checkpoint: a run stopped after a cut reply
// resumes with it.
func TestRaisedLimitSurvivesAResume(t *testing.T) {
	host := startHost(t)
	srv := llmtest.NewServer(t, llmtest.Options{})
	cut := llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "test__echo", Args: json.RawMessage(`{"text": "a long te`)}}, FinishReason: "length"}
	srv.Script(cut, llmtest.Reply{Content: `{"done": true, "comment": "Echoed."}`})
	o := engine.Options{FunctionCalling: true, Budget: engine.Budget{ContextLength: 16384, Reserve: 512}}
	w := newWorld(t)
	m := daemonClient(t, llmtest.WireOpenAI, srv, nil)
	if _, err := wireRun(t, "plain", w, &killAt{Client: m, at: 2}, tools{Host: host}, o); !errors.Is(err, errKilled) {
		t.Fatalf("first run: %v, want killed", err)
	}
	out, err := wireRun(t, "plain", w, m, tools{Host: host}, o)
	if err != nil || out.End != engine.Done {
		t.Fatalf("resumed: %+v, %v", out, err)
	}
	if got := srv.Requests()[1].MaxTokens; got != 1024 {
		t.Errorf("the resumed request's limit is %d, want the raised 1024", got)
	}
}

// An empty call (no name, no id, no arguments) beside the final answer is
// ignored: the run ends done on that answer, and no request is refused.
func TestEmptyCallBesideFinalAnswer(t *testing.T) {
	host := startHost(t)
	for _, wire := range wires {
		for _, loop := range loops {
			t.Run(wire+"/"+loop, func(t *testing.T) {
				srv := llmtest.NewServer(t, llmtest.Options{})
				before, after := shapeScript(loop)
				for _, c := range before {
					srv.Script(llmtest.Reply{Content: c})
				}
				srv.Script(llmtest.Reply{Content: "Echoing.", ToolCalls: []llmtest.Call{{Name: "test__echo", Args: map[string]string{"text": "hi"}}}})
				for i, c := range after {
					r := llmtest.Reply{Content: c}
					if i == len(after)-1 {
						r.ToolCalls = []llmtest.Call{{NoID: true}}
					}
					srv.Script(r)
				}
				w := newWorld(t)
				out, err := wireRun(t, loop, w, daemonClient(t, wire, srv, nil), tools{Host: host}, engine.Options{FunctionCalling: true})
				if err != nil || out.End != engine.Done || !strings.Contains(out.Comment+strings.Join(commentsOf(w), ""), "Echoed.") {
					t.Fatalf("outcome %+v, %v", out, err)
				}
				if srv.Remaining() != 0 {
					t.Errorf("%d steps left", srv.Remaining())
				}
			})
		}
	}
}

func commentsOf(w *world) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, c := range w.comments {
		out = append(out, c)
	}
	return out
}

// olderModel answers the first request with a call that has an id and
// arguments but no name, as a conversation stored before nameless calls
// were dropped on arrival holds one, and passes the rest to the server.
type olderModel struct {
	llm.Client
	asked int
}

func (m *olderModel) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	m.asked++
	if m.asked == 1 {
		return llm.Response{Message: llm.Message{Role: llm.Assistant, ToolCalls: []llm.ToolCall{
			{ID: "call_2_0", Arguments: json.RawMessage(`{"text":"hi"}`)}}}, FinishReason: "tool_calls"}, nil
	}
	return m.Client.Chat(ctx, req)
}

// A nameless call in the conversation never makes a request that cannot be
// sent: the run goes on to its end instead of failing on every resume (the
// plain loop questions the first done after a failed call).
func TestNamelessCallInTheConversation(t *testing.T) {
	host := startHost(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			done := llmtest.Reply{Content: `{"done": true, "comment": "Echoed."}`}
			srv.Script(done, done)
			out, err := wireRun(t, "plain", newWorld(t), &olderModel{Client: daemonClient(t, wire, srv, nil)}, tools{Host: host},
				engine.Options{FunctionCalling: true})
			if err != nil || out.End != engine.Done {
				t.Fatalf("outcome %+v, %v", out, err)
			}
			for _, r := range srv.Requests() {
				for _, m := range r.Messages {
					for _, c := range m.ToolCalls {
						if c.Name == "" {
							t.Errorf("a nameless call was sent: %+v", c)
						}
					}
				}
			}
		})
	}
}
