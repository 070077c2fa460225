package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/queue"
	"github.com/coding-agent/coding-agent/internal/queue/rabbitmq"
	"github.com/coding-agent/coding-agent/internal/queue/rabbitmq/rmqtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// rabbitURL is the test broker (rmqtest: CODING_AGENT_TEST_RABBITMQ or the
// local one; the test skips without it, or fails in CI).
func rabbitURL(t testing.TB) string {
	t.Helper()
	return rmqtest.URL(t)
}

// useRabbitMQ points e at a fresh queue on the test broker, deleted when
// the test ends, which finds it empty.
func useRabbitMQ(t *testing.T, e *env) {
	t.Helper()
	url := rabbitURL(t)
	name := testQueue(t, url)
	e.cfg.Queue = config.Queue{Type: config.QueueRabbitMQ, RabbitMQ: config.RabbitMQ{URL: url, Name: name, MaxDeliveries: 5}}
}

// produce and consume as two processes with queue.type rabbitmq: the job
// goes through the broker (the consumer does not read the store's backlog
// with it), and the queue is empty afterwards.
func TestProduceThenConsumeOverRabbitMQ(t *testing.T) {
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	useRabbitMQ(t, e)
	if err := e.app(t).Produce(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if rec := e.record(); rec.Status != task.Queued {
		t.Fatalf("after produce: %+v", rec)
	}
	if err := e.app(t).Consume(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	checkDone(t, e, config.ProviderOpenAI, false)
}

// SIGTERM while the model is answering, with queue.type rabbitmq: the run
// stops at its checkpoint and its job is not acked; the broker delivers it
// again (the store's backlog is not read), and the next run resumes the
// task from the checkpoint without asking the model again.
func TestServeShutdownOverRabbitMQRedeliversAndResumes(t *testing.T) {
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	useRabbitMQ(t, e)
	serveStoppedMidAnswer(t, e)
	if rec := e.record(); rec.Status != task.Queued || rec.Counters.LLMCalls != 1 {
		t.Fatalf("after shutdown: %+v", rec)
	}
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	if reqs := e.model.Requests(); len(reqs) != 2 {
		t.Fatalf("%d model requests in all, want 2 (the resumed run asks once more)", len(reqs))
	}
	if rec := e.record(); rec.Status != task.Done || rec.Counters.LLMCalls != 2 {
		t.Fatalf("final record %+v", rec)
	}
}

// A task whose run kills its consumer, with queue.type rabbitmq and
// max_deliveries 2: `run` is killed (SIGKILL) while the model answers, twice.
// Each restart takes the dead process's task over (and the broker delivers
// its job again); the start that would begin a third run gives the task up
// instead: failed, one comment saying it was given up after 2 attempts, no
// takeover comment, nothing left in processing, the model asked twice. Before,
// every takeover queued a new job whose delivery count started at 1, so the
// task ran again after every restart and never failed.
func TestPoisonTaskIsGivenUpOverRabbitMQ(t *testing.T) {
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	useRabbitMQ(t, e)
	e.cfg.Queue.RabbitMQ.MaxDeliveries = 2
	first, second := make(chan struct{}), make(chan struct{})
	e.model.Script(llmtest.Slow{Arrived: first}, llmtest.Slow{Arrived: second}, done("Created hello.txt with a greeting."))
	runKilled(t, e, first)
	runKilled(t, e, second)
	if rec := e.record(); rec.Status != task.Running || rec.Attempts != 2 {
		t.Fatalf("after two runs killed: %+v", rec)
	}
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("the third start: %v", err)
	}
	if n := len(e.model.Requests()); n != 2 {
		t.Errorf("%d model requests, want 2: the third start must not run the task", n)
	}
	e.wantLabels(t, "bug", "coding agent failed")
	if rec := e.record(); rec.Status != task.Failed || !strings.Contains(rec.Error, "Given up after 2 attempts") {
		t.Errorf("record %+v", rec)
	}
	c := e.botComments()
	given, took := 0, 0
	for _, b := range c {
		given += strings.Count(b, "Given up after 2 attempts")
		took += strings.Count(b, "took over this task")
	}
	if given != 1 || took != 0 {
		t.Errorf("bot comments %q: want one saying the task was given up after 2 attempts, none saying it was taken over", c)
	}
	// The dead consumers' job may have passed the broker's own count too
	// (the connection closing returns it counted): then it is in the
	// dead-letter queue, where it stays for the operator, and only it.
	for _, j := range takeAll(t, e.cfg.Queue.RabbitMQ.URL, rabbitmq.DeadName(e.cfg.Queue.RabbitMQ.Name)) {
		if j.Ref != e.ref {
			t.Errorf("dead-letter queue holds %+v", j)
		}
	}
}

// takeAll takes (and acks) every message waiting in the named queue.
func takeAll(t *testing.T, url, name string) []queue.Job {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	var jobs []queue.Job
	for {
		m, ok, err := ch.Get(name, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return jobs
		}
		var j queue.Job
		if err := json.Unmarshal(m.Body, &j); err != nil {
			t.Fatalf("a message in %s is not a job: %v", name, err)
		}
		jobs = append(jobs, j)
	}
}
