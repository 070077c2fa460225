// Package rmqtest finds the RabbitMQ broker the tests run against and keeps
// the tests of every package that use it from running while one of them
// restarts it.
//
// The broker is CODING_AGENT_TEST_RABBITMQ (an amqp:// URL), or the
// development and CI machines' local one. Without a broker that answers the
// tests skip, saying how to run them; in CI (CI set, as .ci/run does) or
// with the variable set they fail instead.
package rmqtest

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// URLEnv names the broker the tests use.
const URLEnv = "CODING_AGENT_TEST_RABBITMQ"

// defaultURL is the local broker of the development and CI machines.
const defaultURL = "amqp://guest:guest@127.0.0.1:5672/"

// URL returns the test broker's URL for a test that only uses it: until the
// test ends it holds a shared lock, so that no test restarts the broker
// under it (see Exclusive).
func URL(t testing.TB) string {
	t.Helper()
	return find(t, syscall.LOCK_SH)
}

// Exclusive is URL for a test that stops and starts the broker: it waits
// until no other test (of any package, in any process of the machine) uses
// the broker, and holds it alone until the test ends.
func Exclusive(t testing.TB) string {
	t.Helper()
	return find(t, syscall.LOCK_EX)
}

func find(t testing.TB, how int) string {
	t.Helper()
	url, set := os.LookupEnv(URLEnv)
	if !set || url == "" {
		url = defaultURL
	}
	required := set || os.Getenv("CI") != ""
	lock(t, how)
	conn, err := amqp.Dial(url)
	if err != nil {
		if required {
			t.Fatalf("%s=%s (CI=%q): RabbitMQ does not answer: %v", URLEnv, url, os.Getenv("CI"), err)
		}
		t.Skipf("RabbitMQ not reachable at %s (%v): start it (rabbitmq-server -detached) or set %s=amqp://user:pass@host:5672/ to run this test",
			defaultURL, err, URLEnv)
	}
	conn.Close()
	return url
}

// lock takes the broker's test lock (a file in the temporary directory)
// until the test ends.
func lock(t testing.TB, how int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "coding-agent-test-rabbitmq.lock"), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatalf("opening the RabbitMQ test lock: %v", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		t.Fatalf("locking the RabbitMQ test lock: %v", err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}
