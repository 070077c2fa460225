package report_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/golden"
	"github.com/coding-agent/coding-agent/internal/report"
)

var (
	jst     = time.FixedZone("JST", 9*60*60)
	planAt  = time.Date(2025, 1, 17, 14, 30, 45, 0, jst)
	langs   = []report.Lang{report.Japanese, report.English}
	phases  = []string{"pre_planning", "planning", "execution", "reflection", "revision", "verification", "replan"}
	planMsg = "タスク「新機能の実装」を分析し、以下の計画を作成しました：\n\n1. 既存コードの調査（2アクション）\n2. 新機能の実装（3アクション）\n3. テストの作成（2アクション）\n\n合計7つのアクションで実装を進めます。"
)

// must returns a function that returns the rendered text it is given,
// failing the test on an error.
func must(t *testing.T) func(string, error) string {
	return func(s string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func TestParseLang(t *testing.T) {
	for in, want := range map[string]report.Lang{
		"": report.English, "ja": report.Japanese, "JA": report.Japanese, " ja-JP ": report.Japanese, "ja_JP": report.Japanese,
		"Japanese": report.Japanese, "jp": report.English, "fr": report.English,
		"en": report.English, " EN ": report.English, "en-US": report.English, "en_GB": report.English, "English": report.English,
		"jap": report.English,
	} {
		if got := report.ParseLang(in); got != want {
			t.Errorf("ParseLang(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPhaseNames(t *testing.T) {
	want := map[report.Lang][]string{
		report.Japanese: {"計画前情報収集", "計画作成", "アクション実行", "リフレクション", "計画修正", "検証", "再計画判断"},
		report.English:  {"Pre-planning", "Planning", "Execution", "Reflection", "Revision", "Verification", "Replan decision"},
	}
	for _, l := range langs {
		for i, p := range phases {
			if got := l.PhaseName(p); got != want[l][i] {
				t.Errorf("%s PhaseName(%s) = %q, want %q", l, p, got, want[l][i])
			}
		}
	}
	if got := report.Lang("").PhaseName("planning"); got != "Planning" {
		t.Errorf("zero Lang reads as %q, want English", got)
	}
	if got := report.English.PhaseName("odd\nphase"); got != "odd phase" {
		t.Errorf("unknown phase reads as %q, want itself on one line", got)
	}
}

func TestCallGolden(t *testing.T) {
	for _, l := range langs {
		golden.Check(t, "plan_call_comment_"+string(l), must(t)(l.Call("planning", 2, "\n"+planMsg+"\n\n", "", planAt)))
		golden.Check(t, "plan_call_default_"+string(l), must(t)(l.Call("execution", 5, "  \n", "task_3", planAt)))
	}
}

// TestCallSpecExamples checks the Japanese sections against spec 000 §7.1
// and §7.2, apart from the time zone the stamp names.
func TestCallSpecExamples(t *testing.T) {
	got := must(t)(report.Japanese.Call("planning", 2, planMsg, "", planAt))
	if want := "## ✅ 計画作成 - LLM呼び出し #2\n\n" + planMsg + "\n\n*2025-01-17 14:30:45 JST*"; got != want {
		t.Errorf("with comment:\n%s\nwant:\n%s", got, want)
	}
	at := time.Date(2025, 1, 17, 14, 32, 30, 0, jst)
	got = must(t)(report.Japanese.Call("execution", 5, "", "task_3", at))
	if want := "## ✅ アクション実行 - LLM呼び出し #5 完了\n\nアクション「task_3」の実行が完了しました\n\n*2025-01-17 14:32:30 JST*"; got != want {
		t.Errorf("without comment:\n%s\nwant:\n%s", got, want)
	}
}

func TestCallDefaultMessages(t *testing.T) {
	want := map[report.Lang][]string{
		report.Japanese: {"タスク内容の分析と情報収集が完了しました", "実行計画の作成が完了しました", "アクション「a1」の実行が完了しました",
			"実行結果の分析が完了しました", "計画の修正が完了しました", "実装の検証が完了しました", "再計画の判断が完了しました"},
		report.English: {"Task analysis and information gathering completed.", "Execution plan created.", `Action "a1" completed.`,
			"Analysis of the results completed.", "Plan revision completed.", "Verification of the implementation completed.", "Replan decision completed."},
	}
	for _, l := range langs {
		for i, p := range phases {
			got := must(t)(l.Call(p, i+1, "", "a1", planAt))
			head, body, _ := strings.Cut(got, "\n\n")
			if !strings.HasPrefix(head, "## ✅ "+l.PhaseName(p)+" - ") || !strings.HasSuffix(head, " 完了") && l == report.Japanese {
				t.Errorf("%s %s: heading %q", l, p, head)
			}
			if msg, _, _ := strings.Cut(body, "\n\n"); msg != want[l][i] {
				t.Errorf("%s %s: default message %q, want %q", l, p, msg, want[l][i])
			}
		}
	}
	// An execution call with no action named still reads well.
	if got := must(t)(report.Japanese.Call("execution", 1, "", "", planAt)); !strings.Contains(got, "\n\nアクションの実行が完了しました\n\n") {
		t.Errorf("execution without an action id:\n%s", got)
	}
	if _, err := report.Japanese.Call("bogus", 1, "", "", planAt); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("Call with an unknown phase: err = %v, want one naming it", err)
	}
	// A comment is the model's markdown, kept as it is; template text in it is data.
	odd := "{{.Phase}} <b>x</b> `y`"
	if got := must(t)(report.English.Call("reflection", 3, odd, "", time.Time{})); got != "## ✅ Reflection - LLM call #3\n\n"+odd {
		t.Errorf("comment with template text, zero time:\n%s", got)
	}
}

func TestErrorGolden(t *testing.T) {
	for _, l := range langs {
		golden.Check(t, "plan_tool_error_"+string(l), must(t)(l.ToolError("github_create_file", "ファイルが既に存在します: src/existing.py", "task_3", planAt)))
		golden.Check(t, "plan_tool_error_multiline_"+string(l), must(t)(l.ToolError("run_tests", "exit status 1\n```\nFAIL ./pkg\n```", "", planAt)))
		golden.Check(t, "plan_llm_error_retrying_"+string(l), must(t)(l.LLMError("reflection", "503 Service Unavailable", true, planAt)))
		golden.Check(t, "plan_llm_error_final_"+string(l), must(t)(l.LLMError("reflection", "503 Service Unavailable", false, planAt)))
	}
}

func TestToolErrorSpecExample(t *testing.T) {
	at := time.Date(2025, 1, 17, 14, 33, 0, 0, jst)
	got := must(t)(report.Japanese.ToolError("github_create_file", "ファイルが既に存在します: src/existing.py", "task_3", at))
	want := "## ❌ エラー発生 - github_create_file\n\n**エラー内容**: ファイルが既に存在します: src/existing.py\n\n" +
		"**発生したアクション**: task_3\n\nリトライまたは代替アプローチを検討しています...\n\n*2025-01-17 14:33:00 JST*"
	if got != want {
		t.Errorf("got:\n%s\nwant (spec 000 §7.3):\n%s", got, want)
	}
}

func TestErrorTextQuoting(t *testing.T) {
	// A long error is cut; one of several lines is fenced with a fence
	// longer than any run of backticks inside it, so it cannot close early.
	long := strings.Repeat("x", 5000)
	got := must(t)(report.English.ToolError("t", long, "a1", planAt))
	if strings.Count(got, "x") > 2001 || !strings.Contains(got, "…") {
		t.Errorf("a 5000-character error was not cut to about 2000: %d x's", strings.Count(got, "x"))
	}
	got = must(t)(report.English.ToolError("t", "line one\n````\nline three", "a1", planAt))
	if !strings.Contains(got, "\n`````\nline one\n````\nline three\n`````\n") {
		t.Errorf("multi-line error not fenced safely:\n%s", got)
	}
	got = must(t)(report.Japanese.LLMError("planning", "  ", false, time.Time{}))
	if got != "## ⚠️ LLM呼び出しエラー - 計画作成\n\n**エラー内容**: （内容なし）" {
		t.Errorf("blank error text, not retrying, zero time:\n%s", got)
	}
	if strings.Contains(must(t)(report.Japanese.LLMError("planning", "x", false, planAt)), "リトライ") {
		t.Errorf("LLMError not retrying says it retries")
	}
}

func sampleProgress() report.Progress {
	at := func(h, m int) time.Time { return time.Date(2025, 1, 17, h, m, 0, 0, time.UTC) }
	return report.Progress{
		Goal: "Add a --dry-run flag to the deploy command",
		Actions: []report.ProgressAction{
			{ID: "a1", Description: "Read cmd/deploy.go", Status: report.ActionDone},
			{ID: "a2", Description: "Add the flag and thread it through", Status: report.ActionDone, Note: "also touched\nflags.go"},
			{ID: "a3", Description: "Update the old integration test", Status: report.ActionSkipped, Note: "test removed in revision 2"},
			{ID: "a4", Description: "Run go test ./...", Status: report.ActionFailed, Note: "2 tests fail"},
			{ID: "a5", Description: "Fix the failing tests", Status: report.ActionPending},
		},
		Revisions: []report.ProgressRevision{
			{N: 1, Reason: "deploy.go was split into two files", Changes: []string{"a2 now edits deploy_run.go", "added a5"}, At: at(14, 35)},
			{N: 2, Reason: "the integration test no longer exists", Changes: []string{"a3 skipped"}, At: at(14, 41)},
		},
		Notes:     []string{"comment by @alice applied before action a3"},
		Phase:     "execution",
		UpdatedAt: at(14, 42),
	}
}

func TestProgressGolden(t *testing.T) {
	for _, l := range langs {
		golden.Check(t, "plan_progress_"+string(l), must(t)(l.Progress(sampleProgress())))
	}
	done := sampleProgress()
	done.Finished, done.Phase, done.Revisions, done.Notes = true, "", nil, nil
	golden.Check(t, "plan_progress_finished_en", must(t)(report.English.Progress(done)))
}

func TestProgressItems(t *testing.T) {
	p := sampleProgress()
	for _, l := range langs {
		got := must(t)(l.Progress(p))
		for _, want := range []string{
			"- [x] **a1** Read cmd/deploy.go\n",
			"- [ ] ❌ **a4** Run go test ./...",
			"- [ ] ~~**a3** Update the old integration test~~",
			"- [ ] **a5** Fix the failing tests",
			"2/5",
			"also touched flags.go", // a note stays on its item's line
			"comment by @alice applied before action a3",
			"deploy.go was split into two files", "a2 now edits deploy_run.go", "the integration test no longer exists",
			"2025-01-17 14:42:00 UTC",
			l.PhaseName("execution"),
		} {
			if !strings.Contains(got, want) {
				t.Errorf("%s progress lacks %q:\n%s", l, want, got)
			}
		}
		if i, j := strings.Index(got, "deploy.go was split"), strings.Index(got, "no longer exists"); i > j {
			t.Errorf("%s progress lists revisions out of order", l)
		}
	}
	empty := must(t)(report.Japanese.Progress(report.Progress{Phase: "planning"}))
	if want := "## 📋 実行計画の進捗\n\n*計画はまだありません。*\n\n*現在のフェーズ: 計画作成*"; empty != want {
		t.Errorf("progress without a plan:\n%s\nwant:\n%s", empty, want)
	}
}

func TestFinalGolden(t *testing.T) {
	success := report.Final{
		Succeeded:       true,
		Summary:         "Added `--dry-run` to `deploy`; it prints the plan and exits.",
		Changes:         []string{"a1: read cmd/deploy.go", "a2: added the flag", "a5: fixed the tests"},
		VerificationRan: true, VerificationPassed: true, VerificationRounds: 2,
		VerificationNotes: "go test ./... passes.",
		IgnoredComments:   1,
		Receipt:           report.Receipt{LLMCalls: 14, ToolCalls: 37, TokensIn: 123456, TokensOut: 7890, Duration: 4*time.Minute + 12*time.Second + 400*time.Millisecond},
	}
	failure := report.Final{
		Reason:  "the model server answered 503 four times during reflection",
		Changes: []string{"a1: read cmd/deploy.go"},
		Receipt: report.Receipt{LLMCalls: 3, ToolCalls: 2, TokensIn: 999, TokensOut: 1000, Duration: time.Hour + 2*time.Minute + 3*time.Second},
	}
	for _, l := range langs {
		golden.Check(t, "plan_final_success_"+string(l), must(t)(l.Final(success)))
		golden.Check(t, "plan_final_failure_"+string(l), must(t)(l.Final(failure)))
	}
}

func TestFinalNeverReadsAsDoneWhenNotDone(t *testing.T) {
	for _, l := range langs {
		failed := must(t)(l.Final(report.Final{Reason: "x"}))
		unverified := must(t)(l.Final(report.Final{Succeeded: true, VerificationRan: true, VerificationRounds: 3}))
		success := must(t)(l.Final(report.Final{Succeeded: true}))
		for name, got := range map[string]string{"failed": failed, "unverified": unverified} {
			if strings.HasPrefix(got, "## ✅") {
				t.Errorf("%s %s final reads as a success:\n%s", l, name, got)
			}
		}
		if !strings.HasPrefix(success, "## ✅") {
			t.Errorf("%s successful final does not read as one:\n%s", l, success)
		}
		if strings.Contains(success, "ℹ️") {
			t.Errorf("%s final with no ignored comments mentions them:\n%s", l, success)
		}
	}
}

// The receipt counts the compactions and their summary calls when there
// were any, and says nothing of them otherwise.
func TestReceiptCountsCompactions(t *testing.T) {
	for _, l := range []report.Lang{report.Japanese, report.English} {
		f := report.Final{Succeeded: true, Receipt: report.Receipt{LLMCalls: 30, TokensIn: 1000, TokensOut: 10, Compactions: 12, Summaries: 2}}
		body, err := l.Final(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(body, "12") || !strings.Contains(body, "2") || !strings.Contains(body, map[report.Lang]string{report.Japanese: "コンテキスト圧縮", report.English: "Context compactions"}[l]) {
			t.Errorf("%s receipt lacks the compactions:\n%s", l, body)
		}
		f.Receipt.Compactions, f.Receipt.Summaries = 0, 0
		if body, _ := l.Final(f); strings.Contains(body, "コンテキスト圧縮") || strings.Contains(body, "Context compactions") {
			t.Errorf("%s receipt mentions compactions that did not happen", l)
		}
	}
}
