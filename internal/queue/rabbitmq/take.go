package rabbitmq

import (
	"context"
	"encoding/json"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/coding-agent/coding-agent/internal/queue"
)

// Take returns the next job, blocking until one arrives; it consumes with
// the prefetch of Options. After Close it returns what this consumer holds
// and what is ready in the queue, then queue.ErrClosed.
func (q *Queue) Take(ctx context.Context) (queue.Delivery, error) {
	for {
		s, err := q.session(ctx)
		if err != nil {
			return queue.Delivery{}, fmt.Errorf("taking job: %w", err)
		}
		var (
			m  amqp.Delivery
			ok bool
		)
		if q.isClosed() {
			m, ok, err = q.drain(ctx, s)
			if err == nil && !ok {
				return queue.Delivery{}, fmt.Errorf("taking job: %w", queue.ErrClosed)
			}
		} else {
			m, ok, err = q.next(ctx, s)
		}
		if err != nil && q.lost(ctx, s, err) {
			continue // taken again on the next connection
		}
		if err != nil {
			return queue.Delivery{}, fmt.Errorf("taking job: %w", err)
		}
		if !ok {
			continue
		}
		d, ok, err := q.delivery(ctx, s, m)
		if err != nil && !q.lost(ctx, s, err) {
			return queue.Delivery{}, fmt.Errorf("taking job: %w", err)
		}
		if ok {
			return d, nil
		}
	}
}

// next waits for a delivery on s's consumer, starting it on first use. It
// reports false when the consumer ended (connection gone, or Close).
func (q *Queue) next(ctx context.Context, s *session) (amqp.Delivery, bool, error) {
	s.subMu.Lock()
	if s.consumer == nil && !q.isClosed() {
		// Not ConsumeWithContext: the consumer outlives this Take.
		c, err := s.sub.Consume(q.o.Name, s.tag, false, false, false, false, nil)
		if err != nil {
			s.subMu.Unlock()
			return amqp.Delivery{}, false, fmt.Errorf("consuming RabbitMQ queue %q: %w", q.o.Name, err)
		}
		s.consumer = c
	}
	c := s.consumer
	s.subMu.Unlock()
	if c == nil {
		return amqp.Delivery{}, false, nil
	}
	select {
	case m, ok := <-c:
		if !ok {
			// Cancelled (by Close, or by the broker) or the channel
			// closed: the next call starts a new consumer, on a new
			// session when this one is gone.
			s.subMu.Lock()
			if s.consumer == c {
				s.consumer = nil
			}
			s.subMu.Unlock()
			if !q.isClosed() && !s.isGone() {
				return amqp.Delivery{}, false, fmt.Errorf("consuming RabbitMQ queue %q: %w", q.o.Name, amqp.ErrClosed)
			}
		}
		return m, ok, nil
	case <-ctx.Done():
		return amqp.Delivery{}, false, ctx.Err()
	case <-q.closing:
		return amqp.Delivery{}, false, nil
	}
}

// drain returns, after Close, a delivery this consumer still holds, else
// one ready in the queue; false when there is none.
func (q *Queue) drain(ctx context.Context, s *session) (amqp.Delivery, bool, error) {
	s.subMu.Lock()
	c := s.consumer
	s.subMu.Unlock()
	if c != nil {
		// Close cancelled the consumer: c closes after what it holds.
		select {
		case m, ok := <-c:
			if ok {
				return m, true, nil
			}
		case <-s.gone:
			return amqp.Delivery{}, false, amqp.ErrClosed
		case <-ctx.Done():
			return amqp.Delivery{}, false, ctx.Err()
		}
	}
	m, ok, err := s.sub.Get(q.o.Name, false)
	if err != nil {
		return amqp.Delivery{}, false, fmt.Errorf("getting from RabbitMQ queue %q: %w", q.o.Name, err)
	}
	return m, ok, nil
}

// delivery turns m into a queue.Delivery. A message delivered more than
// MaxDeliveries times, or not a job at all, is published to the dead-letter
// queue and acked; the first is reported dead, the second only logged
// (false: take the next).
func (q *Queue) delivery(ctx context.Context, s *session, m amqp.Delivery) (queue.Delivery, bool, error) {
	count := 1 + deliveryCount(m.Headers)
	var job queue.Job
	jerr := json.Unmarshal(m.Body, &job)
	if count <= q.o.MaxDeliveries && jerr == nil {
		return queue.NewDelivery(job, count, "", settler{m: m}), true, nil
	}
	dead := DeadName(q.o.Name)
	headers := amqp.Table{"x-coding-agent-deliveries": int64(count)}
	if err := s.publish(ctx, dead, amqp.Publishing{Body: m.Body, Headers: headers}); err != nil {
		return queue.Delivery{}, false, fmt.Errorf("moving a job to the dead-letter queue: %w", err)
	}
	if err := m.Ack(false); err != nil {
		return queue.Delivery{}, false, fmt.Errorf("acking a dead-lettered job: %w", err)
	}
	if jerr != nil {
		q.o.Logger.Error("a message that is not a job was moved to the dead-letter queue", "queue", q.o.Name,
			"dead_letter_queue", dead, "error", jerr)
		return queue.Delivery{}, false, nil
	}
	q.o.Logger.Warn("job delivered too many times; moved to the dead-letter queue", "task", job.Ref.String(),
		"deliveries", count, "dead_letter_queue", dead)
	return queue.NewDelivery(job, count, dead, nil), true, nil
}

// deliveryCount is the x-delivery-count header a quorum queue sets on a
// message that returned to it: the deliveries before this one.
func deliveryCount(h amqp.Table) int {
	switch n := h["x-delivery-count"].(type) {
	case int64:
		return int(n)
	case int32:
		return int(n)
	case int:
		return n
	case int16:
		return int(n)
	case int8:
		return int(n)
	case uint8:
		return int(n)
	}
	return 0
}

// settler acks or returns one message.
type settler struct{ m amqp.Delivery }

func (s settler) Ack() error {
	if err := s.m.Ack(false); err != nil {
		return fmt.Errorf("acking a RabbitMQ delivery: %w", err)
	}
	return nil
}

func (s settler) Release() error {
	if err := s.m.Nack(false, true); err != nil {
		return fmt.Errorf("returning a RabbitMQ delivery: %w", err)
	}
	return nil
}
