package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// askingHost serves the mcptest tools with deploy, which asks where to
// deploy before it does.
func askingHost(t *testing.T) *toolhost.Host {
	t.Helper()
	h, err := toolhost.Start(t.Context(), toolhost.Options{
		Servers: []toolhost.ServerConfig{{Name: "test"}},
		Connect: func(ctx context.Context, _ toolhost.ServerConfig) (mcp.Transport, error) {
			return mcptest.NewInMemoryWith(ctx, t, mcptest.ServerOptions{Asks: true})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// reader is the scripted model that also reads replies: a request to read
// a reply into a question's fields gets read.
type reader struct {
	mu    sync.Mutex
	m     *model
	read  string // the answer to a reading request
	reads int
	reqs  []llm.Request
}

func (r *reader) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	if strings.HasPrefix(req.Messages[0].Content, "A tool server asked the people on an issue a question") {
		r.reads++
		r.mu.Unlock()
		return llm.Response{Message: llm.Message{Role: llm.Assistant, Content: r.read}}, nil
	}
	r.mu.Unlock()
	return r.m.Chat(ctx, req)
}

var deployScripts = map[string][]string{
	"plain": {
		cmd("test/deploy", `{"target": "web"}`, "Deploying."),
		`{"done": true, "comment": "Deployed."}`,
	},
	"planning": {
		`{"phase": "pre_planning", "understanding": {"goal": "deploy", "deliverables": ["web deployed"], "confidence": "high"}, "comment": "Understood."}`,
		`{"phase": "planning", "goal_understanding": {"main_objective": "Deploy web", "success_criteria": ["deployed"]},
		  "task_decomposition": {"subtasks": [{"id": "t1", "description": "deploy"}]},
		  "action_plan": {"actions": [{"id": "a1", "task_id": "t1", "description": "deploy web"}]}}`,
		cmd("test/deploy", `{"target": "web"}`, "Deploying."),
		`{"phase": "execution", "action_id": "a1", "status": "completed", "summary": "deployed web"}`,
		`{"phase": "verification", "verification": {"passed": true, "criteria": [{"criterion": "deployed", "met": true}]}, "comment": "Deployed."}`,
	},
}

var deployScript = deployScripts["plain"]

func asks(in *engine.Input) { in.Questions = true }

// questioned is the task with the question of mark on it, as the worker
// posts it (its comment named by engine.Question.CommentName), and a
// comment from alice written before it, which is no answer.
func questioned(mark int64, id int64) func(*engine.Input) {
	return func(in *engine.Input) {
		in.BotName = "agent-bot"
		q := engine.Question{Mark: mark}
		in.Comments = append(in.Comments, task.Comment{ID: id - 1, Author: "alice", Body: "environment: production (before the question)"},
			task.Comment{ID: id, Author: "agent-bot", Body: "A question.\n\n<!-- coding-agent comment: 0123456789ab/1/" + q.CommentName() + " -->"})
	}
}

// replied is the question asked at mark 0 on the task and alice's reply.
func replied(body string) func(*engine.Input) {
	return func(in *engine.Input) {
		questioned(0, 800)(in)
		in.Comments = append(in.Comments, task.Comment{ID: 900, Author: "alice", Body: body})
	}
}

// lastToolResult is the last tool result the model was shown.
func lastToolResult(reqs []llm.Request) string {
	msgs := reqs[len(reqs)-1].Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if strings.Contains(msgs[i].Content, engine.ResultPrefix+"test/deploy") && msgs[i].Role != llm.Assistant {
			return msgs[i].Content
		}
	}
	return ""
}

// A server's question during a call ends the run Asked, the call in hand;
// the run resumed with a reply reads it into the fields, makes the call
// again (not as a call cut off), and the server gets the answer; the model
// is told who answered what, and the run finishes.
func TestQuestionPutOffThenAnswered(t *testing.T) {
	for _, c := range []struct {
		name, loop, reply, read string
		reads                   int
	}{
		{name: "lines", loop: "plain", reply: "environment: staging\nreplicas: 2"},
		{name: "prose read by the model", loop: "plain", reply: "Thanks! Let's go with staging, two replicas.",
			read: `{"action": "accept", "content": {"environment": "staging", "replicas": 2}}`, reads: 1},
		{name: "planning", loop: "planning", reply: `{"environment": "staging", "replicas": 2}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			host, w := askingHost(t), newWorld(t)
			m := &reader{m: &model{script: deployScripts[c.loop]}, read: c.read}
			out, err := runner(t, c.loop, w, m, tools{Host: host}, asks)()
			if err != nil || out.End != engine.Asked || out.Question == nil {
				t.Fatalf("first run: %+v %v", out, err)
			}
			q := out.Question
			if q.Server != "test" || q.Message != "Where should web be deployed, and with how many replicas?" || len(q.Fields()) != 2 {
				t.Fatalf("question: %+v", q)
			}
			if got, ok := engine.Asking(w.cps[ref].Data); !ok || got.Key() != q.Key() {
				t.Fatalf("the checkpoint does not hold the question: %+v", got)
			}
			out, err = runner(t, c.loop, w, m, tools{Host: host}, asks, replied(c.reply))()
			if err != nil || out.End != engine.Done {
				t.Fatalf("resumed run: %+v %v", out, err)
			}
			if m.reads != c.reads {
				t.Errorf("%d requests read the reply, want %d", m.reads, c.reads)
			}
			res := lastToolResult(m.reqs)
			if !strings.Contains(res, `deployed web with {"environment":"staging","replicas":2}`) ||
				!strings.Contains(res, "@alice answered on the task") || strings.Contains(res, cutOffNote) {
				t.Errorf("the call made again: %q", res)
			}
			if _, ok := engine.Asking(w.cps[ref].Data); ok {
				t.Error("the checkpoint still holds the question")
			}
		})
	}
}

// A reply that cannot be read (not by the model either) keeps the question:
// the run ends Asked again at once, saying why, with no call made; a
// resume with no reply (the process stopped before the question was
// posted, or the task was started again) makes the call again, and the
// server asks again.
func TestQuestionUnreadOrUnanswered(t *testing.T) {
	host, w := askingHost(t), newWorld(t)
	m := &reader{m: &model{script: deployScript}, read: `I am not sure.`}
	if out, err := runner(t, "plain", w, m, tools{Host: host}, asks)(); err != nil || out.End != engine.Asked {
		t.Fatalf("first run: %+v %v", out, err)
	}
	out, err := runner(t, "plain", w, m, tools{Host: host}, asks, replied("maybe the blue one?"))()
	if err != nil || out.End != engine.Asked || !strings.Contains(out.Question.Unread, "environment") {
		t.Fatalf("an unread reply: %+v %v", out, err)
	}
	if m.reads != 1 || m.m.asked != 1 {
		t.Errorf("%d reads, %d task requests; want 1 and 1", m.reads, m.m.asked)
	}
	if out.Question.Mark != 900 {
		t.Errorf("the question's mark is %d, want the reply's 900", out.Question.Mark)
	}
	// Resumed before the question asked again was posted (the process
	// stopped): it is asked again, with its reason, no call made.
	out, err = runner(t, "plain", w, m, tools{Host: host}, asks, replied("maybe the blue one?"))()
	if err != nil || out.End != engine.Asked || out.Question.Unread == "" || out.Question.Mark != 900 {
		t.Fatalf("resumed before the question was asked again: %+v %v", out, err)
	}
	// Resumed with it posted and no reply after it (the task started again
	// another way): the call is made again, and the server asks again.
	out, err = runner(t, "plain", w, m, tools{Host: host}, asks, replied("maybe the blue one?"), questioned(900, 950))()
	if err != nil || out.End != engine.Asked || out.Question.Unread != "" {
		t.Fatalf("resumed without a reply: %+v %v", out, err)
	}
	if m.m.asked != 1 || m.reads != 1 {
		t.Errorf("%d task requests, %d reads, want 1 and 1: the call in hand is made again without asking the model", m.m.asked, m.reads)
	}
}

// Nobody can be asked (a dry run, the conversation off): the question is
// declined, the server hears so, and the run goes on.
func TestQuestionDeclinedWhenNobodyCanAnswer(t *testing.T) {
	host, w := askingHost(t), newWorld(t)
	m := &reader{m: &model{script: deployScript}}
	out, err := runner(t, "plain", w, m, tools{Host: host})()
	if err != nil || out.End != engine.Done {
		t.Fatalf("run: %+v %v", out, err)
	}
	if res := lastToolResult(m.reqs); !strings.Contains(res, `deploy web: not deployed (the question was answered "decline")`) {
		t.Errorf("result: %q", res)
	}
}

// The promise that an answered question reaches its server, walked at each
// point: the run after the reply is killed at each of its model requests
// and tool calls, and a new process resumes from what was saved; every
// time the run finishes, the server got the answer (the call made again
// with it), and no question is left in the checkpoint.
func TestQuestionAnswerSurvivesAKillAtEveryPoint(t *testing.T) {
	for _, loop := range []string{"plain", "planning"} {
		t.Run(loop, func(t *testing.T) {
			script := deployScripts[loop]
			host := askingHost(t)
			for _, point := range []string{"request", "tool call"} {
				for at := 1; ; at++ {
					w := newWorld(t)
					m := &reader{m: &model{script: script}}
					if out, err := runner(t, loop, w, m, tools{Host: host}, asks)(); err != nil || out.End != engine.Asked {
						t.Fatalf("the asking run: %+v %v", out, err)
					}
					k := &kill{at: at, t: t, w: w}
					m.m.kill = k
					ts := tools{Host: host}
					if point == "tool call" {
						m.m.kill, ts.kill = nil, k
					}
					out, err := runner(t, loop, w, m, ts, asks, replied("environment: staging\nreplicas: 2"))()
					if k.left == nil { // the run ended before the point: every point was walked
						if err != nil || out.End != engine.Done {
							t.Fatalf("%s %d: the answered run, never killed: %+v %v", point, at, out, err)
						}
						if at == 1 {
							t.Fatalf("no %s to kill at", point)
						}
						t.Logf("%s: killed at each of %d", point, at-1)
						break
					}
					answered := m.m.asked
					m2 := &reader{m: &model{script: script[answered:]}}
					out, err = runner(t, loop, k.left, m2, tools{Host: host}, asks, replied("environment: staging\nreplicas: 2"))()
					if err != nil || out.End != engine.Done {
						t.Fatalf("%s %d: resumed: %+v %v", point, at, out, err)
					}
					if res := lastToolResult(append(m.reqs, m2.reqs...)); !strings.Contains(res, `deployed web with {"environment":"staging","replicas":2}`) {
						t.Errorf("%s %d: the server did not get the answer: %q", point, at, res)
					}
					if _, ok := engine.Asking(k.left.cps[ref].Data); ok {
						t.Errorf("%s %d: the question is still in the checkpoint after the answer was used", point, at)
					}
				}
			}
		})
	}
}
