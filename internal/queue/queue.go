// Package queue is the job port between the producer (discover and claim)
// and the consumer (run the agent). The in-process default is queue/memqueue;
// queue/rabbitmq is the networked one.
package queue

import (
	"context"
	"errors"
	"sync"
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
// queue is closed and drained. Every delivery Take returns is settled once:
// acked when its task has left the consumer's hands, or released to be
// delivered again; a delivery neither acked nor released when its consumer
// goes away is delivered again. Deliveries taken before Close may still be
// settled after it.
type Queue interface {
	Put(ctx context.Context, job Job) error
	Take(ctx context.Context) (Delivery, error)
	Close() error
}

// Settler acks or releases one delivery; a backend implements it.
type Settler interface {
	Ack() error
	Release() error
}

// Delivery is a job handed to one consumer.
type Delivery struct {
	Job Job
	// Count is how many times the job has been delivered, this one
	// included: 1 the first time.
	Count int
	// Dead, when not empty, names the dead-letter queue the job was moved
	// to because Count is over the queue's max deliveries: the job must not
	// be run, and is settled already.
	Dead string

	settler Settler
	once    *sync.Once
}

// NewDelivery is a delivery of job settled through s (nil: settling is a
// no-op).
func NewDelivery(job Job, count int, dead string, s Settler) Delivery {
	return Delivery{Job: job, Count: count, Dead: dead, settler: s, once: new(sync.Once)}
}

// Ack says the job is finished with: it is never delivered again. Only the
// first Ack or Release of a delivery counts.
func (d Delivery) Ack() error { return d.settle(func(s Settler) error { return s.Ack() }) }

// Release gives the job back, to be delivered again (Count one higher).
func (d Delivery) Release() error { return d.settle(func(s Settler) error { return s.Release() }) }

func (d Delivery) settle(fn func(Settler) error) error {
	if d.settler == nil || d.once == nil {
		return nil
	}
	var err error
	d.once.Do(func() { err = fn(d.settler) })
	return err
}
