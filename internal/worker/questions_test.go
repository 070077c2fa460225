package worker

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// askingRunner's first run ends on a server's question (its checkpoint
// holding it, as the engine's does); a later run is done, recording what
// it was given.
type askingRunner struct {
	st     store.Store
	q      engine.Question
	ins    []engine.Input
	runs   int
	during func() // called in the first run, before it ends
}

func (r *askingRunner) Run(ctx context.Context, in engine.Input) (engine.Outcome, error) {
	r.runs++
	r.ins = append(r.ins, in)
	if r.runs > 1 {
		return engine.Outcome{End: engine.Done, Comment: "Deployed to staging."}, nil
	}
	if r.during != nil {
		r.during()
	}
	data, _ := json.Marshal(map[string]any{"asked": r.q})
	if err := r.st.SaveCheckpoint(ctx, in.Task.Ref, store.Checkpoint{Step: 1, Data: data}); err != nil {
		return engine.Outcome{}, err
	}
	return engine.Outcome{End: engine.Asked, Question: &r.q, Calls: 1}, nil
}

func askingWorld(t *testing.T) (*world, *askingRunner) {
	wd := newWorld(t, true)
	wd.w.o.Conversation.Questions = true
	r := &askingRunner{st: wd.st, q: engine.Question{Question: toolhost.Question{Server: "deployer",
		Message: "Where should web be deployed? @bob", Schema: json.RawMessage(`{"type":"object","required":["environment"],` +
			`"properties":{"environment":{"type":"string","enum":["staging","production"]}}}`)}}}
	wd.w.o.Agent = r
	return wd, r
}

// A run that ends on a server's question: the task awaits an answer with
// its checkpoint kept, the question on the task (the server's words
// quoted in a code block, where a mention notifies nobody, its fields listed); an
// outsider's reply is not an answer; the author's is, whatever it says
// ("thanks" ends a finished round's conversation, not a question), and
// the task is queued to resume.
func TestServerQuestionAwaitsTheAnswer(t *testing.T) {
	wd, r := askingWorld(t)
	wd.claim()
	wd.w.Process(t.Context(), wd.ref)
	wd.want(task.Awaiting, "bug", testLabels.Awaiting)
	if !wd.checkpoint() {
		t.Fatal("the checkpoint was dropped")
	}
	if !r.ins[0].Questions {
		t.Error("the run was not told it may ask")
	}
	c := wd.comments()
	if len(c) != 1 || !strings.Contains(c[0], "needs an answer") || !strings.Contains(c[0], "```\nWhere should web be deployed? @bob\n```") ||
		!strings.Contains(c[0], "`environment`, required: one of `staging`, `production`") {
		t.Fatalf("comments:\n%s", strings.Join(c, "\n---\n"))
	}
	wd.gh.AddComment(wd.ref.Repo, wd.ref.Number, "mallory", "environment: production")
	if n, err := wd.w.Replies(t.Context()); err != nil || n != 0 {
		t.Fatalf("an outsider's reply: %d queued, %v", n, err)
	}
	wd.want(task.Awaiting, "bug", testLabels.Awaiting)
	wd.gh.AddComment(wd.ref.Repo, wd.ref.Number, "alice", "Thanks, staging")
	if n, err := wd.w.Replies(t.Context()); err != nil || n != 1 {
		t.Fatalf("the author's reply: %d queued, %v", n, err)
	}
	wd.want(task.Queued, "bug", testLabels.Processing)
	wd.w.Process(t.Context(), wd.ref)
	if r.runs != 2 || !slices.ContainsFunc(r.ins[1].Comments, func(c task.Comment) bool { return c.Body == "Thanks, staging" }) ||
		slices.ContainsFunc(r.ins[1].Comments, func(c task.Comment) bool { return c.Author == "mallory" }) {
		t.Fatalf("the resumed run: %d runs, comments %+v", r.runs, r.ins[len(r.ins)-1].Comments)
	}
	wd.want(task.Awaiting, "bug", testLabels.Awaiting) // the round is done; the conversation goes on
	if wd.checkpoint() {
		t.Error("the finished round's checkpoint was kept")
	}
}

// Nobody answers within the conversation's timeout: the task fails,
// saying so, and its checkpoint is dropped.
func TestServerQuestionUnanswered(t *testing.T) {
	wd, _ := askingWorld(t)
	wd.claim()
	wd.w.Process(t.Context(), wd.ref)
	wd.now = wd.now.Add(2 * time.Hour)
	if n, err := wd.w.Replies(t.Context()); err != nil || n != 0 {
		t.Fatalf("replies: %d, %v", n, err)
	}
	wd.want(task.Failed, "bug", testLabels.Failed)
	if c := wd.comments(); len(c) != 2 || !strings.Contains(c[1], `nobody answered the question of the tool server "deployer" within 1h0m0s`) {
		t.Errorf("comments:\n%s", strings.Join(c, "\n---\n"))
	}
	if wd.checkpoint() {
		t.Error("the checkpoint was kept")
	}
}

// Without the conversation (or in a dry run) nobody can answer: the run is
// told so, and the engine declines the question.
func TestServerQuestionsOffWithoutTheConversation(t *testing.T) {
	wd, r := askingWorld(t)
	wd.w.o.Conversation.Enabled = false
	wd.claim()
	wd.w.Process(t.Context(), wd.ref)
	if r.ins[0].Questions {
		t.Error("the run was told it may ask with the conversation off")
	}
}

// A comment the author wrote while the run worked, before the question was
// posted, is no answer to it: the task still awaits one.
func TestServerQuestionAnsweredOnlyAfterItWasAsked(t *testing.T) {
	wd, r := askingWorld(t)
	r.during = func() { wd.gh.AddComment(wd.ref.Repo, wd.ref.Number, "alice", "Please also bump the version.") }
	wd.claim()
	wd.w.Process(t.Context(), wd.ref)
	wd.want(task.Awaiting, "bug", testLabels.Awaiting)
	if n, err := wd.w.Replies(t.Context()); err != nil || n != 0 {
		t.Fatalf("a comment written before the question: %d queued, %v", n, err)
	}
	wd.want(task.Awaiting, "bug", testLabels.Awaiting)
	wd.gh.AddComment(wd.ref.Repo, wd.ref.Number, "alice", "staging")
	if n, err := wd.w.Replies(t.Context()); err != nil || n != 1 {
		t.Fatalf("the reply: %d queued, %v", n, err)
	}
}
