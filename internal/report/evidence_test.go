package report_test

import (
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/golden"
	"github.com/coding-agent/coding-agent/internal/report"
)

// hostile are command lines that would break markdown shown as they are.
var hostile = []report.Command{
	{Command: "python3 -m unittest", ExitCode: 0},
	{Command: "echo `id` ``double`` && printf '```\\n# heading'", ExitCode: 1,
		Output: "FAIL: test_x\n```\n## not a heading\n<!-- hidden -->\n@alice"},
	{Command: "pytest -q\n- [x] fake item\r\n```", ExitCode: -1, TimedOut: true, Output: "still running"},
	{Command: "`sleep 1`", ExitCode: -1},
}

func TestEvidenceGolden(t *testing.T) {
	ran := []report.Command{{Command: "pytest -q", ExitCode: 1}, {Command: "python3 hello.py", ExitCode: 0}}
	for _, l := range langs {
		golden.Check(t, "evidence_both_"+string(l), must(t)(report.Evidence(l, hostile, ran)))
		golden.Check(t, "evidence_ran_"+string(l), must(t)(report.Evidence(l, nil, ran)))
		golden.Check(t, "evidence_none_"+string(l), must(t)(report.Evidence(l, nil, nil)))
	}
}

// ✅ is said only of a command that exited 0 on its own, and every line of
// the list is one item whatever the command holds.
func TestEvidenceMarksOnlyWhatPassed(t *testing.T) {
	for _, l := range langs {
		got := must(t)(report.Evidence(l, hostile, nil))
		if n := strings.Count(got, "✅"); n != 1 {
			t.Errorf("%s: %d ✅, want 1 (one check exited 0):\n%s", l, n, got)
		}
		items := 0
		for _, line := range strings.Split(got, "\n") {
			if strings.HasPrefix(line, "- ") {
				items++
				if !strings.HasPrefix(line, "- ✅ `") && !strings.HasPrefix(line, "- ❌ `") {
					t.Errorf("%s: list item not led by a mark and a code span: %q", l, line)
				}
			}
		}
		if items != len(hostile) {
			t.Errorf("%s: %d list items, want %d:\n%s", l, items, len(hostile), got)
		}
		if strings.Contains(got, "\n# heading") || strings.Contains(got, "\n- [x] fake") {
			t.Errorf("%s: a command line broke out of its code span:\n%s", l, got)
		}
	}
}

func TestCodeSpan(t *testing.T) {
	for in, want := range map[string]string{
		"go test ./...":  "`go test ./...`",
		"echo `id`":      "`` echo `id` ``",
		"`id`":           "`` `id` ``",
		"a ``b`` c":      "```a ``b`` c```",
		"a\nb\r\nc":      "`a ⏎ b ⏎ c`",
		"":               "` `",
		"x\x1b[31my\x00": "`x[31my`",
	} {
		if got := report.CodeSpan(in); got != want {
			t.Errorf("CodeSpan(%q) = %q, want %q", in, got, want)
		}
	}
}

// The closing comment of a planned task says what ran, or that it was
// checked by reading and nothing ran; the model's verdict is never ✅.
func TestFinalSaysWhatRan(t *testing.T) {
	base := report.Final{Succeeded: true, VerificationRan: true, VerificationPassed: true, VerificationRounds: 1,
		Criteria: []report.Criterion{{Text: "hello.py prints hello", Met: true}}}
	read := map[report.Lang]string{report.English: "Checked by reading, nothing was run.", report.Japanese: "読んで確認しただけで、何も実行されていません。"}
	for _, l := range langs {
		got := must(t)(l.Final(base))
		if !strings.Contains(got, read[l]) {
			t.Errorf("%s: a verification that ran nothing does not say so:\n%s", l, got)
		}
		if n := strings.Count(got, "✅"); n != 1 { // the heading's
			t.Errorf("%s: %d ✅ with nothing run, want only the heading's:\n%s", l, n, got)
		}
		withRuns := base
		withRuns.Checks = []report.Command{{Command: "python3 -m unittest"}}
		withRuns.Ran = []report.Command{{Command: "python3 hello.py"}, {Command: "pytest -q", ExitCode: 2}}
		got = must(t)(l.Final(withRuns))
		if strings.Contains(got, read[l]) || !strings.Contains(got, "✅ `python3 -m unittest`") || !strings.Contains(got, "❌ `pytest -q`") {
			t.Errorf("%s: the verification does not say what ran:\n%s", l, got)
		}
		golden.Check(t, "plan_final_read_"+string(l), must(t)(l.Final(base)))
		golden.Check(t, "plan_final_ran_"+string(l), got)
	}
}

func TestFailedCarriesEvidence(t *testing.T) {
	ev := must(t)(report.Evidence(report.English, hostile[1:2], nil))
	got := must(t)(report.English.Failed("the checks failed: `x` (exit 1)", "F", "B", "", ev, ""))
	golden.Check(t, "failed_checks", got)
}
