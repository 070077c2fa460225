package app_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// `run --dry-run` works on the real labelled task with the real model and
// tools but changes nothing on the forge (no label, no comment, no push: no
// request but reads) and leaves no state behind: what it would post is
// printed, and a real run afterwards does the task from the start.
func TestDryRunChangesNothingOnTheForge(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range emulatedForges {
		t.Run(fg, func(t *testing.T) {
			e := newEnv(t, setup{forge: fg, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
				respond: writeFiles("hello.txt")})
			quickstart(t, e)
			before := e.labels()
			var out strings.Builder
			if err := e.runWith(context.Background(), app.Options{DryRun: &out}); err != nil {
				t.Fatalf("dry run: %v\n%s", err, out.String())
			}
			t.Logf("dry run printed:\n%s", out.String())
			onlyReads(t, e)
			if l := e.labels(); !slices.Equal(l, before) {
				t.Errorf("labels %v after the dry run, were %v", l, before)
			}
			if c := e.botComments(); len(c) != 0 {
				t.Errorf("the dry run posted %q", c)
			}
			if n := len(e.model.Requests()); n == 0 {
				t.Error("the dry run did not ask the model")
			}
			for _, w := range []string{`would add the label "coding agent processing"`, "would post comment 1:",
				`would add the label "coding agent done"`} {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the dry run did not print %q", w)
				}
			}
			for _, dir := range []string{e.cfg.StateDir, e.checkout(t, e.ref)} {
				if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the dry run left %s: %v", dir, err)
				}
			}
			dryFolderRemoved(t, e)

			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent done")
		})
	}
}

// onlyReads fails the test for every request to e's forge that is not a
// read (git's fetch, a POST to git-upload-pack, reads too).
func onlyReads(t *testing.T, e *env) {
	t.Helper()
	for _, r := range e.emu().Requests() {
		if r.Method != "GET" && r.Method != "HEAD" && !strings.Contains(r.Path, "git-upload-pack") {
			t.Errorf("the dry run sent %s %s", r.Method, r.Path)
		}
	}
}

