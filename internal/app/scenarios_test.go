package app_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// step is one model turn of a scripted scenario: a call of a built-in tool,
// or the end.
type step struct {
	tool string // "" ends the round with comment
	args map[string]any
	// comment is the step's comment, or the closing comment.
	comment string
}

// scripted answers each request with the step after the tool results the
// conversation holds; feedback from the daemon's checks (a user message
// after the done) counts as a step too, so a script can answer it.
func scripted(steps ...step) func(e *env, r llmtest.Received) llmtest.Step {
	return func(e *env, r llmtest.Received) llmtest.Step {
		n := toolResults(r) + checkFeedback(r)
		if n >= len(steps) {
			n = len(steps) - 1
		}
		s := steps[n]
		if s.tool == "" {
			return done(s.comment)
		}
		return e.call(r, s.comment, s.tool, s.args)
	}
}

// checkFeedback counts the daemon's messages saying its checks refused a done.
func checkFeedback(r llmtest.Received) int {
	n := 0
	for _, m := range r.Messages {
		if strings.Contains(m.Content, "The round is not done: the repository's checks were run") {
			n++
		}
	}
	return n
}

func write(path, content string) step {
	return step{tool: "workspace/write_file", args: map[string]any{"path": path, "content": content}, comment: "Writing " + path + "."}
}

func runStep(command string) step {
	return step{tool: "workspace/run_command", args: map[string]any{"command": command}, comment: "Running " + command + "."}
}

// The classifier scenario, on both forges, with the README's quickstart
// (the built-in tools only, no Node) and workspace.checks run by the daemon
// in the sandbox: a done whose check fails sends the check's output back
// to the model, which fixes the code; the pull request lists the check
// with its exit status, and nothing the tests wrote (__pycache__) is
// committed. The three scenarios with their follow-ups, in both modes:
// TestThreeScenariosWithAFollowUp.
func TestFailingCheckGoesBackToTheModel(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range emulatedForges {
		t.Run(fg+"/classifier-with-tests", func(t *testing.T) {
			t.Parallel()
			buggy := "def classify(n):\n    return 'even' if n % 2 else 'odd'\n"
			fixed := "def classify(n):\n    return 'odd' if n % 2 else 'even'\n"
			tests := "import unittest\nfrom classifier import classify\n\n\nclass T(unittest.TestCase):\n" +
				"    def test_even(self):\n        self.assertEqual(classify(4), 'even')\n\n" +
				"    def test_odd(self):\n        self.assertEqual(classify(3), 'odd')\n\n\nif __name__ == '__main__':\n    unittest.main()\n"
			e := newEnv(t, setup{forge: fg, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
				seed: func(s *forgetest.IssueSeed) {
					s.Title, s.Body = "A parity classifier", "Add classifier.py with classify(n) -> 'even' or 'odd', and its unit tests."
				},
				respond: scripted(write("classifier.py", buggy), write("test_classifier.py", tests),
					// Done without running anything: the daemon's check fails and its output comes back.
					step{comment: "Added the classifier and its tests."},
					step{tool: "workspace/edit_file", args: map[string]any{"path": "classifier.py", "old_text": buggy, "new_text": fixed},
						comment: "The check shows even and odd swapped: fixing."},
					runStep("python3 -m unittest -q"),
					step{comment: "Fixed the swapped labels; the tests pass."})})
			quickstart(t, e)
			e.cfg.Language = "en"
			e.cfg.Workspace.Checks = []string{"python3 -m unittest -q"}
			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent done")
			feedback := ""
			for _, r := range e.model.Requests() {
				for _, m := range r.Messages {
					if strings.Contains(m.Content, "The round is not done") {
						feedback = m.Content
					}
				}
			}
			if !strings.Contains(feedback, "AssertionError") || !strings.Contains(feedback, "python3 -m unittest -q") {
				t.Errorf("the failing check's output did not reach the model:\n%s", feedback)
			}
			body := deliveredChange(t, e, map[string]string{"classifier.py": fixed, "test_classifier.py": tests})
			for _, w := range []string{"- ✅ `python3 -m unittest -q` (exit 0)"} {
				if !strings.Contains(body, w) {
					t.Errorf("the change's body lacks %q:\n%s", w, body)
				}
			}
			branch := "coding-agent/issue-" + strconv.Itoa(e.ref.Number)
			for _, f := range e.emu().Files(e.ref.Repo, branch) {
				if strings.Contains(f, "__pycache__") || strings.HasSuffix(f, ".pyc") {
					t.Errorf("the test run's %s was committed", f)
				}
			}
		})
	}
}

// commitFile puts a file on a branch of the task's repository on its forge.
func commitFile(e *env, branch, path, content string) {
	e.emu().CommitFile(e.ref.Repo, branch, path, content, "Add "+path)
}

// deliveredChange checks that the issue's branch holds files and that one
// change was opened from it, and returns the change's body.
func deliveredChange(t *testing.T, e *env, files map[string]string) string {
	t.Helper()
	g := e.git()
	branch := "coding-agent/issue-" + strconv.Itoa(e.ref.Number)
	for path, want := range files {
		if got, ok := g.file(branch, path); !ok || got != want {
			t.Errorf("the branch holds %s = %q, %v; want %q", path, got, ok, want)
		}
	}
	changes := g.changes()
	if len(changes) != 1 || changes[0].Head != branch {
		t.Fatalf("changes %+v, want one from %s", changes, branch)
	}
	return changes[0].Body
}
