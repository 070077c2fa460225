// Package rabbitmq is the networked queue.Queue on RabbitMQ: a durable
// quorum queue, persistent messages published with confirms, manual acks,
// prefetch bounded to the consumer's workers, and a dead-letter queue named
// after the main one.
//
// The delivery count comes from the x-delivery-count header that quorum
// queues add when a message returns to the queue (released, or left unacked
// by a consumer whose channel or connection went away); a delivery with
// that count above MaxDeliveries is published to the dead-letter queue
// (confirmed), acked on the main one, and reported as dead.
//
// The connection is opened again when it drops (a broker restart, or the
// broker closing it): a Put in progress is published again on the new one,
// so it may be queued twice when the confirm was lost (the consumer finds
// the second job stale); the deliveries taken on the old connection were
// returned to the queue by the broker and come again, so acking them fails
// and the consumer finds their task no longer queued.
package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/coding-agent/coding-agent/internal/queue"
)

var _ queue.Queue = (*Queue)(nil)

// Options configure a Queue. Zero values mean defaults.
type Options struct {
	// URL is the broker, amqp://user:password@host:port/vhost.
	URL string
	// Name is the queue; the dead-letter queue is Name + ".dead".
	Name string
	// MaxDeliveries is how many times a job may be delivered before it is
	// moved to the dead-letter queue; 0 → 5.
	MaxDeliveries int
	// Prefetch is how many jobs the broker hands this consumer before it
	// acks one: the worker count; 0 → 1.
	Prefetch int
	// Retry is the wait between attempts to connect again; 0 → 1s.
	Retry time.Duration
	// ConnectionName names the connection in the broker's management
	// (client property connection_name); "" → "coding-agent".
	ConnectionName string
	Logger         *slog.Logger
}

// DeadName is the dead-letter queue of the queue named name.
func DeadName(name string) string { return name + ".dead" }

// Queue is a handle on one RabbitMQ queue, safe for concurrent use.
type Queue struct {
	o       Options
	closing chan struct{} // closed by Close

	connMu sync.Mutex // one connect at a time
	mu     sync.Mutex
	cur    *session
	closed bool
}

