package app_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/task"
)

// rabbitURL is the broker of CODING_AGENT_TEST_RABBITMQ, which must then
// answer (as in CI); unset, the local default, or the test skips.
func rabbitURL(t *testing.T) string {
	t.Helper()
	const env, def = "CODING_AGENT_TEST_RABBITMQ", "amqp://guest:guest@127.0.0.1:5672/"
	url, set := os.LookupEnv(env)
	if !set || url == "" {
		url = def
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		if set {
			t.Fatalf("%s=%s: RabbitMQ does not answer: %v", env, url, err)
		}
		t.Skipf("RabbitMQ not reachable at %s (%v): start it (rabbitmq-server -detached) or set %s to run this test", def, err, env)
	}
	conn.Close()
	return url
}

// produce and consume as two processes with queue.type rabbitmq: the job
// goes through the broker (the consumer does not read the store's backlog
// with it), and the queue is empty afterwards.
func TestProduceThenConsumeOverRabbitMQ(t *testing.T) {
	url := rabbitURL(t)
	b := make([]byte, 6)
	rand.Read(b)
	name := "coding-agent-test-app-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		conn, err := amqp.Dial(url)
		if err != nil {
			t.Errorf("deleting test queues: %v", err)
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			t.Errorf("deleting test queues: %v", err)
			return
		}
		for _, n := range []string{name, name + ".dead"} {
			if left, err := ch.QueueDelete(n, false, false, false); err != nil || left != 0 {
				t.Errorf("deleting queue %s: %d messages left, %v", n, left, err)
			}
		}
	})
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	e.cfg.Queue = config.Queue{Type: config.QueueRabbitMQ, RabbitMQ: config.RabbitMQ{URL: url, Name: name, MaxDeliveries: 5}}
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
