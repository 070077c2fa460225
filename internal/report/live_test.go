package report_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/golden"
	"github.com/coding-agent/coding-agent/internal/report"
)

var liveAt = time.Date(2026, 3, 4, 10, 11, 12, 0, time.UTC)

// liveSteps are a one-file task's steps: a read, a write that failed and
// its retry, a test run, and the done.
func liveSteps() []report.Step {
	return []report.Step{
		{N: 1, Comment: "Reading the module first.", Calls: []report.StepCall{{Tool: "fs/read_text_file", Target: "slug.py"}}},
		{N: 2, Comment: "Adding `slugify` to slug.py.", Calls: []report.StepCall{{Tool: "fs/edit_file", Target: "slug.py", Failed: true}}},
		{N: 3, Calls: []report.StepCall{{Tool: "fs/write_file", Target: "slug.py"}, {Tool: "fs/write_file", Target: "test_slug.py"}}},
		{N: 4, Comment: "Running the tests.", Calls: []report.StepCall{{Tool: "sandbox/run", Target: "python3 -m unittest"}}},
		{N: 5, Done: true},
	}
}

// planSteps are a planned task's steps, with a repeated comment and a note.
func planSteps(l report.Lang) []report.Step {
	return []report.Step{
		{N: 1, Phase: "pre_planning", Comment: "Looking at the repository.", Calls: []report.StepCall{{Tool: "fs/list_directory", Target: "."}}},
		{N: 2, Phase: "planning", Comment: "Two actions: write, then test."},
		{N: 3, Phase: "execution", Comment: "Writing slug.py.", Calls: []report.StepCall{{Tool: "fs/write_file", Target: "slug.py"}}, Repeats: 1},
		{N: 5, Phase: "execution", Note: l.CallTrouble("timeout", true)},
		{N: 6, Phase: "verification", Comment: "slug.py reads right."},
	}
}

// Golden files of the living comment mid-run and at the end, in both
// modes' forms, and of the closing comment, in both languages.
func TestLivingCommentGolden(t *testing.T) {
	progress := must(t)(report.English.Progress(report.Progress{Goal: "Add slugify", Actions: []report.ProgressAction{
		{ID: "a1", Description: "write slug.py", Status: report.ActionDone}, {ID: "a2", Description: "test it"}}}))
	for _, l := range []report.Lang{report.English, report.Japanese} {
		if l == report.Japanese {
			progress = must(t)(l.Progress(report.Progress{Goal: "Add slugify", Actions: []report.ProgressAction{
				{ID: "a1", Description: "write slug.py", Status: report.ActionDone}, {ID: "a2", Description: "test it"}}}))
		}
		all := liveSteps()
		golden.Check(t, "living_mid_"+string(l), must(t)(l.Living(report.Live{Steps: all[:3], Now: "", UpdatedAt: liveAt}, 0)))
		golden.Check(t, "living_final_"+string(l), must(t)(l.Living(report.Live{Steps: all, Finished: true, UpdatedAt: liveAt}, 0)))
		golden.Check(t, "living_plan_mid_"+string(l), must(t)(l.Living(report.Live{Progress: progress, Steps: planSteps(l)[:4],
			Now: "execution", UpdatedAt: liveAt}, 0)))
		golden.Check(t, "living_paused_"+string(l), must(t)(l.Living(report.Live{Steps: all[:3], Now: "execution",
			Halted: engine.Paused, UpdatedAt: liveAt}, 0)))
		for _, end := range []engine.End{engine.Stopped, engine.Interrupted} {
			if got := must(t)(l.Living(report.Live{Steps: all[:3], Halted: end, UpdatedAt: liveAt}, 0)); strings.Contains(got, "is working on this") ||
				strings.Contains(got, "作業中です") || !strings.Contains(got, "Step 3") && !strings.Contains(got, "ステップ 3") {
				t.Errorf("the living comment of a run %s says it works, or lost its steps:\n%s", end, got)
			}
		}
		golden.Check(t, "living_plan_final_"+string(l), must(t)(l.Living(report.Live{Progress: progress, Steps: planSteps(l),
			Finished: true, UpdatedAt: liveAt}, 0)))
		golden.Check(t, "closing_"+string(l), must(t)(l.Closing(report.Closing{Comment: "Added `slugify` with its tests.",
			Ran: []report.Command{{Command: "python3 -m unittest", ExitCode: 0}}, Ignored: 1,
			Delivery: "Pull request: https://github.example/acme/app/pull/2"})))
		golden.Check(t, "closing_unrun_"+string(l), must(t)(l.Closing(report.Closing{Comment: "✅ python3 -m unittest passes."})))
	}
}

