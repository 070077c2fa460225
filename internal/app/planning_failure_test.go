package app_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/plan"
	"github.com/coding-agent/coding-agent/internal/task"
)

// A plan with problems is sent back with every problem named; the corrected
// plan is carried out.
func TestPlanWithProblemsIsSentBack(t *testing.T) {
	e := planned(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: shortPlan(func(e *env, r llmtest.Received, w at) llmtest.Step {
			if w.Phase == "planning" && !w.Retry {
				return object(map[string]any{"phase": "planning",
					"goal_understanding": map[string]any{"main_objective": "x"},
					"task_decomposition": map[string]any{"subtasks": []map[string]any{
						{"id": "t1", "description": "a", "dependencies": []string{"t2"}},
						{"id": "t2", "description": "b", "dependencies": []string{"t1"}}}},
					"action_plan": map[string]any{"actions": []map[string]any{
						{"id": "a1", "task_id": "t1", "description": "d", "tools": []string{"fs/nope"}},
						{"task_id": "t9", "description": "e"}}}})
			}
			return nil
		})})
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent done")
	reqs := e.model.Requests()
	var correction string
	for _, r := range reqs {
		if w := where(r); w.Phase == "planning" && w.Retry {
			correction = r.Messages[len(r.Messages)-1].Content
		}
	}
	for _, want := range []string{`"fs/nope"`, "cycle: t1 → t2 → t1", "action 2 has no id", `"t9", which is not a subtask`} {
		if !strings.Contains(correction, want) {
			t.Errorf("the correction does not say %q:\n%s", want, correction)
		}
	}
	if got := e.history(t); len(got) == 0 || got[0].Type != plan.EntryPlan || actionIDs(got[0].Plan)[0] != "a1" || len(got[0].Plan.ActionPlan.Actions) != 1 {
		t.Errorf("history should start with the corrected plan only: %+v", got)
	}
}

// Five unusable plan replies in a row fail the task: failed label, the
// closing comment says why, never done.
func TestUnparsablePlanFailsTheTask(t *testing.T) {
	e := planned(t, setup{forge: task.GitLab, kind: task.Issue, provider: config.ProviderOllama,
		respond: shortPlan(func(e *env, r llmtest.Received, w at) llmtest.Step {
			if w.Phase == "planning" {
				return llmtest.Reply{Content: "I will plan this carefully. First, the greeting."}
			}
			return nil
		})})
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent failed")
	if n := len(e.model.Requests()); n != 6 {
		t.Errorf("%d model requests, want 6 (1 pre-planning, 5 planning)", n)
	}
	c := e.botComments()
	if len(c) == 0 || !strings.Contains(c[len(c)-1], "5") || !strings.Contains(c[len(c)-1], "no JSON object") {
		t.Errorf("the last comment should give the reason: %q", c)
	}
	if slices.ContainsFunc(c, func(s string) bool { return strings.Contains(s, "タスクが完了しました") }) {
		t.Errorf("a failed task was reported as complete: %q", c)
	}
	if got := e.history(t); len(got) != 0 {
		t.Errorf("no plan was accepted, yet the history has %d entries", len(got))
	}
}

// A verification that still fails after its last round is not a success,
// even though every action ran.
func TestFailedVerificationIsNotReportedAsDone(t *testing.T) {
	e := planned(t, setup{forge: task.GitHub, kind: task.PullRequest, provider: config.ProviderOpenAI, native: true,
		respond: shortPlan(func(e *env, r llmtest.Received, w at) llmtest.Step {
			if w.Phase != "verification" {
				return nil
			}
			if strings.Contains(w.Instr, "round 1 of 2") {
				return object(map[string]any{"phase": "verification", "verification": map[string]any{"passed": false,
					"missing": []string{"a README"}}, "additional_actions": []map[string]any{
					{"id": "a9", "task_id": "t1", "description": "Write README"}}})
			}
			return verification(false, "")
		})})
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent failed")
	types := func() (out []string) {
		for _, en := range e.history(t) {
			out = append(out, en.Type)
		}
		return out
	}()
	if !slices.Equal(types, []string{"plan", "verification", "verification"}) {
		t.Errorf("history %v", types)
	}
	if rec := e.record(); rec.Status != task.Failed || !strings.Contains(rec.Error, "verification failed") {
		t.Errorf("store record %+v", rec)
	}
	c := e.botComments()
	if last := c[len(c)-1]; !strings.Contains(last, "NOTES.md and CHANGELOG.md exist") || strings.Contains(last, "タスクが完了しました") {
		t.Errorf("closing comment:\n%s", last)
	}
}

// The same failing call is run at most twice; asked a third time it is
// refused and the action fails; after the attempts are spent the replan
// decision gives up, and the task fails instead of looping.
func TestRepeatedFailingCallIsCutOff(t *testing.T) {
	e := planned(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: shortPlan(func(e *env, r llmtest.Received, w at) llmtest.Step {
			switch w.Phase {
			case "execution":
				return e.call(r, "", "fs/write_file", map[string]any{"path": forbidden, "content": "x"})
			case "reflection":
				return reflection(false, "try again", "")
			case "replan decision":
				return object(map[string]any{"phase": "replan", "decision": "abort", "reason": "the file cannot be written"})
			}
			return nil
		})})
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent failed")
	if rec := e.record(); rec.Counters.ToolCalls != 2 {
		t.Errorf("the failing call ran %d times, want 2", rec.Counters.ToolCalls)
	}
	hist := e.history(t)
	last := hist[len(hist)-1]
	if last.Type != plan.EntryReplan || last.Decision != "abort" || last.Action != "a1" {
		t.Errorf("last history line %+v, want the replan decision to abort", last)
	}
	// 1 pre-planning, 1 plan, a1: 3 calls (2 run, 1 refused), reflection,
	// a1 again: 1 refused call, reflection, replan decision.
	if n := len(e.model.Requests()); n != 9 {
		t.Errorf("%d model requests, want 9", n)
	}
}

