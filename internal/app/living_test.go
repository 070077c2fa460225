package app_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// commentEdits counts the edits of comments the forge was asked for.
func (e *env) commentEdits() int {
	if e.gh != nil {
		return e.gh.Count("PATCH", "/issues/comments/")
	}
	if e.gt != nil {
		return e.gt.Count("PATCH", "/issues/comments/")
	}
	return e.gl.Count("PUT", "/notes/")
}

// walkRound is one round of a scenario: the file the model writes, the
// command it runs ("" none), its closing words.
type walkRound struct{ file, content, command, closing string }

// walkScenarios are the original system's three scenarios (a hello-world
// program; a small classifier, then its tests; a change asked for on a pull
// or merge request), each with a follow-up the author asks for after
// thanking: the reply that used to end the conversation.
var walkScenarios = []struct {
	name, title, body, followUp, check string
	change                             bool // the task is a pull or merge request whose head holds greet.py
	rounds                             [2]walkRound
}{
	{name: "hello-world", title: "Hello world", body: "Add hello.py that prints Hello, world!",
		followUp: "Thanks, that looks right. One more thing: please add a README saying how to run it.",
		check:    "python3 hello.py",
		rounds: [2]walkRound{{"hello.py", "print('Hello, world!')\n", "python3 hello.py", "Added hello.py; it prints Hello, world!"},
			{"README.md", "Run `python3 hello.py`.\n", "", "Added README.md saying how to run it."}}},
	{name: "classifier-with-tests", title: "A parity classifier", body: "Add classifier.py with classify(n) -> 'even' or 'odd'.",
		followUp: "Thanks! OK, now please also add its unit tests.",
		check:    "python3 -m unittest -q",
		rounds: [2]walkRound{{"classifier.py", "def classify(n):\n    return 'odd' if n % 2 else 'even'\n",
			`python3 -c "from classifier import classify; assert classify(3) == 'odd'"`, "Added classify."},
			{"test_classifier.py", "import unittest\nfrom classifier import classify\n\n\nclass T(unittest.TestCase):\n" +
				"    def test_even(self):\n        self.assertEqual(classify(4), 'even')\n",
				"python3 -m unittest -q", "Added the unit tests; they pass."}}},
	{name: "change-on-a-pull-request", change: true, title: "Greeting", body: "Please make greet() take a name.",
		followUp: "Thanks, one more thing: please add a test for greet.",
		check:    `python3 -c "import greet; print(greet.greet('Ann'))"`,
		rounds: [2]walkRound{{"greet.py", "def greet(name):\n    return f'Hello, {name}!'\n",
			`python3 -c "from greet import greet; assert greet('Ann') == 'Hello, Ann!'"`, "greet(name) now greets by name."},
			{"test_greet.py", "import unittest\nfrom greet import greet\n\n\nclass T(unittest.TestCase):\n" +
				"    def test_ann(self):\n        self.assertEqual(greet('Ann'), 'Hello, Ann!')\n",
				"python3 -m unittest -q", "Added a test for greet."}}},
}

