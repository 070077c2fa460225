package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/golden"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/plan"
	"github.com/coding-agent/coding-agent/internal/task"
)

// forbidden is a path outside the filesystem server's allowed directory:
// writing there is a tool error.
const forbidden = "/coding-agent-forbidden/NOTES.md"

// fullPlan scripts a planned task through every phase: pre-planning with a
// read-only look, a four-action plan, an interval reflection, a failing
// action (a tool error), a reflection that asks for a revision, the revised
// plan, and a verification that passes.
func fullPlan(e *env, r llmtest.Received) llmtest.Step {
	w := where(r)
	switch w.Phase {
	case "pre-planning":
		if w.Tools == 0 {
			return e.call(r, "", "fs/list_directory", map[string]any{"path": e.workspace})
		}
		return understanding("依頼内容を把握しました: 挨拶ファイルとメモを追加します。")
	case "planning":
		return fourActions("4つのアクションで進めます。")
	case "execution":
		return e.fullPlanAction(r, w)
	case "reflection":
		if strings.Contains(w.Instr, "Action a3 failed") {
			return reflection(true, "NOTES.md could not be written", "write inside the workspace")
		}
		return reflection(false, "on track", "")
	case "revision":
		return object(map[string]any{"phase": "revision", "reason": "a3 wrote outside the workspace",
			"changes": []string{"a3 replaced by a3b, which writes inside the workspace"},
			"action_plan": map[string]any{"actions": []map[string]any{
				{"id": "a3b", "task_id": "t2", "description": "Write NOTES.md in the workspace"},
				{"id": "a4", "task_id": "t2", "description": "Write CHANGELOG.md"}}}})
	case "verification":
		if w.Tools == 0 {
			return e.read(r, "CHANGELOG.md を確認します。", "CHANGELOG.md")
		}
		return verification(true, "すべての成功基準を満たしています。")
	}
	e.t.Errorf("request %d: unexpected phase %q", r.N, w.Phase)
	return llmtest.Fault{Status: 400, Body: "unexpected"}
}

func (e *env) fullPlanAction(r llmtest.Received, w at) llmtest.Step {
	switch {
	case w.Action == "a1" && w.Tools == 0:
		return e.write(r, "hello.txt を書きます。", "hello.txt", "hello\n")
	case w.Action == "a1":
		return actionEnd("a1", "completed", "hello.txt written", "hello.txt を作成しました。")
	case w.Action == "a2" && w.Tools == 0:
		return e.read(r, "", "hello.txt")
	case w.Action == "a2":
		return actionEnd("a2", "completed", "hello.txt says hello", "")
	case w.Action == "a3" && w.Tools == 0:
		return e.call(r, "NOTES.md を書きます。", "fs/write_file", map[string]any{"path": forbidden, "content": "notes\n"})
	case w.Action == "a3":
		return actionEnd("a3", "failed", "the path is outside the allowed directory", "書き込みに失敗しました。")
	case w.Action == "a3b" && w.Tools == 0:
		return e.write(r, "", "NOTES.md", "notes\n")
	case w.Action == "a3b":
		return actionEnd("a3b", "completed", "NOTES.md written", "")
	case w.Action == "a4" && w.Tools == 0:
		return e.write(r, "", "CHANGELOG.md", "- greeting\n")
	case w.Action == "a4":
		return actionEnd("a4", "completed", "CHANGELOG.md written", "CHANGELOG.md を作成しました。")
	}
	e.t.Errorf("request %d: unexpected action %q after %d tool results", r.N, w.Action, w.Tools)
	return llmtest.Fault{Status: 400, Body: "unexpected"}
}

// planned builds an env in planning mode with the test clock.
func planned(t testing.TB, s setup) *env {
	t.Helper()
	s.planning = true
	e := newEnv(t, s)
	e.cfg.Language = config.LanguageJapanese // the spec's language, in which these tests were written
	e.now = func() time.Time { return planTime }
	return e
}

