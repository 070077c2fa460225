package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

var (
	passing = []engine.CheckResult{{Command: "python3 -m unittest", ExitCode: 0, Output: "OK"}}
	failing = []engine.CheckResult{{Command: "python3 -m unittest", ExitCode: 1, Output: "FAIL: test_hello\nAssertionError: 'hi' != 'hello'"}}
)

// checker answers each Check with the next of results (the last one
// again once they run out), counting the checks across a kill as the
// workspace would hold them. kill ends the process at a Check; after
// arms a kill right after the save that follows the n-th Check (the
// results saved, nothing done with them yet).
type checker struct {
	mu      sync.Mutex
	results [][]engine.CheckResult
	err     error
	calls   int
	kill    *kill
	after   *kill
	armed   bool
}

func (c *checker) Check(context.Context) ([]engine.CheckResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kill != nil {
		if err := c.kill.now(); err != nil {
			return nil, err
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	c.calls++
	if c.after != nil {
		c.after.n++
		c.armed = c.after.n == c.after.at
	}
	return c.results[min(c.calls, len(c.results))-1], nil
}

// saved kills the process after the save that recorded the armed check.
func (c *checker) saved() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed {
		return nil
	}
	c.armed = false
	c.after.left = c.after.w.snapshot(c.after.t)
	return errKilled
}

func checks(c *checker, rounds int) func(*engine.Input) {
	return func(in *engine.Input) { in.Checks, in.CheckRounds = c, rounds }
}

// sandbox is the test server as the built-in workspace server would be:
// test/echo "runs" its text as a command, exiting with the code exits
// gives it (0 by default); test/fail runs nothing.
type sandbox struct {
	tools
	exits map[string][]int
	mu    sync.Mutex
}

func (s *sandbox) Call(ctx context.Context, name string, args json.RawMessage) (toolhost.Result, error) {
	res, err := s.tools.Call(ctx, name, args)
	if err != nil || name != "test/echo" {
		return res, err
	}
	var a struct{ Text string }
	_ = json.Unmarshal(args, &a)
	s.mu.Lock()
	defer s.mu.Unlock()
	code := 0
	if q := s.exits[a.Text]; len(q) > 0 {
		code, s.exits[a.Text] = q[0], q[1:]
	}
	res.Ran = &toolhost.CommandRun{Command: a.Text, ExitCode: code}
	return res, nil
}

func newWorld(t *testing.T) *world {
	return &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
}

// feedbacks are the user messages of the last request that say the checks
// failed.
func feedbacks(reqs []llm.Request) []string {
	var out []string
	if len(reqs) == 0 {
		return nil
	}
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == llm.User && strings.Contains(m.Content, "The round is not done: the repository's checks") {
			out = append(out, m.Content)
		}
	}
	return out
}

// requestLog is a model that keeps the requests it was sent.
type requestLog struct {
	*model
	reqs []llm.Request
}

func (r *requestLog) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	r.reqs = append(r.reqs, req)
	return r.model.Chat(ctx, req)
}

const plainDone = `{"done": true, "comment": "Echoed."}`

func TestChecksDecideTheDone(t *testing.T) {
	host := startHost(t)
	fail2 := []engine.CheckResult{passing[0], {Command: "ruff check .", ExitCode: -1, TimedOut: true, Output: "slow"}}
	for _, tc := range []struct {
		name     string
		script   []string
		results  [][]engine.CheckResult
		rounds   int
		end      engine.End
		checks   []engine.CheckResult
		reason   []string // in the reason
		feedback int
	}{
		{"pass", []string{cmd("test/echo", `{"text": "one"}`, ""), plainDone}, [][]engine.CheckResult{passing}, 2,
			engine.Done, passing, nil, 0},
		{"fail once, fixed", []string{plainDone, cmd("test/echo", `{"text": "fix"}`, "Fixing."), plainDone},
			[][]engine.CheckResult{failing, passing}, 2, engine.Done, passing, nil, 1},
		{"still failing", []string{plainDone, plainDone, plainDone}, [][]engine.CheckResult{failing, failing, fail2}, 2,
			engine.Failed, fail2, []string{"after 2 feedback round(s)", "`ruff check .` (timed out)"}, 2},
		{"no rounds", []string{plainDone}, [][]engine.CheckResult{failing}, 0,
			engine.Failed, failing, []string{"with no feedback round left", "`python3 -m unittest` (exit 1)"}, 0},
		{"no checks configured", []string{plainDone}, [][]engine.CheckResult{nil}, 1, engine.Done, nil, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, c := newWorld(t), &checker{results: tc.results}
			m := &requestLog{model: &model{script: tc.script}}
			out, err := runner(t, "plain", w, m, tools{Host: host}, checks(c, tc.rounds))()
			if err != nil || out.End != tc.end {
				t.Fatalf("outcome %+v %v, want %s", out, err, tc.end)
			}
			if diff := cmp.Diff(tc.checks, out.Checks); diff != "" {
				t.Errorf("Outcome.Checks (-want +got):\n%s", diff)
			}
			for _, want := range tc.reason {
				if !strings.Contains(out.Reason, want) {
					t.Errorf("reason %q lacks %q", out.Reason, want)
				}
			}
			if m.asked != len(tc.script) || out.Calls != len(tc.script) || c.calls != tc.feedback+1 {
				t.Errorf("%d model requests (Calls %d), %d checks; want %d and %d", m.asked, out.Calls, c.calls, len(tc.script), tc.feedback+1)
			}
			fb := feedbacks(m.reqs)
			if len(fb) != tc.feedback {
				t.Fatalf("%d feedback messages, want %d", len(fb), tc.feedback)
			}
			for _, f := range fb {
				for _, want := range []string{"Check `python3 -m unittest` (exit 1)", "AssertionError", `<untrusted source="output of the check`, "not done"} {
					if !strings.Contains(f, want) {
						t.Errorf("feedback lacks %q:\n%s", want, f)
					}
				}
			}
			closing := w.comments[w.nextID]
			if done := tc.end == engine.Done; done != strings.Contains(closing, "Echoed.") {
				t.Errorf("closing comment %q for a run that ended %s", closing, tc.end)
			}
		})
	}
}