// The same through planning mode, whose progress report is edited in
// place, with the author commenting while the agent works (the comment is
// acknowledged with a reaction): every write is printed, none is made.
func TestPlannedDryRunChangesNothingOnTheForge(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range emulatedForges {
		t.Run(fg, func(t *testing.T) {
			e := planned(t, setup{forge: fg, kind: task.Issue, provider: config.ProviderOpenAI,
				respond: func(e *env, r llmtest.Received) llmtest.Step {
					if r.N == 1 {
						e.addComment("alice", "Please also keep a changelog.")
					}
					return fullPlan(e, r)
				}})
			before := e.labels()
			var out strings.Builder
			if err := e.runWith(context.Background(), app.Options{Now: e.now, DryRun: &out}); err != nil {
				t.Fatalf("dry run: %v\n%s", err, out.String())
			}
			onlyReads(t, e)
			if l := e.labels(); !slices.Equal(l, before) {
				t.Errorf("labels %v after the dry run, were %v", l, before)
			}
			if c := e.botComments(); len(c) != 0 {
				t.Errorf("the dry run posted %q", c)
			}
			if !slices.ContainsFunc(e.model.Requests(), func(r llmtest.Received) bool { return seen(r, "Please also keep a changelog.") }) {
				t.Error("the author's comment did not reach the model, as it would in a real run")
			}
			for _, w := range []string{"would edit its comment 1 (+", "would react", `would add the label "coding agent done"`} {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the dry run did not print %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// dryFolderRemoved fails the test unless the dry run said where its folder
// was (in the log) and the folder is gone.
func dryFolderRemoved(t *testing.T, e *env) {
	t.Helper()
	log, err := os.ReadFile(e.cfg.Logging.File)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"msg":"dry run: [^"]*"[^\n]*"folder":"([^"]+)"`).FindSubmatch(log)
	if m == nil {
		t.Fatalf("the log does not say where the dry run's folder is:\n%s", log)
	}
	if _, err := os.Stat(string(m[1])); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dry run's folder %s is left: %v", m[1], err)
	}
}

// `run --dry-run` shows the change it would make: the branch and the
// commit it would push (its message, its files and diffstat) and the pull
// or merge request it would open (title, base, body), all made from the
// real delivery's own code, with nothing pushed or opened. (Measured: the
// lines printed for a task of 10 model calls.)
func TestDryRunShowsTheChangeItWouldMake(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	files := []string{"a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "f.txt", "g.txt", "h.txt", "i.txt"}
	for _, fg := range emulatedForges {
		t.Run(fg, func(t *testing.T) {
			e := newEnv(t, setup{forge: fg, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
				respond: writeFiles(files...)})
			quickstart(t, e)
			var out strings.Builder
			if err := e.runWith(context.Background(), app.Options{DryRun: &out}); err != nil {
				t.Fatalf("dry run: %v\n%s", err, out.String())
			}
			got := out.String()
			t.Logf("dry run printed %d lines for %d model calls:\n%s", strings.Count(got, "\n"), len(e.model.Requests()), got)
			onlyReads(t, e)
			if n := len(e.git().branches()); n != 1 {
				t.Errorf("%d branches on the forge after the dry run, want the default one alone", n)
			}
			if c := e.git().changes(); len(c) != 0 {
				t.Errorf("the dry run opened %v", c)
			}
			kind := task.Forges[fg].Change
			for _, w := range []string{
				"would push the branch coding-agent/issue-1 (new, from main):\n    commit ",
				"    Add a.txt, b.txt and 7 more files", // the round's commit says what it changed
				"     a.txt | 1 +",
				"     i.txt | 1 +",
				"     9 files changed, 9 insertions(+)",
				"would open a draft " + kind + " from coding-agent/issue-1 into main: Add a greeting file\n",
				"    Closes #1",
			} {
				if !strings.Contains(got, w) {
					t.Errorf("the dry run did not print %q", w)
				}
			}
		})
	}
}

// A dry run prints an edit of a comment as the change (the lines it
// removes and adds), not the whole comment again: planning mode's progress
// comment, edited after every step, is printed once whole. (Measured: the
// lines printed for a planned task and its model calls.)
func TestPlannedDryRunPrintsEditsAsChanges(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range emulatedForges {
		t.Run(fg, func(t *testing.T) {
			// A comment per call, each edited as its phase goes on (the
			// living comment is edited at a bounded rate, often once here).
			e := separate(planned(t, setup{forge: fg, kind: task.Issue, provider: config.ProviderOpenAI, respond: fullPlan}))
			var out strings.Builder
			if err := e.runWith(context.Background(), app.Options{Now: e.now, DryRun: &out}); err != nil {
				t.Fatalf("dry run: %v\n%s", err, out.String())
			}
			got := out.String()
			t.Logf("dry run printed %d lines for %d model calls:\n%s", strings.Count(got, "\n"), len(e.model.Requests()), got)
			edits := regexp.MustCompile(`(?m)^\[dry run\] \S+: would edit its comment \d+ \(\+\d+ -\d+ lines\):$`).FindAllStringIndex(got, -1)
			if len(edits) < 3 {
				t.Fatalf("%d edits printed as changes, want several", len(edits))
			}
			if strings.Contains(got, " to:\n") {
				t.Error("an edit is printed as the whole comment")
			}
			// Each line an edit prints is one it adds or removes.
			for _, at := range edits {
				rest := got[at[1]+1:]
				for _, l := range strings.Split(rest, "\n") {
					if !strings.HasPrefix(l, "    ") {
						break
					}
					if !strings.HasPrefix(l, "    + ") && !strings.HasPrefix(l, "    - ") && l != "    +" && l != "    -" {
						t.Errorf("edit line %q is neither added nor removed", l)
					}
				}
			}
		})
	}
}
