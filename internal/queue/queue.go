// Package queue is the job port between the producer (discover and claim)
// and the consumer (run the agent). The in-process default is queue/memqueue.
package queue

import (
	"context"
	"errors"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
)

// ErrClosed is returned by Put and Take after Close.
var ErrClosed = errors.New("queue closed")

// Job asks a consumer to work on a claimed task.
type Job struct {
	Ref      task.Ref  `json:"ref"`
	Enqueued time.Time `json:"enqueued"`
}

// Queue carries jobs. Take blocks until a job is there, ctx ends, or the
// queue is closed and drained.
type Queue interface {
	Put(ctx context.Context, job Job) error
	Take(ctx context.Context) (Job, error)
	Close() error
}
