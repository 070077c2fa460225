package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/golden"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/ollama"
	"github.com/coding-agent/coding-agent/internal/llm/openai"
	"github.com/coding-agent/coding-agent/internal/llm/record"
	"github.com/coding-agent/coding-agent/internal/plan"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// recordingsDir holds recordings (llm.record's files) replayed by
// TestRecordings, each with the golden of what the engine does with them.
const recordingsDir = "testdata/recordings"

// daemonClient is the daemon's model client on wire, talking to srv as the
// app's does: the provider over the retry layer (without its waits) over
// wire.AnswerTransport, over rec when it is not nil.
func daemonClient(t *testing.T, wire string, srv *llmtest.Server, rec *record.Recorder) llm.Client {
	t.Helper()
	var base http.RoundTripper
	if rec != nil {
		base = rec.Transport(nil)
	}
	hc := llmtest.Retrying(base)
	var c llm.Client
	var err error
	if wire == llmtest.WireOpenAI {
		c, err = openai.New(openai.Options{BaseURL: srv.OpenAIURL(), Model: "test-model", HTTPClient: hc})
	} else {
		c, err = ollama.New(ollama.Options{Endpoint: srv.URL(), Model: "test-model", HTTPClient: hc})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// callLog is a toolset that notes the calls made through it.
type callLog struct {
	ts    engine.Tools
	mu    sync.Mutex
	calls []string
}

func (c *callLog) Tools() []toolhost.Tool           { return c.ts.Tools() }
func (c *callLog) Servers() []toolhost.ServerConfig { return c.ts.Servers() }
func (c *callLog) Call(ctx context.Context, name string, args json.RawMessage) (toolhost.Result, error) {
	c.mu.Lock()
	c.calls = append(c.calls, name+" "+string(compactJSON(args)))
	c.mu.Unlock()
	return c.ts.Call(ctx, name, args)
}

func compactJSON(b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}

// sample is a scripted run whose recording is kept in recordingsDir: the
// faults a server gives and shapes a model writes, on one wire, in one
// loop, each replayed by TestRecordings.
type sample struct {
	name, wire, loop string
	native           bool
	steps            []llmtest.Step
}

var samples = []sample{
	{name: "openai-native-plain", wire: llmtest.WireOpenAI, loop: "plain", native: true, steps: []llmtest.Step{
		llmtest.Fault{Status: 503}, // retried
		llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "test__echo", Args: map[string]string{"text": "one"}}}},
		llmtest.Garbage{}, // a body cut short: retried
		llmtest.Reply{Content: "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": \"two\"}}\n</tool_call>"},
		llmtest.Reply{Content: `{"done": true, "comment": "Echoed twice."}`},
	}},
	{name: "ollama-json-planning", wire: llmtest.WireOllama, loop: "planning", steps: []llmtest.Step{
		llmtest.Reply{Content: `{"phase": "planning", "goal_understanding": {"main_objective": "Echo", "success_criteria": ["echoed"]},
			"task_decomposition": {"subtasks": [{"id": "t1", "description": "echo"}]},
			"action_plan": {"actions": [{"id": "a1", "task_id": "t1", "description": "echo hi"}]}}`},
		llmtest.Fault{Status: 500, Body: `{"error": "model runner has unexpectedly stopped"}`}, // retried
		llmtest.Reply{Content: "<think>\nThe user wants an echo.\n</think>\n\n" + command},
		llmtest.Reply{Content: `{"phase": "execution", "action_id": "a1", "status": "completed", "summary": "echoed"}`},
		llmtest.Reply{Content: `{"phase": "verification", "verification": {"passed": true, "criteria": [{"criterion": "echoed", "met": true}]}, "comment": "Echoed."}`},
	}},
}

