package worker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/openai"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/task"
)

// judged is a task awaiting a reply, with the scripted model the reply
// judge may ask and a log to read.
type judged struct {
	*world
	model *llmtest.Server
	log   *bytes.Buffer
}

func awaitingWorld(t *testing.T) *judged {
	t.Helper()
	wd := newWorld(t, true)
	model := llmtest.NewServer(t, llmtest.Options{})
	client, err := openai.New(openai.Options{BaseURL: model.OpenAIURL(), Model: "test-model"})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	wd.w.o.Conversation.Ask = client
	wd.w.o.Lang = report.English
	wd.w.o.Logger = slog.New(slog.NewTextHandler(&log, nil))
	wd.claim()
	wd.run.out = engine.Outcome{End: engine.Done, Comment: "Created hello.txt.", Summary: "wrote the file"}
	wd.w.Process(t.Context(), wd.ref)
	wd.want(task.Awaiting, "bug", testLabels.Awaiting)
	return &judged{world: wd, model: model, log: &log}
}

// reply adds the author's comment a minute later and judges the replies;
// it returns how many rounds started.
func (j *judged) reply(body string) int {
	j.t.Helper()
	j.now = j.now.Add(time.Minute)
	j.gh.AddComment(j.ref.Repo, j.ref.Number, "alice", body)
	n, err := j.w.Replies(j.t.Context())
	if err != nil {
		j.t.Fatal(err)
	}
	return n
}

// announcements are the bot's comments that announce an ending.
func (j *judged) announcements() []string {
	var out []string
	for _, c := range j.comments() {
		if strings.Contains(c, "Marked done: reply or relabel to continue") {
			out = append(out, c)
		}
	}
	return out
}

func (j *judged) llmCalls() int {
	j.t.Helper()
	rec, err := j.st.Get(j.t.Context(), j.ref)
	if err != nil {
		j.t.Fatal(err)
	}
	return rec.Counters.LLMCalls
}

