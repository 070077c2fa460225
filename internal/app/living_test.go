package app_test

import (
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// commentEdits counts the edits of comments the forge was asked for.
func (e *env) commentEdits() int {
	if e.gh != nil {
		return e.gh.Count("PATCH", "/issues/comments/")
	}
	return e.gl.Count("PUT", "/notes/")
}

// One round on the task leaves at most 3 bot comments (the living one, the
// closing one, and the delivery's when the round delivered) and a bounded
// number of edits, through `run`, on both forges and in both modes: a
// one-file issue, and a pull or merge request that a reply sends into a
// second round. The numbers are logged (go test -v).
func TestOneLivingCommentPerRound(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range []string{task.GitHub, task.GitLab} {
		for _, planning := range []bool{false, true} {
			for _, pr := range []bool{false, true} {
				name := fg + map[bool]string{false: "-plain", true: "-planning"}[planning] + map[bool]string{false: "-issue", true: "-pr"}[pr]
				t.Run(name, func(t *testing.T) {
					kind := task.Issue
					if pr && fg == task.GitHub {
						kind = task.PullRequest
					} else if pr {
						kind = task.MergeRequest
					}
					round := 1
					s := setup{forge: fg, kind: kind, provider: config.ProviderOpenAI, native: true, conversation: pr}
					var e *env
					if planning {
						s.respond = shortPlan(nil)
						e = planned(t, s)
						e.cfg.Language = config.LanguageEnglish
					} else {
						s.respond = func(e *env, r llmtest.Received) llmtest.Step {
							if round == 1 {
								return writeFiles("hello.txt")(e, r)
							}
							return writeFiles("bye.txt")(e, r)
						}
						e = newEnv(t, s)
						quickstart(t, e)
						e.cfg.Conversation.Enabled = pr
					}
					e.cfg.ForgeLeaseSeconds = new(0) // no holder comment: every edit counted is a report's
					rounds := 1
					if pr {
						rounds = 2
					}
					var comments, edits, calls int
					for ; round <= rounds; round++ {
						if round == 2 {
							e.addComment("alice", "Please also add a goodbye file.")
						}
						c0, e0, m0 := len(e.botComments()), e.commentEdits(), len(e.model.Requests())
						e.runOK(t)
						c, ed, m := len(e.botComments())-c0, e.commentEdits()-e0, len(e.model.Requests())-m0
						t.Logf("round %d: %d model calls, %d bot comments, %d edits", round, m, c, ed)
						if m == 0 {
							t.Fatalf("round %d made no model request", round)
						}
						if c > 3 || c < 2 {
							t.Errorf("round %d left %d bot comments, want 2 or 3 (living, closing, delivery):\n%s", round, c,
								strings.Join(e.botComments()[c0:], "\n-----\n"))
						}
						if ed > m+1 { // at most one per model call, and the last
							t.Errorf("round %d made %d edits for %d model calls", round, ed, m)
						}
						comments, edits, calls = comments+c, edits+ed, calls+m
						for _, b := range e.botComments()[c0:] {
							if strings.Contains(b, "LLM call #") || strings.Contains(b, "LLM呼び出し") {
								t.Errorf("a per-call comment in living mode:\n%s", b)
							}
						}
					}
					t.Logf("in all: %d rounds, %d model calls, %d bot comments, %d edits", rounds, calls, comments, edits)
					all := strings.Join(e.botComments(), "\n")
					if planning {
						return
					}
					for _, want := range []string{"Writing hello.txt.", "`workspace/write_file` `hello.txt`"} {
						if strings.Count(all, want) != 1 {
							t.Errorf("the comments hold %q %d times, want once (the living comment's step):\n%s", want, strings.Count(all, want), all)
						}
					}
				})
			}
		}
	}
}

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