// recordSample runs s against a scripted server through the recorder,
// writing the recording to path, with a clock that ticks a millisecond a
// reading so that the file is the same each time.
func recordSample(t *testing.T, s sample, host *toolhost.Host, path string) (engine.Outcome, *callLog, *llmtest.Server, error) {
	t.Helper()
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(s.steps...)
	var tick atomic.Int64
	rec, err := record.Open(path, record.Options{Now: func() time.Time {
		return clock.Add(time.Duration(tick.Add(1)) * time.Millisecond)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	calls := &callLog{ts: tools{Host: host}}
	out, runErr := shapeRun(t, s.loop, newWorld(t), daemonClient(t, s.wire, srv, rec), calls, s.native)
	return out, calls, srv, runErr
}

// A recorded run, replayed through a fresh engine, ends the same way,
// after the same tool calls, having sent the same requests: each attempt's
// body equals the recorded one, the retried attempts' too.
func TestRecordingReplaysTheRun(t *testing.T) {
	host := startHost(t)
	for _, s := range samples {
		t.Run(s.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "model.jsonl")
			out, first, srv, err := recordSample(t, s, host, path)
			if err != nil || out.End != engine.Done {
				t.Fatalf("recorded run: %+v, %v", out, err)
			}
			replay := llmtest.NewServer(t, llmtest.Options{})
			entries := replay.ScriptRecording(path, "")
			second := &callLog{ts: tools{Host: host}}
			out2, err := shapeRun(t, s.loop, newWorld(t), daemonClient(t, s.wire, replay, nil), second, s.native)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(out, out2, sameOutcome); diff != "" {
				t.Errorf("outcome (-recorded +replayed):\n%s", diff)
			}
			if len(first.calls) == 0 || !slices.Equal(first.calls, second.calls) {
				t.Errorf("tool calls %q, replayed %q", first.calls, second.calls)
			}
			sent, resent := srv.Requests(), replay.Requests()
			if len(entries) != len(sent) || len(resent) != len(sent) || replay.Remaining() != 0 {
				t.Fatalf("%d attempts recorded, %d sent, %d replayed (%d answers left)", len(entries), len(sent), len(resent), replay.Remaining())
			}
			for i, e := range entries {
				if e.Task != ref.String() || e.Wire != s.wire {
					t.Errorf("line %d: task %q, wire %q", i, e.Task, e.Wire)
				}
				if got, want := compactJSON(resent[i].Body), compactJSON(sent[i].Body); !bytes.Equal(got, want) || !bytes.Equal(e.RequestBody(), want) {
					t.Errorf("attempt %d: replayed request\n%s\nrecorded\n%s\nsent\n%s", i+1, got, e.RequestBody(), want)
				}
			}
		})
	}
}

// The samples in recordingsDir are what the recorder makes of their
// scripted runs: the same answers in the same order, on the same wire
// (their requests follow the prompts, which change; with -update the
// files are made again).
func TestRecordingSamples(t *testing.T) {
	host := startHost(t)
	for _, s := range samples {
		t.Run(s.name, func(t *testing.T) {
			kept := filepath.Join(recordingsDir, s.name+".jsonl")
			path := filepath.Join(t.TempDir(), "model.jsonl")
			if out, _, _, err := recordSample(t, s, host, path); err != nil || out.End != engine.Done {
				t.Fatalf("recorded run: %+v, %v", out, err)
			}
			if golden.Updating() {
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(kept, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			answers := func(es []record.Entry) []string {
				var out []string
				for _, e := range es {
					out = append(out, fmt.Sprintf("%s %s %d %s %s %s", e.Task, e.Wire, e.Status, e.ContentType, e.Response, e.Error))
				}
				return out
			}
			if diff := cmp.Diff(answers(llmtest.ReadRecording(t, kept)), answers(llmtest.ReadRecording(t, path))); diff != "" {
				t.Errorf("%s is not what the recorder makes of its run (go test -run TestRecordingSamples -update) (-kept +made):\n%s", kept, diff)
			}
		})
	}
}

// Every recording in recordingsDir (a sample, or one attached to a bug
// report) is replayed through engine.Run, and what the engine does with
// its answers is compared with its golden (go test -run TestRecordings
// -update writes it). The run is set up from the recording's first
// request: its wire, native tool calls when it offered tools, the
// planning loop when its system prompt is planning mode's, and the tools
// its prompt lists, each answering with a fixed text (their real results
// are not in a recording). The task is the test's own, so the requests
// differ from the recorded ones; the summaries of a compaction are left
// out. A request past the recorded answers is answered 400: the run ends
// there, and the golden says so.
func TestRecordings(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(recordingsDir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings in %s: %v", recordingsDir, err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".jsonl")
		t.Run(name, func(t *testing.T) {
			entries := slices.DeleteFunc(llmtest.TaskEntries(t, llmtest.ReadRecording(t, file), ""), summaryEntry)
			setup := replaySetup(t, entries)
			var ranOut atomic.Bool
			srv := llmtest.NewServer(t, llmtest.Options{Responder: func(llmtest.Received) llmtest.Step {
				ranOut.Store(true)
				return llmtest.Fault{Status: http.StatusBadRequest}
			}})
			for _, e := range entries {
				srv.Script(llmtest.Answer(t, e))
			}
			calls := &callLog{ts: setup.tools}
			out, err := setup.run(t, daemonClient(t, setup.wire, srv, nil), calls)
			golden.Check(t, "recordings/"+name, setup.report(out, err, ranOut.Load(), calls.calls, len(entries), len(srv.Requests())))
		})
	}
}

// summaryEntry reports whether e is a request for a compaction's summary.
func summaryEntry(e record.Entry) bool {
	msgs, _ := recordedRequest(e)
	return len(msgs) > 0 && msgs[0] == summaryPrompt
}

// replay is how a recording is run again.
type replay struct {
	wire, loop  string
	native      bool
	prePlanning bool // planning mode's first phase was on
	tools       replayTools
}

// run runs the test's task under the recording's loop, planning mode
// with the configuration's defaults (the recorded prompt says whether
// pre-planning was on).
func (r replay) run(t *testing.T, m llm.Client, ts engine.Tools) (engine.Outcome, error) {
	t.Helper()
	w := newWorld(t)
	e, err := engine.New(engine.Options{LLM: m, Tools: ts, State: w, FunctionCalling: r.native, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	in := engine.Input{Task: task.Task{Ref: ref, Title: "Echo hi", Body: "Please echo hi.", Author: "alice"}, Post: w}
	if r.loop == "plain" {
		l, err := agent.New(e, agent.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Run(t.Context(), in)
	}
	d := config.Default().Planning
	c, err := plan.New(plan.Options{Engine: e, Forge: w, Lang: report.English, Settings: plan.Settings{
		MaxSubtasks: d.MaxSubtasks, DecompositionLevel: d.DecompositionLevel,
		PrePlanning: r.prePlanning, MaxGatherCalls: d.PrePlanning.MaxToolCalls,
		MaxCallsPerAction: d.Execution.MaxLLMCallsPerAction, MaxAttempts: d.Execution.MaxAttemptsPerAction,
		Reflection: d.Reflection.Enabled, ReflectOnError: d.Reflection.TriggerOnError, ReflectEvery: d.Reflection.TriggerInterval,
		MaxRevisions: d.Revision.MaxRevisions, Verification: d.Verification.Enabled, MaxVerifyRounds: d.Verification.MaxRounds,
		MaxReplans: d.Replan.MaxReplans, CallComments: d.LLMCallComments.Enabled, HistoryDir: w.history}})
	if err != nil {
		t.Fatal(err)
	}
	return c.Run(t.Context(), in)
}

func (r replay) report(out engine.Outcome, err error, ranOut bool, calls []string, answers, requests int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "wire: %s\nloop: %s\nnative tool calls: %v\n", r.wire, r.loop, r.native)
	if r.loop == "planning" {
		fmt.Fprintf(&b, "pre-planning: %v\n", r.prePlanning)
	}
	fmt.Fprintf(&b, "recorded answers: %d\nrequests made: %d\n", answers, requests)
	b.WriteString("tool calls:\n")
	for _, c := range calls {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	switch {
	case ranOut:
		b.WriteString("end: the recording ran out of answers\n")
	case err != nil:
		fmt.Fprintf(&b, "end: error: %s\n", regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(err.Error(), "127.0.0.1:PORT"))
	default:
		fmt.Fprintf(&b, "end: %s\nreason: %s\ncomment: %s\n", out.End, out.Reason, out.Comment)
	}
	return b.String()
}

// replaySetup reads the run's setup from the first recorded request.
func replaySetup(t *testing.T, entries []record.Entry) replay {
	t.Helper()
	msgs, defs := recordedRequest(entries[0])
	if len(msgs) == 0 {
		t.Fatalf("the first recorded request holds no system prompt:\n%s", entries[0].RequestBody())
	}
	r := replay{wire: entries[0].Wire, loop: "plain", native: len(defs) > 0}
	if strings.Contains(msgs[0], "working in planning mode") {
		r.loop = "planning"
		r.prePlanning = strings.Contains(msgs[0], "\n1. Pre-planning: ")
	}
	r.tools = toolsOfPrompt(msgs[0], defs)
	if len(r.tools.list) == 0 {
		t.Fatalf("the recorded system prompt lists no tools:\n%s", msgs[0])
	}
	return r
}

// recordedRequest is the text of the messages a recorded request sent and
// the parameters of the functions it offered, by name: both wires write
// them alike.
func recordedRequest(e record.Entry) ([]string, map[string]json.RawMessage) {
	var body struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if json.Unmarshal(e.RequestBody(), &body) != nil {
		return nil, nil
	}
	var msgs []string
	for _, m := range body.Messages {
		var s string
		_ = json.Unmarshal(m.Content, &s)
		msgs = append(msgs, s)
	}
	defs := map[string]json.RawMessage{}
	for _, d := range body.Tools {
		defs[d.Function.Name] = d.Function.Parameters
	}
	return msgs, defs
}

// promptTool is a line of the tool list of a system prompt:
// "- server/tool (function fn): description (read-only)" with native calls,
// "- server/tool: description (read-only)" in the JSON protocol.
var promptTool = regexp.MustCompile(`^- ([A-Za-z0-9_.-]+/[^\s:(]+)(?: \(function ([A-Za-z0-9_-]+)\))?(?:: (.*))?$`)

// toolsOfPrompt are the tools the system prompt lists, with their
// parameters from defs when the request offered them as functions (any
// object otherwise); the engine's own catalog search is left to it.
func toolsOfPrompt(system string, defs map[string]json.RawMessage) replayTools {
	var r replayTools
	for _, line := range strings.Split(system, "\n") {
		m := promptTool.FindStringSubmatch(line)
		if m == nil || m[1] == engine.SearchTool {
			continue
		}
		server, name, _ := strings.Cut(m[1], "/")
		desc, readOnly := strings.CutSuffix(m[3], " (read-only)")
		schema := json.RawMessage(`{"type": "object"}`)
		if p, ok := defs[m[2]]; ok && len(p) > 0 {
			schema = p
		}
		r.list = append(r.list, toolhost.Tool{Server: server, Name: name, Description: desc, InputSchema: schema, ReadOnly: readOnly})
		if !slices.ContainsFunc(r.servers, func(s toolhost.ServerConfig) bool { return s.Name == server }) {
			r.servers = append(r.servers, toolhost.ServerConfig{Name: server})
		}
	}
	return r
}

// replayTools are a recording's tools: each call is answered with a fixed
// text, since a recording holds the model's side only.
type replayTools struct {
	list    []toolhost.Tool
	servers []toolhost.ServerConfig
}

func (r replayTools) Tools() []toolhost.Tool           { return slices.Clone(r.list) }
func (r replayTools) Servers() []toolhost.ServerConfig { return slices.Clone(r.servers) }
func (r replayTools) Call(_ context.Context, name string, _ json.RawMessage) (toolhost.Result, error) {
	text := "(replayed: the result of " + name + " is not in the recording)"
	return toolhost.Result{Text: text, Bytes: len(text)}, nil
}
