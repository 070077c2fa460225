package app_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/store/postgres/pgtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// A fleet is several coding-agent processes (hosts, each a real binary with
// a host_name of its own) working on the tasks of one forge emulator with
// one scripted model, sharing a store (PostgreSQL, or one state directory)
// and a queue (RabbitMQ, or each its in-process one), and one log file.
type fleet struct {
	t     testing.TB
	env   *env // the forge emulator, the model server and the base config
	bin   string
	pg    string // database.url; "" → the SQLite store in the shared state_dir
	queue string // the RabbitMQ queue's name; "" → queue.type memory
	amqp  string // the broker's URL

	mu       sync.Mutex
	requests map[int]int // model requests per issue number
	added    []int       // the fleet's issue numbers, in order
	answer   func(n int) // runs before each answer (a hook: hold it, note the store); nil: answer at once
}

// fleetSetup says what the hosts share.
type fleetSetup struct {
	postgres bool // share a PostgreSQL store; false: one state directory
	rabbitmq bool // share a RabbitMQ queue; false: the in-process queue
}

// fleetTitle names the fleet's tasks; the model server finds the task of a
// request by it.
var fleetTitle = regexp.MustCompile(`fleet task (\d+)\b`)

// newFleet starts the emulator and the model server and builds the
// binary. Its tasks are added with addTasks; each one asks the model once
// and is done.
func newFleet(t testing.TB, s fleetSetup) *fleet {
	t.Helper()
	f := &fleet{t: t, requests: map[int]int{}}
	if s.postgres {
		f.pg = pgtest.Schema(t)
	}
	if s.rabbitmq {
		f.amqp = rabbitURL(t)
		f.queue = testQueue(t, f.amqp)
	}
	f.env = newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			n := f.taskOf(r)
			f.mu.Lock()
			f.requests[n]++
			hook := f.answer
			f.mu.Unlock()
			if hook != nil {
				hook(n)
			}
			return done(fmt.Sprintf("Finished fleet task %d.", n))
		}})
	// Hundreds of tasks take more than GitHub's 5,000 requests an hour of
	// one token; the fleet's emulator does not count them.
	f.env.gh.SetRateLimit("core", 1<<30)
	// The env's own task is not the fleet's: its label goes.
	f.env.gh.RemoveLabelDirect(f.env.ref.Repo, f.env.ref.Number, "coding agent")
	f.bin = buildBinary(t)
	return f
}

// taskOf is the issue number a model request is about.
func (f *fleet) taskOf(r llmtest.Received) int {
	for _, m := range r.Messages {
		if sub := fleetTitle.FindStringSubmatch(m.Content); sub != nil {
			n, _ := strconv.Atoi(sub[1])
			return n
		}
	}
	f.t.Errorf("model request %d names no fleet task", r.N)
	return 0
}

// addTasks adds n issues; with label they carry the bot label (added by the
// repository's owner). It returns their numbers.
func (f *fleet) addTasks(n int, label bool) []int {
	var nums []int
	for range n {
		// Issue numbers go up by one; the title names the number.
		next := f.env.ref.Number + 1
		if len(f.added) > 0 {
			next = f.added[len(f.added)-1] + 1
		}
		num := f.env.gh.AddIssue("acme/app", forgetest.IssueSeed{Title: fmt.Sprintf("fleet task %d", next),
			Body: "Do the fleet task.", Author: "alice", Labels: []string{"bug"}})
		if num != next {
			f.t.Fatalf("the emulator numbered the new issue %d, want %d", num, next)
		}
		f.added = append(f.added, num)
		if label {
			f.env.gh.AddLabelDirect("acme/app", num, "coding agent")
		}
		nums = append(nums, num)
	}
	return nums
}

// setAnswer sets the hook each model answer waits for (nil: none).
func (f *fleet) setAnswer(hook func(n int)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = hook
}

// requestsFor is how many model requests task n had.
func (f *fleet) requestsFor(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[n]
}

// hostOptions are one host's settings.
type hostOptions struct {
	workers  int
	interval time.Duration // continuous.producer.interval_minutes
}

