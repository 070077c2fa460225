package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/tokens"
	"github.com/coding-agent/coding-agent/internal/plan"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// A kill at any point a run can be at (each model request, each tool call)
// followed by a resume from what was saved ends exactly as a run never
// killed: the same outcome, the same comments, the same planning history,
// and no model request made twice except the one the kill cut off. The
// kill is a snapshot of everything durable (checkpoints, history file,
// comments) taken at that point; the resumed run starts from the snapshot.

var errKilled = errors.New("killed")

// sameOutcome compares outcomes but for the keys of their comments, whose
// run id each run picks.
var sameOutcome = cmpopts.IgnoreFields(engine.Outcome{}, "Keys")

// runID is a comment key's run id (postonce.Mark).
var runID = regexp.MustCompile(`(<!-- coding-agent comment: )[0-9a-f]{12}/`)

// sameRun is comments with the run id of their keys replaced by RUN: the
// runs compared pick their own, while the rest of each key (its number,
// what it is) must be the same.
func sameRun(comments map[int64]string) map[int64]string {
	out := make(map[int64]string, len(comments))
	for id, body := range comments {
		out[id] = runID.ReplaceAllString(body, "${1}RUN/")
	}
	return out
}

var ref = task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 9}

// world is what outlives a process: the store, the forge's comments, the
// planning history. Its comments are posted through report.Poster, as the
// daemon posts them.
type world struct {
	mu       sync.Mutex
	cps      map[task.Ref]store.Checkpoint
	comments map[int64]string // id → body, as edited
	created  map[int64]time.Time
	nextID   int64
	history  string // directory
	// saved, when set, is called after every checkpoint saved: a kill
	// right after a save (checks_test.go).
	saved func() error
	// kill, when set, is told of every comment posted, once it landed,
	// and saves nothing once the process it kills is dead.
	kill *kill
}

// bot is the world's forge user.
const bot = "coding-agent"

func (w *world) SaveCheckpoint(_ context.Context, r task.Ref, cp store.Checkpoint) error {
	if w.kill != nil && w.kill.dead {
		return errKilled
	}
	w.mu.Lock()
	w.cps[r] = cp
	saved := w.saved
	w.mu.Unlock()
	if saved != nil {
		return saved() // a kill right after this save
	}
	return nil
}

func (w *world) LoadCheckpoint(_ context.Context, r task.Ref) (store.Checkpoint, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cp, ok := w.cps[r]
	return cp, ok, nil
}

func (w *world) AddCounters(context.Context, task.Ref, store.Counters) error { return nil }

func (w *world) PostComment(_ context.Context, _ task.Ref, body string) (task.Comment, error) {
	if w.kill != nil && w.kill.dead {
		return task.Comment{}, errKilled
	}
	w.mu.Lock()
	w.nextID++
	id := w.nextID
	w.comments[id] = body
	if w.created == nil {
		w.created = map[int64]time.Time{}
	}
	w.created[id] = time.Now()
	w.mu.Unlock()
	if w.kill != nil {
		// Landed: a kill here leaves the comment on the forge and the
		// process none the wiser.
		if err := w.kill.event("comment"); err != nil {
			return task.Comment{}, err
		}
	}
	return task.Comment{ID: id, Author: bot, Body: body}, nil
}