// max_llm_process_num is a hard limit across every phase.
func TestHardLimitEndsAPlannedTask(t *testing.T) {
	e := planned(t, setup{forge: task.GitLab, kind: task.MergeRequest, provider: config.ProviderOpenAI,
		respond: shortPlan(func(e *env, r llmtest.Received, w at) llmtest.Step {
			if w.Phase == "execution" {
				return e.call(r, "", "fs/list_directory", map[string]any{"path": e.workspace}) // never ends the action
			}
			return nil
		})})
	e.cfg.MaxLLMProcessNum = 6
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent failed")
	if n := len(e.model.Requests()); n != 6 {
		t.Errorf("%d model requests, want 6", n)
	}
	if rec := e.record(); !strings.Contains(rec.Error, "max_llm_process_num") {
		t.Errorf("store record %+v", rec)
	}
}

// Reporting never stops the work: a comment POST failing three times lands
// on the fourth attempt, and with every comment refused for good the task
// still ends done.
func TestCommentFailuresDoNotStopThePlannedTask(t *testing.T) {
	t.Run("three failures", func(t *testing.T) {
		e := planned(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, respond: shortPlan(nil)})
		e.gh.Inject(forgetest.Fault{Method: "POST", Path: "/issues/1/comments", Status: 500, Times: 3})
		e.runOK(t)
		e.wantLabels(t, "bug", "coding agent done")
		c := e.botComments()
		if len(c) == 0 || !strings.Contains(c[0], "LLM呼び出し #1") {
			t.Errorf("the first comment should have landed once: %q", c)
		}
		if strings.Count(strings.Join(c, "\n"), "LLM呼び出し #1 ") != 1 {
			t.Errorf("the first section appears more than once: %q", c)
		}
	})
	t.Run("always refused", func(t *testing.T) {
		e := planned(t, setup{forge: task.GitLab, kind: task.Issue, provider: config.ProviderOpenAI, respond: shortPlan(nil)})
		e.gl.Inject(forgetest.Fault{Method: "POST", Path: "/notes", Status: 500, Times: -1})
		e.runOK(t)
		e.wantLabels(t, "bug", "coding agent done")
		if c := e.botComments(); len(c) != 0 {
			t.Errorf("comments %q", c)
		}
		if rec := e.record(); rec.Status != task.Done {
			t.Errorf("store record %+v", rec)
		}
	})
}

// A skipped action with verification off fails the task: nothing checked
// that the work is complete without it. The closing comment lists it.
func TestSkippedActionWithoutVerificationFails(t *testing.T) {
	e := planned(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: shortPlan(func(e *env, r llmtest.Received, w at) llmtest.Step {
			switch w.Phase {
			case "execution":
				return actionEnd("a1", "failed", "cannot do it", "")
			case "replan decision":
				return object(map[string]any{"phase": "replan", "decision": "skip", "reason": "not needed"})
			}
			return nil
		})})
	e.cfg.Planning.Verification.Enabled = false
	e.cfg.Planning.Reflection.Enabled = false
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent failed")
	c := e.botComments()
	last := c[len(c)-1]
	if !strings.Contains(last, "a1: スキップ") || strings.Contains(last, "タスクが完了しました") {
		t.Errorf("closing comment:\n%s", last)
	}
	if !slices.ContainsFunc(c, func(s string) bool {
		return strings.Contains(s, "アクション「a1」は失敗しました: cannot do it")
	}) {
		t.Errorf("the failed action's call section should say it failed: %q", c)
	}
}

// A model that keeps calling a tool that does not exist before the plan
// ends the task after five replies, not at the global limit.
func TestUnknownToolBeforeThePlanIsUnusable(t *testing.T) {
	e := planned(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: shortPlan(func(e *env, r llmtest.Received, w at) llmtest.Step {
			if w.Phase == "pre-planning" {
				return llmtest.Reply{Content: `{"command": {"tool": "shell/run", "args": {"cmd": "ls"}}}`}
			}
			return nil
		})})
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent failed")
	if n := len(e.model.Requests()); n != 5 {
		t.Errorf("%d model requests, want 5", n)
	}
}

// "passed": true with an unmet criterion is sent back, not taken as done.
func TestVerificationThatContradictsItselfIsSentBack(t *testing.T) {
	e := planned(t, setup{forge: task.GitLab, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: shortPlan(func(e *env, r llmtest.Received, w at) llmtest.Step {
			if w.Phase == "verification" && !w.Retry {
				return object(map[string]any{"phase": "verification", "verification": map[string]any{"passed": true,
					"criteria": []map[string]any{{"criterion": "hello.txt exists", "met": false}}}})
			}
			return nil
		})})
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent done")
	reqs := e.model.Requests()
	last := reqs[len(reqs)-1].Messages
	if msg := last[len(last)-1].Content; !strings.Contains(msg, `the criterion "hello.txt exists" is not met`) {
		t.Errorf("the correction does not name the unmet criterion:\n%s", msg)
	}
}
