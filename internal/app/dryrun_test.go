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
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// `run --dry-run` works on the real labelled task with the real model and
// tools but changes nothing on the forge (no label, no comment, no push: no
// request but reads) and leaves no state behind: what it would post is
// printed, and a real run afterwards does the task from the start.
func TestDryRunChangesNothingOnTheForge(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range []string{task.GitHub, task.GitLab} {
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
	var reqs []forgetest.Request
	if e.gh != nil {
		reqs = e.gh.Requests()
	} else {
		reqs = e.gl.Requests()
	}
	for _, r := range reqs {
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
	for _, fg := range []string{task.GitHub, task.GitLab} {
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
			for _, w := range []string{"would edit its comment 1 to:", "would react", `would add the label "coding agent done"`} {
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