// A Checker that cannot run is a system error: the run returns it (the
// worker's "system error" row: failed, the checkpoint kept), and the next
// run checks the same done again without asking the model.
func TestCheckerErrorIsASystemError(t *testing.T) {
	host := startHost(t)
	w, c := newWorld(t), &checker{results: [][]engine.CheckResult{passing}, err: errors.New("the sandbox could not start")}
	m := &model{script: []string{plainDone}}
	if _, err := runner(t, "plain", w, m, tools{Host: host}, checks(c, 1))(); err == nil ||
		!strings.Contains(err.Error(), "running the checks") || !errors.Is(err, c.err) {
		t.Fatalf("err = %v, want the checker's, wrapped", err)
	}
	c.err = nil
	m2 := &model{}
	out, err := runner(t, "plain", w, m2, tools{Host: host}, checks(c, 1))()
	if err != nil || out.End != engine.Done || m2.asked != 0 || c.calls != 1 {
		t.Errorf("retry: %+v %v, %d model requests, %d checks; want done, 0, 1", out, err, m2.asked, c.calls)
	}
}

// The commands the model ran are the last result of each command line, in
// the order first run; a call that ran nothing adds none.
func TestRanKeepsTheLastResultOfEachCommand(t *testing.T) {
	host := startHost(t)
	script := []string{
		cmd("test/echo", `{"text": "pytest -q"}`, ""), cmd("test/echo", `{"text": "python3 hello.py"}`, ""),
		cmd("test/fail", `{}`, ""), cmd("test/echo", `{"text": "pytest -q"}`, ""), plainDone,
	}
	ts := &sandbox{tools: tools{Host: host}, exits: map[string][]int{"pytest -q": {1, 0}, "python3 hello.py": {2}}}
	out, err := runner(t, "plain", newWorld(t), &model{script: script}, ts)()
	if err != nil {
		t.Fatal(err)
	}
	want := []toolhost.CommandRun{{Command: "pytest -q", ExitCode: 0}, {Command: "python3 hello.py", ExitCode: 2}}
	if diff := cmp.Diff(want, out.Ran); diff != "" {
		t.Errorf("Ran (-want +got):\n%s", diff)
	}
	out, err = runner(t, "plain", newWorld(t), &model{script: []string{plainDone}}, tools{Host: host})()
	if err != nil || out.Ran != nil {
		t.Errorf("a run that ran nothing: Ran %v, %v", out.Ran, err)
	}
}

// A checkpoint written before checks existed (no checking, checks, ran or
// feedback fields) is resumed as it was.
func TestCheckpointWithoutChecksResumes(t *testing.T) {
	host := startHost(t)
	w := newWorld(t)
	k := &kill{at: 2, t: t, w: w}
	script := []string{cmd("test/echo", `{"text": "one"}`, ""), plainDone}
	if _, err := runner(t, "plain", w, &model{script: script, kill: k}, tools{Host: host})(); !errors.Is(err, errKilled) {
		t.Fatal(err)
	}
	data := string(k.left.cps[ref].Data)
	for _, field := range []string{`"checking"`, `"checks"`, `"check_feedback"`, `"ran"`} {
		if strings.Contains(data, field) {
			t.Fatalf("the checkpoint holds %s before any check or command ran: %s", field, data)
		}
	}
	c := &checker{results: [][]engine.CheckResult{passing}}
	out, err := runner(t, "plain", k.left, &model{script: script[1:]}, tools{Host: host}, checks(c, 1))()
	if err != nil || out.End != engine.Done || c.calls != 1 {
		t.Errorf("%+v %v, %d checks", out, err, c.calls)
	}
}