func (w *world) EditComment(_ context.Context, _ task.Ref, id int64, body string) error {
	if w.kill != nil && w.kill.dead {
		return errKilled
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.comments[id] = body
	return nil
}

func (w *world) CommentsSince(_ context.Context, _ task.Ref, since time.Time) ([]task.Comment, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []task.Comment
	for _, id := range slices.Sorted(maps.Keys(w.comments)) {
		if at := w.created[id]; !at.Before(since) {
			out = append(out, task.Comment{ID: id, Author: bot, Body: w.comments[id], CreatedAt: at})
		}
	}
	return out, nil
}

func (w *world) BotUser(context.Context) (string, error) { return bot, nil }

// Post posts as the worker does, through a report.Poster.
func (w *world) Post(ctx context.Context, key engine.Key, body string) error {
	return report.NewPoster(report.PosterOptions{Commenter: w, Ref: ref}).Post(ctx, key, body)
}

// snapshot is the world as a SIGKILL would leave it.
func (w *world) snapshot(t *testing.T) *world {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &world{cps: maps.Clone(w.cps), comments: maps.Clone(w.comments), created: maps.Clone(w.created), nextID: w.nextID,
		history: t.TempDir()}
	entries, _ := os.ReadDir(w.history)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(w.history, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.history, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (w *world) historyText(t *testing.T) string {
	data, err := os.ReadFile(filepath.Join(w.history, plan.HistoryFile(ref)))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(data)
}

// kill ends a process at its n-th event of one kind (a model request or a
// tool call: the one whose component holds the kill; or a comment landed,
// for a kill whose point is "comment"), saving what it left behind. Once
// dead, every component holding it fails.
type kill struct {
	at    int
	n     int
	point string // "comment", or "" for the model's or the tools' events
	t     *testing.T
	w     *world
	left  *world
	dead  bool
}

// now is a model request or a tool call happening.
func (k *kill) now() error { return k.event("") }

func (k *kill) event(kind string) error {
	if k.dead {
		return errKilled
	}
	if kind != k.point {
		return nil
	}
	k.n++
	if k.n == k.at {
		k.left = k.w.snapshot(k.t)
		k.dead = true
		return errKilled
	}
	return nil
}

// model answers with script, in order.
type model struct {
	script []string
	asked  int
	kill   *kill
	// cutOff counts the requests that tell the model a tool call was cut
	// off by a restart.
	cutOff int
}

// cutOffNote is how a resumed run's tool result says its call was cut off
// by the restart, as a server's crash is said: it may or may not have taken
// effect.
const cutOffNote = "This call was cut off by a restart of the agent before its result was recorded, and was run again"

func (m *model) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	if req.Messages[0].Content == summaryPrompt {
		return llm.Response{Message: llm.Message{Role: llm.Assistant, Content: "I echoed and looked at the results."}}, nil
	}
	if slices.ContainsFunc(req.Messages, func(m llm.Message) bool {
		return strings.Contains(m.Content, cutOffNote) && strings.Contains(m.Content, "may or may not have taken effect")
	}) {
		m.cutOff++
	}
	if m.kill != nil {
		if err := m.kill.now(); err != nil {
			return llm.Response{}, err
		}
	}
	if m.asked >= len(m.script) {
		return llm.Response{}, fmt.Errorf("script exhausted after %d replies", m.asked)
	}
	m.asked++
	return llm.Response{Message: llm.Message{Role: llm.Assistant, Content: m.script[m.asked-1]}}, nil
}

// tools are the in-memory test server's, killable at a call.
type tools struct {
	*toolhost.Host
	kill *kill
}

func (ts tools) Call(ctx context.Context, name string, args json.RawMessage) (toolhost.Result, error) {
	if ts.kill != nil {
		if err := ts.kill.now(); err != nil {
			return toolhost.Result{}, err
		}
	}
	return ts.Host.Call(ctx, name, args)
}

func startHost(t testing.TB) *toolhost.Host {
	t.Helper()
	h, err := toolhost.Start(t.Context(), toolhost.Options{
		Servers: []toolhost.ServerConfig{{Name: "test"}},
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

var clock = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// runner runs the task on w with the policy of loop ("plain" or
// "planning").
// summaryPrompt is the system prompt of the engine's summary requests.
const summaryPrompt = "You summarise a coding agent's work for the agent itself."

// runner runs the task on w with the policy of loop: "plain" or
// "planning", and with " compacting" a context window small enough that
// the conversation is compacted on the way.
func runner(t *testing.T, loop string, w *world, m llm.Client, ts engine.Tools, with ...func(*engine.Input)) func() (engine.Outcome, error) {
	t.Helper()
	o := engine.Options{LLM: m, Tools: ts, State: w, Now: func() time.Time { return clock }}
	if base, ok := strings.CutSuffix(loop, " compacting"); ok {
		loop = base
		o.Budget = engine.Budget{ContextLength: compactingWindow[base], Reserve: 256, Counter: tokens.ForModel("gpt-4o")}
	}
	e, err := engine.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return policyRun(t, loop, e, w, with...)
}

// compactingWindow is, per loop, a context window its scripted task
// outgrows while its system prompt and tools still pass Fits (half the
// budget). A prompt that grows or shrinks may need it moved: the test says
// which way (a refusal by Fits, or no compaction).
var compactingWindow = map[string]int{"plain": 1350, "planning": 2300}

// policyRun runs the task on w with engine e under loop's policy.
func policyRun(t *testing.T, loop string, e *engine.Engine, w *world, with ...func(*engine.Input)) func() (engine.Outcome, error) {
	t.Helper()
	in := engine.Input{Task: task.Task{Ref: ref, Title: "Echo things", Body: "Please echo.", Author: "alice"}, Post: w}
	for _, f := range with {
		f(&in)
	}
	if loop == "plain" {
		l, err := agent.New(e, agent.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return func() (engine.Outcome, error) { return l.Run(t.Context(), in) }
	}
	c, err := plan.New(plan.Options{Engine: e, Forge: w, Lang: report.English, Settings: plan.Settings{
		MaxSubtasks: 10, DecompositionLevel: "moderate", PrePlanning: true, MaxGatherCalls: 5, MaxCallsPerAction: 20,
		MaxAttempts: 2, Reflection: true, ReflectOnError: true, ReflectEvery: 3, MaxRevisions: 3, Verification: true,
		MaxVerifyRounds: 2, MaxReplans: 1, CallComments: true, HistoryDir: w.history}})
	if err != nil {
		t.Fatal(err)
	}
	return func() (engine.Outcome, error) { return c.Run(t.Context(), in) }
}

func cmd(tool, args, comment string) string {
	return fmt.Sprintf(`{"comment": %q, "command": {"tool": %q, "args": %s}}`, comment, tool, args)
}

var scripts = map[string][]string{
	"plain": {
		cmd("test/echo", `{"text": "one"}`, "Echoing one."),
		cmd("test/fail", `{}`, "Trying the broken tool."),
		cmd("test/echo", `{"text": "two"}`, ""),
		`{"done": true, "comment": "Echoed twice."}`,
	},
	// A plan a1, a2, a3; a2 fails; the reflection asks for a revision that
	// replaces a2 with a new action a4; then a4, a3 and a verification.
	"planning": {
		cmd("test/echo", `{"text": "look"}`, "Looking first."),
		`{"phase": "pre_planning", "understanding": {"goal": "echo", "deliverables": ["echoes"], "confidence": "high"}, "comment": "Understood."}`,
		`{"phase": "planning", "goal_understanding": {"main_objective": "Echo three things", "success_criteria": ["echoed"]},
		  "task_decomposition": {"subtasks": [{"id": "t1", "description": "echo"}]},
		  "action_plan": {"actions": [{"id": "a1", "task_id": "t1", "description": "echo one"},
		    {"id": "a2", "task_id": "t1", "description": "use the broken tool"}, {"id": "a3", "task_id": "t1", "description": "echo three"}]}}`,
		cmd("test/echo", `{"text": "one"}`, ""),
		`{"phase": "execution", "action_id": "a1", "status": "completed", "summary": "echoed one"}`,
		cmd("test/fail", `{}`, "Trying the broken tool."),
		`{"phase": "execution", "action_id": "a2", "status": "failed", "summary": "the tool is broken"}`,
		`{"phase": "reflection", "reflection": {"status": "failure", "evaluation": "a2 cannot work", "plan_revision_needed": true},
		  "plan_revision": {"reason": "replace a2", "changes": ["a4 instead of a2"]}}`,
		`{"phase": "revision", "reason": "a2 cannot work", "changes": ["a4 replaces a2"],
		  "action_plan": {"actions": [{"id": "a4", "task_id": "t1", "description": "echo two"}, {"id": "a3", "task_id": "t1", "description": "echo three"}]}}`,
		cmd("test/echo", `{"text": "two"}`, ""),
		`{"phase": "execution", "action_id": "a4", "status": "completed", "summary": "echoed two"}`,
		cmd("test/echo", `{"text": "three"}`, ""),
		`{"phase": "execution", "action_id": "a3", "status": "completed", "summary": "echoed three"}`,
		`{"phase": "verification", "verification": {"passed": true, "criteria": [{"criterion": "echoed", "met": true}]}, "comment": "All echoed."}`,
	},
}

func TestKillAtEveryPointThenResume(t *testing.T) {
	for _, loop := range []string{"plain", "planning", "plain compacting", "planning compacting"} {
		script := scripts[strings.TrimSuffix(loop, " compacting")]
		t.Run(loop, func(t *testing.T) {
			host := startHost(t)
			ref0 := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
			want, err := runner(t, loop, ref0, &model{script: script}, tools{Host: host})()
			if err != nil || want.End != engine.Done {
				t.Fatalf("the run never killed: %+v %v", want, err)
			}
			var counts struct {
				Compactions int `json:"compactions"`
			}
			if err := json.Unmarshal(ref0.cps[ref].Data, &counts); err != nil {
				t.Fatal(err)
			}
			if compacting := strings.HasSuffix(loop, "compacting"); compacting != (counts.Compactions > 0) {
				t.Fatalf("%d compactions in the run never killed", counts.Compactions)
			}
			toolCalls := 0
			for _, s := range script {
				if json.Valid([]byte(s)) && slices.Contains([]string{"test/echo", "test/fail"}, toolOf(s)) {
					toolCalls++
				}
			}
			// A comment is posted at most once: a kill right after one
			// landed, before anything saved that it did, is a point too.
			points := map[string]int{"request": len(script), "tool call": toolCalls, "comment": len(ref0.comments)}
			for _, point := range []string{"request", "tool call", "comment"} {
				for at := 1; at <= points[point]; at++ {
					t.Run(fmt.Sprintf("%s %d", point, at), func(t *testing.T) {
						w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
						k := &kill{at: at, t: t, w: w}
						m, ts := &model{script: script}, tools{Host: host}
						switch point {
						case "request":
							m.kill = k
						case "tool call":
							ts.kill = k
						case "comment":
							// The whole process dies: each part fails from then on.
							k.point, w.kill, m.kill, ts.kill = point, k, k, k
						}
						if _, err := runner(t, loop, w, m, ts)(); k.left == nil || point != "comment" && !errors.Is(err, errKilled) {
							t.Fatalf("the run was not killed: %v", err)
						}
						left, answered := k.left, m.asked
						// The resumed process: the model goes on where the
						// killed one was cut off.
						m2 := &model{script: script[answered:]}
						got, err := runner(t, loop, left, m2, tools{Host: host})()
						if err != nil {
							t.Fatalf("resumed run: %v", err)
						}
						if diff := cmp.Diff(want, got, sameOutcome); diff != "" {
							t.Errorf("outcome differs from a run never killed (-want +got):\n%s", diff)
						}
						if m2.asked != len(script)-answered {
							t.Errorf("the resumed run made %d requests, want %d", m2.asked, len(script)-answered)
						}
						// The model is told of the call the kill cut off, and of nothing else.
						if cut := m2.cutOff > 0; cut != (point == "tool call") {
							t.Errorf("%d requests say a tool call was cut off by the restart after a kill at a %s", m2.cutOff, point)
						}
						if ref0Model := m.cutOff; ref0Model != 0 {
							t.Errorf("the killed run's %d requests say a call was cut off", ref0Model)
						}
						wantComments, gotComments := sameRun(ref0.comments), sameRun(left.comments)
						if point == "tool call" && strings.HasSuffix(loop, "compacting") {
							// The note on the call run again makes the conversation
							// longer than the one never killed: in a window this
							// small it may be compacted once more, which the
							// receipt counts.
							wantComments, gotComments = maskCompactions(wantComments), maskCompactions(gotComments)
						}
						if diff := cmp.Diff(wantComments, gotComments); diff != "" {
							t.Errorf("comments differ from a run never killed (-want +got):\n%s", diff)
						}
						if got, want := left.historyText(t), ref0.historyText(t); got != want {
							t.Errorf("history:\n%s\nwant:\n%s", got, want)
						}
					})
				}
			}
		})
	}
}

// compactionCounts are the receipt's counts that include compactions: the
// model requests (summaries among them) and the compactions and summaries.
var compactionCounts = regexp.MustCompile(`(LLM calls: |Context compactions: |\(with )\d+`)

// maskCompactions hides compactionCounts in every comment.
func maskCompactions(comments map[int64]string) map[int64]string {
	out := make(map[int64]string, len(comments))
	for id, body := range comments {
		out[id] = compactionCounts.ReplaceAllString(body, "${1}N")
	}
	return out
}

// toolOf is the tool a scripted command names.
func toolOf(s string) string {
	var v struct {
		Command struct{ Tool string } `json:"command"`
	}
	_ = json.Unmarshal([]byte(s), &v)
	return v.Command.Tool
}

// A run that ended under the per-loop checkpoint format (version 1), its
// labels not yet set when the version changed, returns its outcome: the
// task is not worked on again, by either loop.
func TestEndedRunOfTheOlderFormatIsNotRunAgain(t *testing.T) {
	host := startHost(t)
	for _, tc := range []struct {
		loop, data string
		want       engine.Outcome
	}{
		{"plain", `{"version":1,"turn":1,"messages":[{"role":"system","content":"s"}],"final":{"status":"done","comment":"Finished.","turns":1}}`,
			engine.Outcome{End: engine.Done, Comment: "Finished.", Calls: 1}},
		{"planning", `{"version":1,"mode":"planning","phase":"verification","calls":7,"messages":[{"role":"system","content":"s"}],
			"final":{"status":"failed","reason":"verification failed: x","turns":7,"reported":true},"announced":true}`,
			engine.Outcome{End: engine.Failed, Reason: "verification failed: x", Calls: 7, Reported: true}},
	} {
		t.Run(tc.loop, func(t *testing.T) {
			w := &world{cps: map[task.Ref]store.Checkpoint{ref: {Step: 1, Data: []byte(tc.data)}}, comments: map[int64]string{}, history: t.TempDir()}
			m := &model{script: scripts[tc.loop]}
			out, err := runner(t, tc.loop, w, m, tools{Host: host})()
			if err != nil || !cmp.Equal(out, tc.want, sameOutcome) {
				t.Errorf("outcome %+v %v, want %+v", out, err, tc.want)
			}
			if m.asked != 0 || len(w.comments) != 0 {
				t.Errorf("a finished task was worked on again: %d model requests, %d comments", m.asked, len(w.comments))
			}
		})
	}
}

// A checkpoint in execution with a reply in hand but no action (written by
// nothing this code does, but possible on disk) is a system error, not a
// crash of the daemon.
func TestExecutionStepWithoutAnActionIsAnError(t *testing.T) {
	cp := `{"version":2,"mode":"planning","messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}],"calls":3,
	 "pending":{"object":{"phase":"execution","action_id":"","status":"completed","summary":"x"},"posted":true,"executed":0},
	 "policy":{"at":{"phase":"execution"},"visit":3,"plan":{"action_plan":{"actions":[{"id":"a1","task_id":"t1","description":"d","status":"pending"}]}}}}`
	w := &world{cps: map[task.Ref]store.Checkpoint{ref: {Step: 3, Data: []byte(cp)}}, comments: map[int64]string{}, history: t.TempDir()}
	_, err := runner(t, "planning", w, &model{}, tools{Host: startHost(t)})()
	if err == nil || !strings.Contains(err.Error(), "no action in hand") {
		t.Errorf("err = %v, want an execution step with no action in hand", err)
	}
}

// A history directory that cannot be opened on resume is a system error:
// the checkpoint stays for a retry instead of being overwritten by a run
// that starts over.
func TestBeginFailureKeepsTheCheckpoint(t *testing.T) {
	host := startHost(t)
	w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
	k := &kill{at: 5, t: t, w: w}
	if _, err := runner(t, "planning", w, &model{script: scripts["planning"], kill: k}, tools{Host: host})(); !errors.Is(err, errKilled) {
		t.Fatal(err)
	}
	left := k.left
	saved := left.cps[ref]
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	left.history = filepath.Join(blocked, "history") // a directory inside a file cannot be made
	m := &model{script: scripts["planning"][4:]}
	if _, err := runner(t, "planning", left, m, tools{Host: host})(); err == nil || !strings.Contains(err.Error(), "resuming") {
		t.Fatalf("err = %v, want the history error while resuming (not after starting over)", err)
	}
	if m.asked != 0 || string(left.cps[ref].Data) != string(saved.Data) {
		t.Errorf("%d model requests; checkpoint changed: %v", m.asked, string(left.cps[ref].Data) != string(saved.Data))
	}
}
