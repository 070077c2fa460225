package app_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/queue/rabbitmq/rmqtest"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/postgres"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
)

// fleetWait bounds every wait of the fleet tests for the hosts to finish
// their tasks: it only turns a hang into a failure.
const fleetWait = 2 * time.Minute

// heldPerHost counts, per host, the tasks the store holds as queued or
// running: claimed and not finished.
func heldPerHost(ctx context.Context, st store.Store) (map[string]int, error) {
	recs, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	held := map[string]int{}
	for _, r := range recs {
		if r.Status == task.Queued || r.Status == task.Running {
			held[r.Host]++
		}
	}
	return held, nil
}

// checkOnce checks that every task of nums asked the model once and got one
// bot comment, and returns how many asked more than once and how many got
// more than one comment.
func (f *fleet) checkOnce(nums []int) (twice, dupComments int) {
	f.t.Helper()
	for _, n := range nums {
		if r := f.requestsFor(n); r != 1 {
			twice++
			if r == 0 {
				f.t.Errorf("task %d never asked the model", n)
			}
			f.t.Logf("task %d asked the model %d times; its log:\n%s", n, r, f.logOf(n))
		}
		// One comment of each key's kind (the living comment, the closing
		// one), and one closing comment.
		kinds := map[string]int{}
		for _, c := range f.env.gh.Comments("acme/app", n) {
			if c.Author == f.env.gh.BotLogin {
				key, _ := postonce.KeyOf(c.Body)
				kinds[key[strings.LastIndex(key, "/")+1:]]++
			}
		}
		repeated := false
		for _, k := range kinds {
			repeated = repeated || k > 1
		}
		if kinds["closing"] != 1 || repeated {
			f.t.Logf("task %d's bot comments by kind: %v", n, kinds)
			dupComments++
		}
	}
	return twice, dupComments
}

// doneBy counts the tasks of nums that each host finished, by the store.
func doneBy(t *testing.T, st store.Store, nums []int) map[string]int {
	t.Helper()
	by := map[string]int{}
	for _, n := range nums {
		rec, err := st.Get(t.Context(), task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n})
		if err != nil {
			t.Fatalf("task %d in the store: %v", n, err)
		}
		if rec.Status != task.Done {
			t.Errorf("task %d is %s in the store, want done", n, rec.Status)
		}
		by[rec.Host]++
	}
	return by
}

// logOf is the lines of the fleet's log about task n.
func (f *fleet) logOf(n int) string {
	b, err := os.ReadFile(f.logFile())
	if err != nil {
		return err.Error()
	}
	ref := fmt.Sprintf(`"task":"github:acme/app#%d"`, n)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, ref) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// logCount counts the lines of the fleet's log file holding s.
func (f *fleet) logCount(s string) int {
	f.t.Helper()
	b, err := os.ReadFile(f.logFile())
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.Count(string(b), s)
}

// Two `serve` processes sharing one state directory, two workers each, and
// eight tasks whose model answers are held until four are being answered
// at once: neither process ever holds more tasks (claimed, not finished)
// than its workers, and both work. Before fair claiming the first process
// to poll claimed all eight into its own queue, and the four answers
// never came at once. Both write one log file, which keeps every line.
func TestTwoServeProcessesClaimNoMoreThanTheirWorkers(t *testing.T) {
	t.Run("state_dir", func(t *testing.T) { testFairClaim(t, false) })
	t.Run("postgres", func(t *testing.T) { testFairClaim(t, true) })
}