// config writes the YAML of host name: the env's config (the shared state
// directory and log file) with the host's name, workers and poll interval,
// and the fleet's store and queue.
func (f *fleet) config(name string, o hostOptions) string {
	f.t.Helper()
	path := writeConfig(f.t, f.env.cfg)
	extra := fmt.Sprintf("host_name: %s\ncontinuous:\n  producer:\n    interval_minutes: %g\n  consumer:\n    workers: %d\n",
		name, o.interval.Minutes(), o.workers)
	if f.pg != "" {
		extra += fmt.Sprintf("database:\n  url: %q\n", f.pg)
	}
	if f.queue != "" {
		extra += fmt.Sprintf("queue:\n  type: rabbitmq\n  rabbitmq:\n    url: %q\n    name: %s\n    max_deliveries: 5\n", f.amqp, f.queue)
	}
	file, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteString(extra); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// start starts host name running command (serve, run, consume, ...) in a
// process of its own.
func (f *fleet) start(name, command string, o hostOptions) *hostProc {
	f.t.Helper()
	return startHost(f.t, f.bin, name, f.config(name, o), f.env.gh.Token, command)
}

// hostProc is one coding-agent process of a test. Cleanup kills it if the
// test left it running.
type hostProc struct {
	Name   string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	err    error // the exit, once exited is closed
}

// startHost starts bin with `command --config cfg` in a directory of its
// own, its secrets (CA_TEST_TOKEN, CA_TEST_KEY) in its environment.
func startHost(t testing.TB, bin, name, cfg, token, command string) *hostProc {
	t.Helper()
	h := &hostProc{Name: name, out: &syncBuffer{}, exited: make(chan struct{})}
	h.cmd = exec.Command(bin, command, "--config", cfg)
	h.cmd.Dir = t.TempDir()
	h.cmd.Env = append(os.Environ(), "CA_TEST_TOKEN="+token, "CA_TEST_KEY="+apiKey)
	h.cmd.Stdout, h.cmd.Stderr = h.out, h.out
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("starting host %s: %v", name, err)
	}
	go func() {
		h.err = h.cmd.Wait()
		close(h.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-h.exited:
		default:
			h.Kill()
		}
	})
	return h
}

// PID is the host process's.
func (h *hostProc) PID() int { return h.cmd.Process.Pid }

// Kill ends the process with SIGKILL and waits for it.
func (h *hostProc) Kill() {
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	<-h.exited
}

// Stop sends SIGTERM and waits for the exit, at most within; it returns
// the exit's error (nil for exit 0) or says the process did not exit.
func (h *hostProc) Stop(within time.Duration) error {
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		select {
		case <-h.exited:
			return h.err
		default:
			return fmt.Errorf("signalling host %s: %w", h.Name, err)
		}
	}
	return h.Wait(within)
}

// Wait waits for the process to exit, at most within.
func (h *hostProc) Wait(within time.Duration) error {
	select {
	case <-h.exited:
		return h.err
	case <-time.After(within):
		return fmt.Errorf("host %s did not exit within %s", h.Name, within)
	}
}

// Output is what the process wrote to stdout and stderr so far.
func (h *hostProc) Output() string { return h.out.String() }

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitLabelled waits until every task of nums carries label, at most
// within, checking every 50 ms; it fails the test with the tasks that do
// not.
func (f *fleet) waitLabelled(nums []int, label string, within time.Duration, hosts ...*hostProc) {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var missing []int
		for _, n := range nums {
			if !slices.Contains(f.env.gh.Labels("acme/app", n), label) {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return
		}
		for _, h := range hosts {
			select {
			case <-h.exited:
				f.t.Fatalf("host %s exited (%v) with %d tasks not %q:\n%s", h.Name, h.err, len(missing), label, h.Output())
			default:
			}
		}
		if time.Now().After(deadline) {
			for _, h := range hosts {
				f.t.Logf("host %s output:\n%s", h.Name, h.Output())
			}
			f.t.Logf("the log of task %d:\n%s", missing[0], f.logOf(missing[0]))
			f.t.Fatalf("%d tasks not %q after %s: %v (first's labels %v)", len(missing), label, within, missing,
				f.env.gh.Labels("acme/app", missing[0]))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testQueue is a fresh queue name on the broker at url; the queue and its
// dead-letter queue are deleted when the test ends, which finds them empty.
func testQueue(t testing.TB, url string) string {
	t.Helper()
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
	return name
}

// logFile is the fleet's shared log file.
func (f *fleet) logFile() string { return filepath.Clean(f.env.cfg.Logging.File) }
