package app_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// An issue with a 1 MB description and 3000 comments, on the OpenAI wire:
// the first model request stays bounded (the description's start, the
// first 5 and the newest 30 comments, with notes saying what was left out).
func TestHugeTaskGivesABoundedFirstRequest(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
		respond: func(*env, llmtest.Received) llmtest.Step { return done("Read it all.") }})
	e.gh.SetState("acme/app", e.ref.Number, "closed")
	body := "Please fix the crash below.\n" + strings.Repeat("panic: runtime error at main.go:42\n", 1<<20/35)
	e.ref.Number = e.gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "Crash", Body: body, Author: "alice", Labels: []string{"coding agent"}})
	for i := range 3000 {
		e.gh.AddComment("acme/app", e.ref.Number, "alice", fmt.Sprintf("Still happening, report %d.", i+1))
	}
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	first := e.model.Requests()[0]
	t.Logf("first request: %d bytes (description %d bytes, 3000 comments)", len(first.Body), len(body))
	if len(first.Body) > 60_000 {
		t.Errorf("first request is %d bytes, want at most 60,000", len(first.Body))
	}
	user := first.Messages[1].Content
	for _, want := range []string{"Please fix the crash below.", "its first 20000 are shown",
		"Comments, oldest first (3000: the first and the newest are shown):", "report 5.", "[2965 comments written between these were left out.]",
		"report 2971.", "report 3000."} {
		if !strings.Contains(user, want) {
			t.Errorf("the task prompt lacks %q", want)
		}
	}
}

// A 2 MB reply from the model is one comment on the issue, cut with a note,
// not 33 comments; the full text is in the debug log.
func TestHugeReplyIsOneComment(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	reply := "Here is everything I found.\n" + strings.Repeat("A long line of findings that goes on and on.\n", 2<<20/45+1)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(*env, llmtest.Received) llmtest.Step { return done(reply) }})
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	cs := e.botComments()
	if len(cs) != 2 || !strings.HasPrefix(cs[0], "## 🤖 coding-agent worked on this") {
		t.Fatalf("%d bot comments, want 2: the living one and the closing one, the reply in one", len(cs))
	}
	cs = cs[1:]
	if !strings.HasPrefix(cs[0], "Here is everything I found.\n") || !strings.Contains(cs[0], "more characters were cut*") || len(cs[0]) > 65536*4 {
		t.Errorf("the comment is not the reply's start with a cut note: %q…%q", cs[0][:60], cs[0][len(cs[0])-80:])
	}
	logs, err := os.ReadFile(e.cfg.Logging.File)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), `"msg":"comment cut to fit one comment; its full text"`) || !strings.Contains(string(logs), `"text":"Here is everything`) ||
		!strings.Contains(string(logs), `goes on and on.\n\nNo command was run`) {
		t.Error("the full reply is not in the debug log")
	}
	t.Logf("a %d-byte reply: one comment of %d bytes", len(reply), len(cs[0]))
}