func TestRepliesJudgedAsAPersonWould(t *testing.T) {
	t.Run("a request hidden after thanks starts a round", func(t *testing.T) {
		j := awaitingWorld(t)
		if n := j.reply("Thanks, that looks right. One more thing: please keep `slugify` as it is."); n != 1 {
			t.Fatalf("%d rounds started, want 1", n)
		}
		j.want(task.Queued, "bug", testLabels.Processing)
		if n := len(j.model.Requests()); n != 0 {
			t.Errorf("%d model requests for a plain request", n)
		}
	})
	t.Run("a request before a thanks in a later comment starts a round", func(t *testing.T) {
		j := awaitingWorld(t)
		j.gh.AddComment(j.ref.Repo, j.ref.Number, "alice", "Please also add a goodbye file.")
		if n := j.reply("Thanks!"); n != 1 {
			t.Fatalf("%d rounds started, want 1: the request in the first reply was dropped", n)
		}
	})
	t.Run("thanks only ends it, announced once", func(t *testing.T) {
		j := awaitingWorld(t)
		if n := j.reply("Thanks, works for me!"); n != 0 {
			t.Fatalf("%d rounds started", n)
		}
		j.want(task.Done, "bug", testLabels.Done)
		a := j.announcements()
		if len(a) != 1 || !strings.Contains(a[0], "@alice's reply reads as thanks") || !strings.Contains(a[0], "within 1 hour") {
			t.Fatalf("announcements %q, want one saying why and how to continue", a)
		}
		if n := len(j.model.Requests()); n != 0 {
			t.Errorf("%d model requests for a thanks", n)
		}
		if n := j.reply("Thanks again!"); n != 0 || len(j.announcements()) != 1 {
			t.Errorf("a second thanks started %d rounds and made %d announcements, want 0 and 1", n, len(j.announcements()))
		}
		j.want(task.Done, "bug", testLabels.Done)
	})
	t.Run("a reply after the announcement continues", func(t *testing.T) {
		j := awaitingWorld(t)
		j.reply("Thanks!")
		j.want(task.Done, "bug", testLabels.Done)
		if n := j.reply("Oh wait, please also add a README."); n != 1 {
			t.Fatalf("%d rounds started by a reply after the announcement, want 1", n)
		}
		j.want(task.Queued, "bug", testLabels.Processing)
	})
	t.Run("a reply after the window is not heard", func(t *testing.T) {
		j := awaitingWorld(t)
		j.reply("Thanks!")
		j.now = j.now.Add(2 * time.Hour)
		if n := j.reply("Please also add a README."); n != 0 {
			t.Fatalf("%d rounds started by a reply after the window", n)
		}
		j.want(task.Done, "bug", testLabels.Done)
	})
	t.Run("the timeout is announced", func(t *testing.T) {
		j := awaitingWorld(t)
		j.now = j.now.Add(61 * time.Minute)
		if _, err := j.w.Replies(t.Context()); err != nil {
			t.Fatal(err)
		}
		j.want(task.Done, "bug", testLabels.Done)
		if a := j.announcements(); len(a) != 1 || !strings.Contains(a[0], "no reply within 1 hour") {
			t.Errorf("announcements %q", a)
		}
	})
	for _, c := range []struct {
		name, answer string
		round        bool
		log          string
	}{
		{"an unsure reply the model ends", `{"verdict": "end"}`, false, "the model read the reply as an ending"},
		{"an unsure reply the model continues", `{"verdict": "continue"}`, true, "the model read the reply as asking for more"},
		{"a garbled answer continues", `Sure! {"verdict": "end"}`, true, "the model's answer on the reply was not understood"},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := awaitingWorld(t)
			j.model.Script(llmtest.Reply{Content: c.answer, Usage: llmtest.Usage{In: 150, Out: 6}})
			n := j.reply("Thanks, I will merge it after lunch.")
			reqs := j.model.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d model requests, want 1", len(reqs))
			}
			if !strings.Contains(reqs[0].Messages[1].Content, "I will merge it after lunch") || reqs[0].MaxTokens > 64 {
				t.Errorf("the request: %+v", reqs[0])
			}
			if got := j.llmCalls(); got != 1 {
				t.Errorf("the store counts %d model calls, want 1", got)
			}
			if (n == 1) != c.round {
				t.Errorf("%d rounds started, want a round: %v", n, c.round)
			}
			if c.round {
				j.want(task.Queued, "bug", testLabels.Processing)
			} else {
				j.want(task.Done, "bug", testLabels.Done)
				if a := j.announcements(); len(a) != 1 || !strings.Contains(a[0], "the model read @alice's reply as an ending") {
					t.Errorf("announcements %q", a)
				}
			}
			if !strings.Contains(j.log.String(), c.log) {
				t.Errorf("the log lacks %q:\n%s", c.log, j.log)
			}
		})
	}
	t.Run("a model that cannot be reached leaves the reply for the next pass", func(t *testing.T) {
		j := awaitingWorld(t)
		j.model.Script(llmtest.Fault{Status: 400, Body: "bad request"}, llmtest.Reply{Content: `{"verdict": "continue"}`})
		if n := j.reply("Thanks, I will merge it after lunch."); n != 0 {
			t.Fatalf("%d rounds started on a failed request", n)
		}
		j.want(task.Awaiting, "bug", testLabels.Awaiting)
		if n, err := j.w.Replies(t.Context()); err != nil || n != 1 {
			t.Fatalf("the next pass: %d rounds, %v; want 1", n, err)
		}
	})
}

// The stopped label on a task awaiting a reply stops it at the next pass of
// the reply judge, without a reply: labels, status and a notice.
func TestStoppedLabelOnAnAwaitingTask(t *testing.T) {
	j := awaitingWorld(t)
	j.gh.AddLabelDirect(j.ref.Repo, j.ref.Number, testLabels.Stopped)
	if _, err := j.w.Replies(t.Context()); err != nil {
		t.Fatal(err)
	}
	j.want(task.Stopped, "bug", testLabels.Stopped)
	if n := j.reply("Please also add a README."); n != 0 {
		t.Errorf("a reply to a stopped task started %d rounds", n)
	}
	found := false
	for _, c := range j.comments() {
		found = found || strings.Contains(c, "Stopped: this task no longer awaits a reply")
	}
	if !found {
		t.Errorf("no notice of the stop among %q", j.comments())
	}
}
