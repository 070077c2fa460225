package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/coding-agent/coding-agent/internal/app"
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
	t.Parallel() // runs beside the others (see README, Tests)
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
	t.Parallel() // runs beside the others (see README, Tests)
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
// max_deliveries 2, on hosts that come back under new names (containers
// replaced): `run` is killed (SIGKILL) while the model answers. The next
// start, within the dead holder's lease, finds its job delivered again and
// claimed, and acks it; once the lease is over (here an operator's release,
// which ends it at once) the next start takes the task over and queues a new
// job, whose delivery count starts again at 1, so the broker's count never
// passes the limit. The store counts the runs begun: the start that would
// begin a third run gives the task up instead, failed, with one comment
// saying it was given up after 2 attempts and no second takeover comment;
// nothing is left in processing, and the model was asked twice. Before, it
// ran again after every takeover and never failed.
func TestPoisonTaskIsGivenUpOverRabbitMQ(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	useRabbitMQ(t, e)
	e.cfg.Queue.RabbitMQ.MaxDeliveries = 2
	e.cfg.LeaseSeconds = 3600
	first, second := make(chan struct{}), make(chan struct{})
	e.model.Script(llmtest.Slow{Arrived: first}, llmtest.Slow{Arrived: second}, done("Created hello.txt with a greeting."))
	on := func(host string) { e.cfg.HostName = host }
	restartWithinTheLease := func(host string) {
		t.Helper()
		on(host)
		if err := e.run(context.Background()); err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if rec := e.record(); rec.Status != task.Running || rec.Host == host {
			t.Fatalf("%s took the task within the dead holder's lease: %+v", host, rec)
		}
	}
	on("host-1")
	runKilled(t, e, first)
	restartWithinTheLease("host-2")
	e.release(t)
	on("host-3")
	runKilled(t, e, second)
	restartWithinTheLease("host-4")
	if rec := e.record(); rec.Attempts != 2 {
		t.Fatalf("after two runs killed: %+v", rec)
	}
	e.release(t)
	on("host-5")
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("host-5: %v", err)
	}
	if n := len(e.model.Requests()); n != 2 {
		t.Errorf("%d model requests, want 2: the third run must not begin", n)
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
	if given != 1 || took != 1 {
		t.Errorf("bot comments %q: want one saying the task was given up after 2 attempts, and one takeover (host-3's)", c)
	}
	for _, j := range takeAll(t, e.cfg.Queue.RabbitMQ.URL, rabbitmq.DeadName(e.cfg.Queue.RabbitMQ.Name)) {
		t.Errorf("dead-letter queue holds %+v: the broker's count of one job passed the limit", j)
	}
}

// release is `coding-agent release REF` on the env's config.
func (e *env) release(t *testing.T) string {
	t.Helper()
	a, err := app.New(t.Context(), e.cfg, app.Options{Sleep: noWait})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var out strings.Builder
	if err := a.Release(t.Context(), e.ref, &out); err != nil {
		t.Fatalf("release: %v", err)
	}
	return out.String()
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
