package app

import (
	"context"
	"fmt"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/queue"
	"github.com/coding-agent/coding-agent/internal/queue/memqueue"
	"github.com/coding-agent/coding-agent/internal/queue/rabbitmq"
	"github.com/coding-agent/coding-agent/internal/task"
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
	// depth is how many jobs wait in the queue; nil: the broker's, not
	// known here.
	depth func() int
}

// newQueue opens the queue queue.type names.
func (a *App) newQueue(ctx context.Context) (*jobs, error) {
	if a.cfg.Queue.Type != config.QueueRabbitMQ {
		mq := memqueue.New(memqueue.Options{})
		return &jobs{Queue: mq, backlog: true, disconnect: func() error { return nil }, depth: mq.Len}, nil
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

// queueDepth has /metrics report the jobs waiting in q: the in-process
// queue's; with a broker, the tasks the store holds as queued (claimed,
// not started), which a broker's queue holds too.
func (a *App) queueDepth(q *jobs) {
	if q.depth != nil {
		a.metrics.SetQueueDepth(q.depth)
		return
	}
	a.metrics.SetQueueDepth(func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		recs, err := a.store.List(ctx)
		if err != nil {
			return 0
		}
		n := 0
		for _, r := range recs {
			if r.Status == task.Queued {
				n++
			}
		}
		return n
	})
}