// New connects to the broker and declares the queue and its dead-letter
// queue; it fails when the broker cannot be reached.
func New(ctx context.Context, o Options) (*Queue, error) {
	if o.Name == "" {
		return nil, errors.New("rabbitmq queue: no queue name")
	}
	if o.MaxDeliveries <= 0 {
		o.MaxDeliveries = 5
	}
	if o.Prefetch <= 0 {
		o.Prefetch = 1
	}
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	if o.ConnectionName == "" {
		o.ConnectionName = "coding-agent"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	q := &Queue{o: o, closing: make(chan struct{})}
	s, err := q.dial()
	if err != nil {
		return nil, err
	}
	q.cur = s
	return q, nil
}

// session is one connection: a publishing channel in confirm mode and a
// consuming channel.
type session struct {
	conn *amqp.Connection
	pub  *amqp.Channel
	sub  *amqp.Channel
	gone chan struct{} // closed when the connection is closed

	pubMu    sync.Mutex // one publish awaiting its confirm at a time
	subMu    sync.Mutex
	consumer <-chan amqp.Delivery // nil until the first Take
	tag      string
}

func (s *session) isGone() bool {
	select {
	case <-s.gone:
		return true
	default:
		return false
	}
}

func (q *Queue) dial() (*session, error) {
	conn, err := amqp.DialConfig(q.o.URL, amqp.Config{
		Properties: amqp.Table{"connection_name": q.o.ConnectionName},
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to RabbitMQ: %w", err)
	}
	s := &session{conn: conn, gone: make(chan struct{}), tag: fmt.Sprintf("%s-%p", q.o.ConnectionName, conn)}
	notify := conn.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		for range notify { // drained until the connection is closed
		}
		close(s.gone)
	}()
	if err := q.setup(s); err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

func (q *Queue) setup(s *session) error {
	var err error
	if s.pub, err = s.conn.Channel(); err != nil {
		return fmt.Errorf("opening a RabbitMQ channel: %w", err)
	}
	if err := s.pub.Confirm(false); err != nil {
		return fmt.Errorf("putting the RabbitMQ channel in confirm mode: %w", err)
	}
	args := amqp.Table{"x-queue-type": "quorum"}
	for _, name := range []string{q.o.Name, DeadName(q.o.Name)} {
		if _, err := s.pub.QueueDeclare(name, true, false, false, false, args); err != nil {
			return fmt.Errorf("declaring RabbitMQ queue %q: %w", name, err)
		}
	}
	if s.sub, err = s.conn.Channel(); err != nil {
		return fmt.Errorf("opening a RabbitMQ channel: %w", err)
	}
	if err := s.sub.Qos(q.o.Prefetch, 0, false); err != nil {
		return fmt.Errorf("setting the RabbitMQ prefetch: %w", err)
	}
	return nil
}

// session returns the live session, connecting again (every Retry, until
// ctx ends) when the last one is gone.
func (q *Queue) session(ctx context.Context) (*session, error) {
	for {
		q.mu.Lock()
		s := q.cur
		q.mu.Unlock()
		if s != nil && !s.isGone() {
			return s, nil
		}
		s, err := q.reconnect(s)
		if err == nil {
			return s, nil
		}
		q.o.Logger.Warn("RabbitMQ connection lost; connecting again", "queue", q.o.Name, "error", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to RabbitMQ: %w", ctx.Err())
		case <-time.After(q.o.Retry):
		}
	}
}

// reconnect replaces the gone session old, unless another caller did.
func (q *Queue) reconnect(old *session) (*session, error) {
	q.connMu.Lock()
	defer q.connMu.Unlock()
	q.mu.Lock()
	s := q.cur
	q.mu.Unlock()
	if s != old && s != nil && !s.isGone() {
		return s, nil
	}
	s, err := q.dial()
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	q.cur = s
	q.mu.Unlock()
	q.o.Logger.Info("RabbitMQ connection open again", "queue", q.o.Name)
	return s, nil
}

// lost reports whether err came from s's connection or channel being
// closed, while ctx goes on: the caller tries again on a new session. A
// channel closed under a live connection (a channel error) closes the
// connection, so that the next session starts clean.
func (q *Queue) lost(ctx context.Context, s *session, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if s.isGone() {
		return true
	}
	var aerr *amqp.Error
	if !errors.Is(err, amqp.ErrClosed) && !errors.As(err, &aerr) {
		return false
	}
	select {
	case <-s.gone:
	case <-time.After(q.o.Retry):
		s.conn.Close()
		<-s.gone
	}
	return true
}

func (q *Queue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// Put publishes job, persistent, and returns once the broker confirmed it.
// It does not deduplicate: a ref may be queued twice.
func (q *Queue) Put(ctx context.Context, job queue.Job) error {
	if q.isClosed() {
		return fmt.Errorf("putting %s: %w", job.Ref, queue.ErrClosed)
	}
	body, err := json.Marshal(job)
	if err != nil {
		return fmt.Errorf("encoding job %s: %w", job.Ref, err)
	}
	for {
		s, err := q.session(ctx)
		if err != nil {
			return fmt.Errorf("putting %s: %w", job.Ref, err)
		}
		err = s.publish(ctx, q.o.Name, amqp.Publishing{Body: body})
		if err != nil && q.lost(ctx, s, err) {
			continue // published again on the next connection
		}
		if err != nil {
			return fmt.Errorf("putting %s: %w", job.Ref, err)
		}
		return nil
	}
}

// errNacked is a publish the broker refused.
var errNacked = errors.New("the broker did not confirm the message")

func (s *session) publish(ctx context.Context, key string, msg amqp.Publishing) error {
	msg.DeliveryMode = amqp.Persistent
	msg.ContentType = "application/json"
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	dc, err := s.pub.PublishWithDeferredConfirmWithContext(ctx, "", key, false, false, msg)
	if err != nil {
		return fmt.Errorf("publishing to %q: %w", key, err)
	}
	select {
	case <-dc.Done():
	case <-s.gone:
		return fmt.Errorf("publishing to %q: %w", key, amqp.ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("publishing to %q: %w", key, ctx.Err())
	}
	if !dc.Acked() {
		return fmt.Errorf("publishing to %q: %w", key, errNacked)
	}
	return nil
}

// Close stops Put and this handle's consumption; Take still returns the
// jobs this consumer holds and those ready in the queue, then
// queue.ErrClosed. Deliveries taken may still be settled: Disconnect ends
// the connection. Closing twice is harmless.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.closing)
	s := q.cur
	q.mu.Unlock()
	if s != nil && !s.isGone() {
		s.subMu.Lock()
		defer s.subMu.Unlock()
		if s.consumer != nil {
			// The deliveries received before the cancel still arrive on
			// s.consumer, which then closes.
			if err := s.sub.Cancel(s.tag, false); err != nil && !s.isGone() {
				return fmt.Errorf("cancelling the RabbitMQ consumer: %w", err)
			}
		}
	}
	return nil
}

// Disconnect closes the connection: the jobs taken and not settled return
// to the queue. It implies Close.
func (q *Queue) Disconnect() error {
	cerr := q.Close()
	q.mu.Lock()
	s := q.cur
	q.mu.Unlock()
	if s == nil || s.isGone() {
		return cerr
	}
	if err := s.conn.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
		return errors.Join(cerr, fmt.Errorf("closing the RabbitMQ connection: %w", err))
	}
	return cerr
}