// checkScripts fail the checks at the first done and pass them at the
// second: the plain loop fixes and says done again; planning gets an action
// to fix them, and ends done once it is carried out.
var checkScripts = map[string][]string{
	"plain": {
		cmd("test/echo", `{"text": "one"}`, "Echoing one."),
		`{"done": true, "comment": "Echoed."}`,
		cmd("test/echo", `{"text": "fix"}`, "Fixing the test."),
		`{"done": true, "comment": "Echoed and fixed."}`,
	},
	"planning": {
		`{"phase": "pre_planning", "understanding": {"goal": "echo", "deliverables": ["echoes"], "confidence": "high"}, "comment": "Understood."}`,
		`{"phase": "planning", "goal_understanding": {"main_objective": "Echo one thing", "success_criteria": ["echoed"]},
		  "task_decomposition": {"subtasks": [{"id": "t1", "description": "echo"}]},
		  "action_plan": {"actions": [{"id": "a1", "task_id": "t1", "description": "echo one"}]}}`,
		cmd("test/echo", `{"text": "one"}`, ""),
		`{"phase": "execution", "action_id": "a1", "status": "completed", "summary": "echoed one"}`,
		`{"phase": "verification", "verification": {"passed": true, "criteria": [{"criterion": "echoed", "met": true}]}, "comment": "All echoed."}`,
		cmd("test/echo", `{"text": "fix"}`, ""),
		`{"phase": "execution", "action_id": "checks-1", "status": "completed", "summary": "fixed the test"}`,
	},
}

// TestKillAtEveryPointThenResume's walk with checks: besides every model
// request and tool call, a kill at every check (before it runs) and right
// after the save of its results (before the feedback) resumes to the same
// outcome, comments and history, and no check runs twice for one done.
func TestKillAtEveryPointWithChecksThenResume(t *testing.T) {
	host := startHost(t)
	for _, loop := range []string{"plain", "planning"} {
		script := checkScripts[loop]
		t.Run(loop, func(t *testing.T) {
			run := func(w *world, m *model, ts engine.Tools, c *checker) (engine.Outcome, error) {
				w.saved = c.saved
				return runner(t, loop, w, m, &sandbox{tools: ts.(tools), exits: map[string][]int{}}, checks(c, 2))()
			}
			results := [][]engine.CheckResult{failing, passing}
			ref0, c0 := newWorld(t), &checker{results: results}
			want, err := run(ref0, &model{script: script}, tools{Host: host}, c0)
			if err != nil || want.End != engine.Done || c0.calls != 2 || len(want.Ran) != 2 {
				t.Fatalf("the run never killed: %+v %v, %d checks", want, err, c0.calls)
			}
			var closing string
			for _, body := range ref0.comments {
				if strings.Contains(body, "Checks run by coding-agent") {
					closing = body
				}
			}
			for _, want := range []string{"- ✅ `python3 -m unittest` (exit 0)", "- ✅ `one` (exit 0)", "- ✅ `fix` (exit 0)"} {
				if !strings.Contains(closing, want) {
					t.Errorf("the closing comment lacks %q:\n%s", want, closing)
				}
			}
			points := map[string]int{"request": len(script), "tool call": 2, "check": 2, "checked": 2}
			for _, point := range []string{"request", "tool call", "check", "checked"} {
				for at := 1; at <= points[point]; at++ {
					t.Run(fmt.Sprintf("%s %d", point, at), func(t *testing.T) {
						w := newWorld(t)
						k := &kill{at: at, t: t, w: w}
						m, ts, c := &model{script: script}, tools{Host: host}, &checker{results: results}
						switch point {
						case "request":
							m.kill = k
						case "tool call":
							ts.kill = k
						case "check":
							c.kill = k
						case "checked":
							c.after = k
						}
						if _, err := run(w, m, ts, c); !errors.Is(err, errKilled) {
							t.Fatalf("the run was not killed: %v", err)
						}
						c.kill, c.after = nil, nil // the checks outlive the process, as the workspace does
						m2 := &model{script: script[m.asked:]}
						got, err := run(k.left, m2, tools{Host: host}, c)
						if err != nil {
							t.Fatalf("resumed run: %v", err)
						}
						if diff := cmp.Diff(want, got, sameOutcome); diff != "" {
							t.Errorf("outcome differs from a run never killed (-want +got):\n%s", diff)
						}
						if m2.asked != len(script)-m.asked || c.calls != c0.calls {
							t.Errorf("%d requests after the resume, want %d; %d checks, want %d", m2.asked, len(script)-m.asked, c.calls, c0.calls)
						}
						if diff := cmp.Diff(sameRun(ref0.comments), sameRun(k.left.comments)); diff != "" {
							t.Errorf("comments differ from a run never killed (-want +got):\n%s", diff)
						}
						if got, want := k.left.historyText(t), ref0.historyText(t); got != want {
							t.Errorf("history:\n%s\nwant:\n%s", got, want)
						}
					})
				}
			}
		})
	}
}