// A closing comment whose model claims a pass while nothing ran says that
// the claim was checked by reading only, and lists nothing as run; with a
// command that ran, no such note.
func TestClosingClaimsMatchEvidence(t *testing.T) {
	for _, l := range []report.Lang{report.English, report.Japanese} {
		got := must(t)(l.Closing(report.Closing{Comment: "Verification passed: python3 -m unittest passes."}))
		for _, want := range map[report.Lang][]string{
			report.English:  {"checked by reading the code, not by running it", "No command was run"},
			report.Japanese: {"コードを読んで確認しただけ", "コマンドは実行されていません"},
		}[l] {
			if !strings.Contains(got, want) {
				t.Errorf("%s: closing without %q:\n%s", l, want, got)
			}
		}
		ran := must(t)(l.Closing(report.Closing{Comment: "python3 -m unittest passes.",
			Ran: []report.Command{{Command: "python3 -m unittest", ExitCode: 0}}}))
		if strings.Contains(ran, "⚠️") || !strings.Contains(ran, "✅ `python3 -m unittest`") {
			t.Errorf("%s: closing of a round that ran its tests:\n%s", l, ran)
		}
		quiet := must(t)(l.Closing(report.Closing{Comment: "Wrote hello.txt."}))
		if strings.Contains(quiet, "⚠️") {
			t.Errorf("%s: a note where nothing was claimed:\n%s", l, quiet)
		}
	}
}

// A living comment too long for the forge leaves out its oldest steps, and
// says so; the newest stays.
func TestLivingCommentDropsOldestSteps(t *testing.T) {
	var steps []report.Step
	for n := 1; n <= 50; n++ {
		steps = append(steps, report.Step{N: n, Comment: strings.Repeat("word ", 40)})
	}
	steps[49].Comment = "the newest"
	got := must(t)(report.English.Living(report.Live{Steps: steps, Earlier: 3}, 2000))
	if len([]rune(got)) > 2000 || !strings.Contains(got, "the newest") || !strings.Contains(got, "earlier steps are in this comment's edit history") {
		t.Errorf("living comment of %d characters:\n%s", len([]rune(got)), got)
	}
	if strings.Contains(got, "**Step 1**") {
		t.Errorf("the oldest step kept:\n%s", got)
	}
}

// CallOf names what a call acts on: a command, a path, a list of paths.
func TestCallOfNamesFilesAndCommands(t *testing.T) {
	for args, want := range map[string]string{
		`{"path":"/w/a.py","content":"x"}`:  "/w/a.py",
		`{"command":"python3 -m unittest"}`: "python3 -m unittest",
		`{"paths":["a.py","b.py"]}`:         "a.py b.py",
		`{"source":"a","destination":"b"}`:  "a",
		`{"content":"only"}`:                "",
		`not json`:                          "",
		`{"command":["go","test","./..."]}`: "go test ./...",
	} {
		if got := report.CallOf("t/x", json.RawMessage(args)).Target; got != want {
			t.Errorf("CallOf(%s) = %q, want %q", args, got, want)
		}
	}
	if got := report.English.ToolStep([]report.StepCall{report.CallOf("fs/edit_file", json.RawMessage(`{"path":"slug.py"}`))}); got != "Calling `fs/edit_file` on `slug.py`." {
		t.Errorf("ToolStep = %q", got)
	}
}

// With EditEvery, edits sooner than that after the last are held back,
// the newest body shown by the next edit past it or by Flush; a body the
// comment shows already is not edited again.
func TestBoardEditsAtABoundedRate(t *testing.T) {
	f := newFakeForge(t)
	now := liveAt
	b := report.NewBoard(report.BoardOptions{Forge: f, Ref: ghRef,
		EditEvery: 5 * time.Second, Clock: func() time.Time { return now }}, report.BoardState{})
	noErr(t, b.SetProgress(ctx, "one"))   // posted
	noErr(t, b.SetProgress(ctx, "two"))   // held
	noErr(t, b.SetProgress(ctx, "three")) // held
	if f.posts != 1 || f.edits != 0 {
		t.Fatalf("%d posts, %d edits within the gap; want 1, 0", f.posts, f.edits)
	}
	now = now.Add(5 * time.Second)
	noErr(t, b.SetProgress(ctx, "four"))
	noErr(t, b.SetProgress(ctx, "five")) // held
	noErr(t, b.Flush(ctx, ""))           // shows five
	noErr(t, b.Flush(ctx, "five"))       // shown already
	if f.posts != 1 || f.edits != 2 {
		t.Fatalf("%d posts, %d edits; want 1, 2", f.posts, f.edits)
	}
	wantComments(t, f, "five")
}