func testFairClaim(t *testing.T, pg bool) {
	f := newFleet(t, fleetSetup{postgres: pg})
	nums := f.addTasks(8, false)
	var st store.Store
	if pg {
		st = f.fleetPG(t)
	} else {
		sq, err := sqlite.Open(t.Context(), f.env.cfg.StateDir)
		if err != nil {
			t.Fatal(err)
		}
		defer sq.Close()
		st = sq
	}
	var (
		mu      sync.Mutex
		inHand  int
		maxHeld = map[string]int{}
		gate    = make(chan struct{})
	)
	f.setAnswer(func(int) {
		held, err := heldPerHost(context.Background(), st)
		mu.Lock()
		defer func() {
			mu.Unlock()
			<-gate
		}()
		if err != nil {
			t.Errorf("reading the store: %v", err)
			return
		}
		for h, n := range held {
			maxHeld[h] = max(maxHeld[h], n)
		}
		if inHand++; inHand == 4 {
			close(gate)
		}
	})
	o := hostOptions{workers: 2, interval: time.Second}
	hosts := []*hostProc{f.start("alpha", "serve", o), f.start("beta", "serve", o)}
	for _, n := range nums {
		f.env.gh.AddLabelDirect("acme/app", n, "coding agent")
	}
	f.waitLabelled(nums, "coding agent done", fleetWait, hosts...)
	for _, h := range hosts {
		if err := h.Stop(30 * time.Second); err != nil {
			t.Errorf("host %s: %v\n%s", h.Name, err, h.Output())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("most tasks held at once: %v", maxHeld)
	for h, n := range maxHeld {
		if n > 2 {
			t.Errorf("host %s held %d tasks at once, more than its 2 workers", h, n)
		}
	}
	by := doneBy(t, st, nums)
	if by["alpha"] == 0 || by["beta"] == 0 {
		t.Errorf("tasks done per host %v: want both hosts to work", by)
	}
	twice, dup := f.checkOnce(nums)
	runs := f.logCount(`"msg":"task run ended"`)
	if twice != 0 || dup != 0 {
		t.Errorf("%d tasks asked the model more than once, %d got more than one comment", twice, dup)
	}
	if runs != len(nums) {
		t.Errorf("the shared log holds %d \"task run ended\" lines, want %d", runs, len(nums))
	}
}

// fleetPG opens the fleet's PostgreSQL store for the test's reads.
func (f *fleet) fleetPG(t *testing.T) store.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), f.pg, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Two hosts (`serve`, host_name alpha and beta) sharing PostgreSQL and
// RabbitMQ, rounds of fifty labelled tasks (three; ten with
// CODING_AGENT_TEST_FULL): every task is done, asked
// the model once and commented on once, and both hosts work.
func TestTwoHostsShareTasksOverPostgresAndRabbitMQ(t *testing.T) {
	const tasks = 50
	rounds := stress(3, 10)
	f := newFleet(t, fleetSetup{postgres: true, rabbitmq: true})
	st := f.fleetPG(t)
	o := hostOptions{workers: 4, interval: time.Second}
	hosts := []*hostProc{f.start("alpha", "serve", o), f.start("beta", "serve", o)}
	var all []int
	twice, dup := 0, 0
	for range rounds {
		nums := f.addTasks(tasks, true)
		f.waitLabelled(nums, "coding agent done", fleetWait, hosts...)
		tw, d := f.checkOnce(nums)
		twice, dup = twice+tw, dup+d
		all = append(all, nums...)
	}
	for _, h := range hosts {
		if err := h.Stop(30 * time.Second); err != nil {
			t.Errorf("host %s: %v\n%s", h.Name, err, h.Output())
		}
	}
	by := doneBy(t, st, all)
	t.Logf("%d rounds of %d tasks: %d asked the model more than once, %d got more than one comment; done per host %v",
		rounds, tasks, twice, dup, by)
	if twice != 0 || dup != 0 {
		t.Errorf("%d tasks asked the model more than once, %d got more than one comment", twice, dup)
	}
	if by["alpha"] == 0 || by["beta"] == 0 {
		t.Errorf("tasks done per host %v: want both hosts to work", by)
	}
	if n := f.logCount(`"msg":"task run ended"`); n != len(all) {
		t.Errorf("the shared log holds %d \"task run ended\" lines, want %d", n, len(all))
	}
}

// rabbitmqctl runs rabbitmqctl with args, failing the test if it fails.
func rabbitmqctl(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("rabbitmqctl", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// The broker stops (rabbitmqctl stop_app) while two hosts are in the middle
// of fifty tasks, and starts again two seconds later: no job is lost and
// none is run twice; every task is done once, commented on once.
func TestBrokerRestartLosesNoJob(t *testing.T) {
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("rabbitmqctl is not installed: %v", err)
		}
		t.Skipf("rabbitmqctl is not installed (%v): this test restarts the local broker", err)
	}
	url := rmqtest.Exclusive(t) // no other test uses the broker while it restarts
	f := newFleet(t, fleetSetup{postgres: true})
	f.amqp, f.queue = url, testQueue(t, url)
	st := f.fleetPG(t)
	const tasks = 50
	var (
		mu       sync.Mutex
		answered int
		halfway  = make(chan struct{})
	)
	f.setAnswer(func(int) {
		time.Sleep(100 * time.Millisecond) // the model's time: some tasks are in hand when the broker stops
		mu.Lock()
		defer mu.Unlock()
		if answered++; answered == tasks/3 {
			close(halfway)
		}
	})
	o := hostOptions{workers: 3, interval: time.Second}
	hosts := []*hostProc{f.start("alpha", "serve", o), f.start("beta", "serve", o)}
	nums := f.addTasks(tasks, true)
	select {
	case <-halfway:
	case <-time.After(fleetWait):
		t.Fatalf("the hosts did not get through a third of the tasks")
	}
	rabbitmqctl(t, "stop_app")
	stopped := true
	t.Cleanup(func() {
		if stopped {
			rabbitmqctl(t, "start_app")
		}
	})
	time.Sleep(2 * time.Second) // the outage
	rabbitmqctl(t, "start_app")
	stopped = false
	rabbitmqctl(t, "await_startup")
	f.waitLabelled(nums, "coding agent done", fleetWait, hosts...)
	for _, h := range hosts {
		if err := h.Stop(30 * time.Second); err != nil {
			t.Errorf("host %s: %v\n%s", h.Name, err, h.Output())
		}
	}
	by := doneBy(t, st, nums)
	twice, dup := f.checkOnce(nums)
	t.Logf("broker restarted after %d answers: %d tasks asked the model more than once, %d got more than one comment; done per host %v",
		tasks/3, twice, dup, by)
	if twice != 0 || dup != 0 {
		t.Errorf("%d tasks asked the model more than once, %d got more than one comment", twice, dup)
	}
}
