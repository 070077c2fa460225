package app

import (
	"context"
	"fmt"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/queue"
	"github.com/coding-agent/coding-agent/internal/queue/memqueue"
	"github.com/coding-agent/coding-agent/internal/queue/rabbitmq"
)

// jobs is the configured queue of one command.
type jobs struct {
	queue.Queue
	// backlog: the store is the durable hand-over (the in-process queue),
	// so the tasks it holds as queued are queued again (worker.Backlog).
	// A broker keeps its jobs, and delivers again those a consumer did not
	// ack, so with it nothing is queued twice.
	backlog bool
	// disconnect ends the queue's connection once the consumer is done.
	disconnect func() error
}

// newQueue opens the queue queue.type names.
func (a *App) newQueue(ctx context.Context) (*jobs, error) {
	if a.cfg.Queue.Type != config.QueueRabbitMQ {
		return &jobs{Queue: memqueue.New(memqueue.Options{}), backlog: true, disconnect: func() error { return nil }}, nil
	}
	r := a.cfg.Queue.RabbitMQ
	q, err := rabbitmq.New(ctx, rabbitmq.Options{URL: r.URL, Name: r.Name, MaxDeliveries: r.MaxDeliveries,
		Prefetch: a.cfg.Continuous.Consumer.Workers, Logger: a.Log})
	if err != nil {
		return nil, fmt.Errorf("opening queue %q: %s", r.Name, a.redact(err.Error()))
	}
	return &jobs{Queue: q, disconnect: q.Disconnect}, nil
}

// close ends the queue's connection, logging a failure.
func (j *jobs) close(a *App) {
	if err := j.disconnect(); err != nil {
		a.Log.Warn("closing the queue", "error", a.redact(err.Error()))
	}
}