func TestPlannedTaskRunsEveryPhase(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, c := range []struct {
		name   string
		forge  string
		kind   task.Kind
		native bool
		mode   string // comments.mode; "": the default, living
	}{
		{"github-issue-json", task.GitHub, task.Issue, false, ""},
		{"github-issue-native", task.GitHub, task.Issue, true, ""},
		{"gitlab-mr-json", task.GitLab, task.MergeRequest, false, ""},
		{"gitlab-issue-native", task.GitLab, task.Issue, true, ""},
		{"github-issue-json-separate", task.GitHub, task.Issue, false, config.CommentsSeparate},
		{"gitlab-issue-native-separate", task.GitLab, task.Issue, true, config.CommentsSeparate},
		{"gitea-pull-native", task.Gitea, task.PullRequest, true, ""},
		{"gitea-issue-json-separate", task.Gitea, task.Issue, false, config.CommentsSeparate},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := planned(t, setup{forge: c.forge, kind: c.kind, provider: config.ProviderOpenAI, native: c.native, respond: fullPlan})
			e.cfg.Planning.Reflection.TriggerInterval = 2
			if c.mode != "" {
				e.cfg.Comments.Mode = c.mode
			}
			if err := e.run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent done"}) {
				t.Errorf("labels %v", l)
			}
			for name, want := range map[string]string{"hello.txt": "hello\n", "NOTES.md": "notes\n", "CHANGELOG.md": "- greeting\n"} {
				if got, err := os.ReadFile(filepath.Join(e.workspace, name)); err != nil || string(got) != want {
					t.Errorf("%s = %q, %v; want %q", name, got, err, want)
				}
			}
			// 2 pre-planning, 1 plan, 2+2 (a1, a2), 1 reflection, 2 (a3),
			// 1 reflection, 1 revision, 2+2 (a3b, a4), 2 verification.
			if n := len(e.model.Requests()); n != 18 {
				t.Errorf("%d model requests, want 18", n)
			}
			rec := e.record()
			if rec.Status != task.Done || rec.Counters.LLMCalls != 18 || rec.Counters.ToolCalls != 7 {
				t.Errorf("store record %+v", rec)
			}
			if c.mode == config.CommentsSeparate {
				golden.Check(t, "planning_full_separate", e.commentsText())
			} else {
				golden.Check(t, "planning_full", e.commentsText()) // the living comment and the closing one
				if n := len(e.botComments()); n != 2 {
					t.Errorf("%d bot comments, want the living one and the closing one", n)
				}
			}
			e.checkHistory(t, []string{plan.EntryPlan, plan.EntryReflection, plan.EntryReflection, plan.EntryRevision, plan.EntryVerification})
		})
	}
}

// commentsText joins the bot's comments for a golden file, with the
// workspace path (a temporary directory) replaced.
func (e *env) commentsText() string {
	var b strings.Builder
	for i, c := range e.botComments() {
		fmt.Fprintf(&b, "===== comment %d =====\n%s\n", i+1, strings.ReplaceAll(c, e.workspace, "<workspace>"))
	}
	return b.String()
}

// history reads the task's planning history.
func (e *env) history(t *testing.T) []plan.Entry {
	t.Helper()
	h, err := plan.OpenHistory(e.cfg.Planning.History.Directory, e.ref)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := h.Load()
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// checkHistory checks the history line by line: the types in order, each
// line a JSON object with a type and the test clock's timestamp, and the
// content the scripted task implies.
func (e *env) checkHistory(t *testing.T, types []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(e.cfg.Planning.History.Directory, plan.HistoryFile(e.ref)))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	var got []string
	for i, line := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("history line %d is not a JSON object: %v\n%s", i+1, err, line)
		}
		if v["timestamp"] != planTime.Format("2006-01-02T15:04:05Z") {
			t.Errorf("history line %d timestamp %v", i+1, v["timestamp"])
		}
		got = append(got, fmt.Sprint(v["type"]))
	}
	if !slices.Equal(got, types) {
		t.Fatalf("history types %v, want %v", got, types)
	}
	entries := e.history(t)
	for i, en := range entries {
		switch {
		case en.Type == plan.EntryPlan:
			if ids := actionIDs(en.Plan); !slices.Equal(ids, []string{"a1", "a2", "a3", "a4"}) {
				t.Errorf("line %d: plan actions %v", i+1, ids)
			}
		case en.Type == plan.EntryReflection && i == 1:
			if en.Trigger != "interval" || en.Evaluation.PlanRevisionNeeded {
				t.Errorf("line %d: %+v, want an interval reflection needing no revision", i+1, en)
			}
		case en.Type == plan.EntryReflection:
			if en.Trigger != "error" || en.Action != "a3" || !en.Evaluation.PlanRevisionNeeded {
				t.Errorf("line %d: %+v, want a reflection on a3's error asking for a revision", i+1, en)
			}
		case en.Type == plan.EntryRevision:
			if ids := actionIDs(en.Plan); !slices.Equal(ids, []string{"a1", "a2", "a3b", "a4"}) || en.Reason == "" ||
				en.Plan.ActionPlan.Actions[0].Status != plan.Done || en.Plan.ActionPlan.Actions[1].Status != plan.Done {
				t.Errorf("line %d: revision %+v; want a1, a2 kept done, then a3b, a4", i+1, en.Plan)
			}
		case en.Type == plan.EntryVerification:
			if en.Round != 1 || en.Verification == nil || !en.Verification.Passed {
				t.Errorf("line %d: verification %+v", i+1, en)
			}
		}
	}
}

func actionIDs(p *plan.Plan) []string {
	if p == nil {
		return nil
	}
	var ids []string
	for _, a := range p.ActionPlan.Actions {
		ids = append(ids, a.ID)
	}
	return ids
}

// language: en writes the comments in English and tells the model so;
// llm_call_comments.enabled: false leaves only the progress report and the
// closing comment.
func TestPlannedTaskInEnglishWithoutCallComments(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := planned(t, setup{forge: task.GitLab, kind: task.Issue, provider: config.ProviderOllama, respond: fullPlan})
	e.cfg.Language = config.LanguageEnglish
	e.cfg.Planning.LLMCallComments.Enabled = false
	if err := e.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.wantLabels(t, "bug", "coding agent done")
	if sys := e.model.Requests()[0].Messages[0].Content; !strings.Contains(sys, "Write it in English") {
		t.Errorf("the system prompt does not ask for English comments:\n%s", sys)
	}
	golden.Check(t, "planning_en_no_call_comments", e.commentsText())
}