// The three scenarios with a follow-up, on both forges and in both modes,
// through `run` with the README's quickstart and a check of the
// repository: each round leaves 2 bot comments (the living one, and the
// closing one, which ends with the delivery: the pull or merge request's
// link) and a bounded number of edits, no per-call comment; the follow-up after thanks starts a second round; the
// pull or merge request's body names every file changed, the check that
// ran and holds one section per round. The numbers are logged (go test
// -v), and the comments of GitHub's plain hello-world.
func TestThreeScenariosWithAFollowUp(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range emulatedForges {
		for _, planning := range []bool{false, true} {
			for _, sc := range walkScenarios {
				name := fg + map[bool]string{false: "/plain/", true: "/planning/"}[planning] + sc.name
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					kind := task.Issue
					if sc.change {
						kind = changeKind(fg)
					}
					round := 0
					var script [2]func(*env, llmtest.Received) llmtest.Step
					for i, r := range sc.rounds {
						script[i] = roundWriting(planning, r.file, r.content, r.command, r.closing)
					}
					e := newEnv(t, setup{forge: fg, kind: kind, provider: config.ProviderOpenAI, native: true, conversation: true,
						planning: planning, seed: func(s *forgetest.IssueSeed) { s.Title, s.Body = sc.title, sc.body },
						respond: func(e *env, r llmtest.Received) llmtest.Step { return script[round](e, r) }})
					quickstart(t, e)
					e.cfg.Language = config.LanguageEnglish
					e.cfg.Workspace.Checks = []string{sc.check}
					e.cfg.ForgeLeaseSeconds = new(0) // no holder comment: every edit counted is a report's
					if sc.change {
						commitFile(e, e.head, "greet.py", "def greet():\n    return 'Hello!'\n")
					}
					var comments, edits, calls int
					for ; round < len(sc.rounds); round++ {
						if round == 1 {
							e.addComment("alice", sc.followUp)
						}
						c0, e0, m0 := len(e.botComments()), e.commentEdits(), len(e.model.Requests())
						e.runOK(t)
						c, ed, m := len(e.botComments())-c0, e.commentEdits()-e0, len(e.model.Requests())-m0
						t.Logf("round %d: %d model calls, %d bot comments, %d edits", round+1, m, c, ed)
						if m == 0 {
							t.Fatalf("round %d made no model request; the comments:\n%s", round+1, strings.Join(e.botComments(), "\n-----\n"))
						}
						if c != 2 {
							t.Errorf("round %d left %d bot comments, want 2 (living, closing):\n%s", round+1, c,
								strings.Join(e.botComments()[c0:], "\n-----\n"))
						} else if closing := e.botComments()[c0+1]; !strings.Contains(closing, "delivered its work") ||
							!changeLink.MatchString(closing) {
							t.Errorf("round %d's closing comment does not end with the delivery and its link:\n%s", round+1, closing)
						}
						if ed > m+2 { // at most one per model call, the last, and the delivery's
							t.Errorf("round %d made %d edits for %d model calls", round+1, ed, m)
						}
						comments, edits, calls = comments+c, edits+ed, calls+m
					}
					e.wantLabels(t, "bug", "coding agent awaiting response")
					t.Logf("in all: 2 rounds, %d model calls, %d bot comments, %d edits", calls, comments, edits)
					all := e.botComments()
					if fg == task.GitHub && !planning && sc.name == "hello-world" {
						t.Logf("the comments:\n%s", strings.Join(all, "\n\n-----\n\n"))
					}
					if !strings.Contains(strings.Join(all, "\n"), "✅ `"+sc.check+"` (exit 0)") {
						t.Errorf("no comment lists the check %s as passed", sc.check)
					}
					for _, b := range all {
						if strings.Contains(b, "LLM call #") {
							t.Errorf("a per-call comment in living mode:\n%s", b)
						}
					}
					if !planning {
						if n := strings.Count(strings.Join(all, "\n"), "`workspace/write_file` `"+sc.rounds[0].file+"`"); n != 1 {
							t.Errorf("round 1's write is in the comments %d times, want once (the living comment's step)", n)
						}
					}
					head := e.head
					if !sc.change {
						head = "coding-agent/issue-" + strconv.Itoa(e.ref.Number)
					}
					body := oneChange(t, e.git(), head).Body
					if n := roundHeading.FindAllStringSubmatch(body, -1); len(n) != 2 {
						t.Errorf("round sections: %v, want rounds 1 and 2:\n%s", n, body)
					}
					for _, want := range []string{"`" + sc.rounds[0].file + "`", "`" + sc.rounds[1].file + "`", "`" + sc.check + "` (exit 0)"} {
						if !strings.Contains(body, want) {
							t.Errorf("the change's body lacks %s:\n%s", want, body)
						}
					}
					for _, r := range sc.rounds {
						if got, ok := e.git().file(head, r.file); !ok || got != r.content {
							t.Errorf("%s on %s = %q, %v", r.file, head, got, ok)
						}
					}
				})
			}
		}
	}
}

// changeLink is a pull or merge request's link, on any forge (Gitea's
// are .../pulls/N).
var changeLink = regexp.MustCompile(`https?://\S+/(pulls?|merge_requests)/\d+`)

// A model that says the tests pass while nothing was run: the closing
// comment lists nothing as run and says the claim was checked by reading
// only; ✅ stands beside no command.
func TestClaimedPassWithoutARunIsMarkedAsRead(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if toolResults(r) == 0 {
				return e.call(r, "Writing hello.txt.", "fs/write_file",
					map[string]any{"path": e.workspace + "/hello.txt", "content": "hello\n"})
			}
			return done("✅ Verification passed: python3 -m unittest passes.")
		}})
	e.runOK(t)
	cs := e.botComments()
	if len(cs) != 2 {
		t.Fatalf("%d bot comments, want the living one and the closing one: %q", len(cs), cs)
	}
	closing := cs[1]
	for _, want := range []string{"checked by reading the code, not by running it", "No command was run"} {
		if !strings.Contains(closing, want) {
			t.Errorf("the closing comment lacks %q:\n%s", want, closing)
		}
	}
	if strings.Contains(closing, "✅ `") {
		t.Errorf("the closing comment marks a command passed:\n%s", closing)
	}
}
