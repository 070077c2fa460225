package app_test

import (
	"context"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
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
