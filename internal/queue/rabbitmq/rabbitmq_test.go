package rabbitmq

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/coding-agent/coding-agent/internal/queue"
	"github.com/coding-agent/coding-agent/internal/queue/queuetest"
	"github.com/coding-agent/coding-agent/internal/queue/rabbitmq/rmqtest"
)

// brokerURL is the test broker (rmqtest: CODING_AGENT_TEST_RABBITMQ or the
// local one; the tests skip without it, or fail in CI).
func brokerURL(t *testing.T) string {
	t.Helper()
	return rmqtest.URL(t)
}

// queueName is a fresh queue name; the queue and its dead-letter queue are
// deleted when the test ends.
func queueName(t *testing.T, url string) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	name := "coding-agent-test-" + hex.EncodeToString(b)
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
		for _, n := range []string{name, DeadName(name)} {
			if _, err := ch.QueueDelete(n, false, false, false); err != nil {
				t.Errorf("deleting queue %s: %v", n, err)
			}
		}
	})
	return name
}

func open(t *testing.T, url, name string, o Options) *Queue {
	t.Helper()
	o.URL, o.Name = url, name
	if o.MaxDeliveries == 0 {
		o.MaxDeliveries = queuetest.MaxDeliveries
	}
	if o.Retry == 0 {
		o.Retry = 50 * time.Millisecond
	}
	q, err := New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := q.Disconnect(); err != nil {
			t.Errorf("Disconnect: %v", err)
		}
	})
	return q
}

func TestConformance(t *testing.T) {
	url := brokerURL(t)
	queuetest.RunWith(t, func(t *testing.T) queue.Queue {
		return open(t, url, queueName(t, url), Options{Prefetch: 4})
	}, queuetest.Options{
		NoBubble: true, // Take waits on the network
		NoDedup:  true, // a broker does not look into the queue for a waiting ref
		Consumer: func(t *testing.T, q queue.Queue) (queue.Queue, func()) {
			c := open(t, url, q.(*Queue).o.Name, Options{})
			return c, func() {
				if err := c.Disconnect(); err != nil {
					t.Errorf("consumer going away: %v", err)
				}
			}
		},
	})
}

// The job sent to the dead-letter queue stays there for the operator.
func TestDeadLetterQueueKeepsTheJob(t *testing.T) {
	url := brokerURL(t)
	q := open(t, url, queueName(t, url), Options{MaxDeliveries: 1})
	job := queuetest.Job(1)
	if err := q.Put(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	d, err := q.Take(t.Context())
	if err != nil || d.Dead != "" {
		t.Fatalf("Take = %+v, %v", d, err)
	}
	if err := d.Release(); err != nil {
		t.Fatal(err)
	}
	if d, err = q.Take(t.Context()); err != nil || d.Dead != DeadName(q.o.Name) || d.Count != 2 {
		t.Fatalf("Take = %+v, %v; want dead in %s, count 2", d, err, DeadName(q.o.Name))
	}
	dead := open(t, url, DeadName(q.o.Name), Options{})
	dead.Close() // drain: what is ready, then ErrClosed
	got, err := dead.Take(t.Context())
	if err != nil || got.Job.Ref != job.Ref {
		t.Fatalf("dead-letter queue held %+v, %v; want the job", got, err)
	}
	if _, err := dead.Take(t.Context()); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("dead-letter queue: second Take err = %v, want ErrClosed (one job)", err)
	}
}

// closeFromBroker has the broker close the connection whose local end is
// local, as a broker restart would.
func closeFromBroker(t *testing.T, local net.Addr) {
	t.Helper()
	out, err := exec.Command("rabbitmqctl", "-q", "list_connections", "pid", "peer_port").Output()
	if err != nil {
		t.Skipf("rabbitmqctl cannot list connections here (%v); run as a user that may manage the broker", err)
	}
	port := local.(*net.TCPAddr).Port
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[1] == strconv.Itoa(port) {
			if out, err := exec.Command("rabbitmqctl", "close_connection", f[0], "test: broker side close").CombinedOutput(); err != nil {
				t.Fatalf("rabbitmqctl close_connection: %v: %s", err, out)
			}
			return
		}
	}
	t.Fatalf("no broker connection from port %d in:\n%s", port, out)
}

// After the broker closes the connection, the queue connects again: the
// job taken and not acked comes again, the one waiting is still there, a
// new Put is confirmed, and nothing comes twice.
func TestReconnectsAfterTheBrokerClosesTheConnection(t *testing.T) {
	url := brokerURL(t)
	q := open(t, url, queueName(t, url), Options{Prefetch: 1})
	for i := 1; i <= 2; i++ {
		if err := q.Put(t.Context(), queuetest.Job(i)); err != nil {
			t.Fatal(err)
		}
	}
	held, err := q.Take(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	s := q.cur
	q.mu.Unlock()
	closeFromBroker(t, s.conn.LocalAddr())
	<-s.gone
	if err := q.Put(t.Context(), queuetest.Job(3)); err != nil {
		t.Fatalf("Put after the connection dropped: %v", err)
	}
	if err := held.Ack(); err == nil {
		t.Error("acking a delivery of the closed connection worked; want an error (the broker returned it)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	seen := map[int]int{}
	for range 3 {
		d, err := q.Take(ctx)
		if err != nil {
			t.Fatalf("Take after reconnecting: %v (seen %v)", err, seen)
		}
		seen[d.Job.Ref.Number] = d.Count
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if seen[held.Job.Ref.Number] != 2 || len(seen) != 3 {
		t.Errorf("deliveries after reconnecting (job → count) %v, want jobs 1, 2, 3 once each, job %d on its second delivery",
			seen, held.Job.Ref.Number)
	}
	q.Close()
	if d, err := q.Take(t.Context()); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("after the three jobs: Take = %+v, %v; want ErrClosed (nothing twice)", d, err)
	}
}

// The consumer a Take starts outlives that Take's context: a later Take
// still receives jobs.
func TestConsumerOutlivesTheFirstTakesContext(t *testing.T) {
	url := brokerURL(t)
	q := open(t, url, queueName(t, url), Options{})
	ctx, cancel := context.WithCancel(t.Context())
	if err := q.Put(t.Context(), queuetest.Job(1)); err != nil {
		t.Fatal(err)
	}
	d, err := q.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := q.Put(t.Context(), queuetest.Job(2)); err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(t.Context(), time.Minute)
	defer stop()
	if d, err := q.Take(wait); err != nil || d.Job.Ref != queuetest.Job(2).Ref {
		t.Fatalf("Take after the first Take's context ended = %+v, %v; want job 2", d, err)
	}
}
