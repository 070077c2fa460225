package config_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/config"
)

func TestQueueDefaultsToMemory(t *testing.T) {
	c, warnings := mustParse(t, head+gh, nil)
	if len(warnings) != 0 {
		t.Errorf("warnings %v", warnings)
	}
	want := config.Queue{Type: config.QueueMemory, RabbitMQ: config.RabbitMQ{
		URL: "amqp://guest:guest@127.0.0.1:5672/", Name: "coding-agent", MaxDeliveries: 5}}
	if diff := cmp.Diff(want, c.Queue); diff != "" {
		t.Errorf("queue (-want +got):\n%s", diff)
	}
	if slices.Contains(c.Secrets(), "guest") {
		t.Error("the unused RabbitMQ URL's password is among the secrets")
	}
}

func TestQueueRabbitMQ(t *testing.T) {
	c, _ := mustParse(t, head+gh+`queue:
  type: rabbitmq
  rabbitmq:
    url: amqp://agent:${MQ_PASSWORD}@mq.internal:5672/ci
    name: agents
    max_deliveries: 3
`, map[string]string{"MQ_PASSWORD": "s3cret-mq"})
	want := config.Queue{Type: config.QueueRabbitMQ, RabbitMQ: config.RabbitMQ{
		URL: "amqp://agent:s3cret-mq@mq.internal:5672/ci", Name: "agents", MaxDeliveries: 3}}
	if diff := cmp.Diff(want, c.Queue); diff != "" {
		t.Errorf("queue (-want +got):\n%s", diff)
	}
	if !slices.Contains(c.Secrets(), "s3cret-mq") {
		t.Errorf("secrets %q lack the RabbitMQ password", c.Secrets())
	}
}

func TestQueueProblems(t *testing.T) {
	got := problems(t, head+gh+`queue:
  type: rabbitmq
  rabbitmq:
    url: http://mq:5672/
    name: amq.jobs
    max_deliveries: 0
`, nil)
	want := config.Problems{
		{Path: "queue.rabbitmq.max_deliveries", Msg: "must be from 1 to 1000", Line: 11},
		{Path: "queue.rabbitmq.name", Msg: "must be 1-200 letters, digits and _.:- , not starting with amq.", Line: 10},
		{Path: "queue.rabbitmq.url", Msg: "must be an amqp:// or amqps:// URL with a host", Line: 9},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	got = problems(t, head+gh+"queue: {type: kafka}\n", nil)
	if len(got) != 1 || got[0].Path != "queue.type" {
		t.Errorf("problems %v, want one at queue.type", got)
	}
}
