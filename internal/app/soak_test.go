package app_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
)

// The random-kill walk: `coding-agent run` (the built binary, the
// README's quickstart: built-in tools, the sandbox, delivery) works on two
// labelled issues and is killed (SIGKILL) at a point picked at random among
// everything it does on the way: before or after each write to the forge
// (the claim's label changes, each comment, the final labels, the push and
// the pull request of the delivery), during each model request, or while a
// tool call runs. Then `run` starts again on the same state directory and
// must finish both tasks exactly once: done labels, done in the store, each
// step comment, the closing comment and the delivery comment once, one
// pull request, nothing left in processing.
//
// The trials and the seed come from the environment: CI runs the default
// few; a longer walk is
//
//	CODING_AGENT_SOAK_TRIALS=200 CODING_AGENT_SOAK_SEED=7 go test -run TestRandomKillSoak -timeout 60m ./internal/app
//
// A trial before the first is never killed: it counts the points a walk
// picks from, and must end exactly once too.
const (
	soakTrialsEnv = "CODING_AGENT_SOAK_TRIALS"
	soakSeedEnv   = "CODING_AGENT_SOAK_SEED"
	soakTrials    = 8 // CI's
)

// soakTasks are the walk's issues: each title names the file its task
// writes.
var soakTasks = []struct{ title, file string }{
	{"Add a greeting file", "hello.txt"},
	{"Add a farewell file", "bye.txt"},
}

func TestRandomKillSoak(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	trials, seed := envCount(t, soakTrialsEnv, soakTrials), envCount(t, soakSeedEnv, 1)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x50a4))
	bin := buildBinary(t)
	started := time.Now()
	var (
		points    int // events of a walk never killed
		killedAt  = map[string]int{}
		tasks     int
		once      int
		failures  []string
		notKilled int
		putUp     int // trials whose task was put up after the forge lease
	)
	for trial := 0; trial <= trials; trial++ {
		w := &soakWalk{}
		if trial > 0 {
			w.at = rng.IntN(points) + 1
			w.after = rng.IntN(2) == 1
			w.delay = time.Duration(rng.IntN(100)) * time.Millisecond
		}
		ok := t.Run(fmt.Sprintf("trial %d", trial), func(t *testing.T) {
			e, nums := soakEnv(t, w)
			first := startSoakRun(t, bin, e, w)
			if trial == 0 {
				if first.err != nil {
					t.Fatalf("the walk never killed: %v\n%s", first.err, first.stderr)
				}
				points = len(w.events)
			} else if w.point == "" {
				notKilled++
				if first.err != nil {
					t.Errorf("the run, ended before its kill point: %v\n%s", first.err, first.stderr)
				}
			}
			if w.point != "" {
				killedAt[soakKind(w.point)]++
				// Started again, never killed: it must finish the job.
				w.mu.Lock()
				w.at = 0
				w.events = append(w.events, "---- run started again ----")
				w.mu.Unlock()
				if again := startSoakRun(t, bin, e, w); again.err != nil {
					t.Errorf("run after the kill at %s: %v\n%s", w.point, again.err, again.stderr)
				}
				// A kill between the forge's take and the holder comment
				// (the store's claim, the comment itself) leaves the task in
				// processing with no holder: a run puts it up once the forge
				// lease has passed since, and the run after takes it.
				if slices.ContainsFunc(nums, func(n int) bool { return soakLeft(e, n) }) {
					putUp++
					w.mu.Lock()
					w.events = append(w.events, fmt.Sprintf("---- left in processing: runs again after the forge lease (%ds) ----", soakForgeLease))
					w.mu.Unlock()
					time.Sleep(soakForgeLease*time.Second + time.Second)
					for range 2 {
						if again := startSoakRun(t, bin, e, w); again.err != nil {
							t.Errorf("run after the forge lease: %v\n%s", again.err, again.stderr)
						}
					}
				}
			}
			for i, n := range nums {
				problems := soakCheck(t, e, n, soakTasks[i].file)
				if trial > 0 {
					tasks++
				}
				if len(problems) == 0 {
					if trial > 0 {
						once++
					}
					continue
				}
				f := fmt.Sprintf("trial %d, task #%d, killed %s: %s", trial, n, cmp.Or(w.point, "never"), strings.Join(problems, "; "))
				failures = append(failures, f)
				t.Error(f)
			}
			if t.Failed() {
				t.Logf("the events of the killed run and the next, in order:\n%s", strings.Join(w.events, "\n"))
			}
		})
		if trial == 0 && (!ok || points == 0) {
			t.Fatalf("the walk never killed did not end exactly once (%d points); no trial can be judged", points)
		}
	}
	kinds := slices.Sorted(maps.Keys(killedAt))
	var by []string
	for _, k := range kinds {
		by = append(by, fmt.Sprintf("%s %d", k, killedAt[k]))
	}
	t.Logf("random-kill soak: seed %d, %d trials, %d tasks, %d exactly once, %d not; %d points to pick from "+
		"(the events of the trial never killed, before it); kills: %s; %d trials ended before their point; "+
		"%d trials left a task in processing that a run after the forge lease put up; %s in all",
		seed, trials, tasks, once, tasks-once, points, strings.Join(by, ", "), notKilled, putUp, time.Since(started).Round(time.Second))
	for _, f := range failures {
		t.Log(f)
	}
}

// envCount is the count environment variable name gives, def when unset.
func envCount(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count, 0 or more", name, v)
	}
	return n
}

// soakWalk is one trial's kill: at the at-th event (0: none) of the run,
// before or after it (a forge write), or delay into it (a tool call). It
// names the events as they come.
type soakWalk struct {
	at    int
	after bool
	delay time.Duration

	mu     sync.Mutex
	events []string
	target int64  // the forge request to kill after
	point  string // where it was killed; "" while it was not
	kill   func(point string)
}

// event notes an event and reports whether it is the one to kill at.
func (w *soakWalk) event(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, name)
	return w.at > 0 && len(w.events) == w.at && w.point == ""
}

// killNow kills the run at point, once.
func (w *soakWalk) killNow(point string) {
	w.mu.Lock()
	if w.point != "" || w.kill == nil {
		w.mu.Unlock()
		return
	}
	w.point = point
	kill := w.kill
	w.mu.Unlock()
	kill(point)
}

// soakEnv is a trial's forge, model and configuration: the quickstart's,
// with the two issues labelled.
func soakEnv(t *testing.T, w *soakWalk) (*env, []int) {
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
		seed: func(s *forgetest.IssueSeed) { s.Title, s.Body = soakTasks[0].title, "Create "+soakTasks[0].file+"." },
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			i := slices.IndexFunc(soakTasks, func(s struct{ title, file string }) bool { return seen(r, s.title) })
			if i < 0 {
				e.t.Errorf("model request %d names no task of the walk", r.N)
				return llmtest.Fault{Status: 400, Body: "no task"}
			}
			f, step := soakTasks[i].file, toolResults(r)
			if w.event(fmt.Sprintf("model request for %s, step %d", f, step+1)) {
				w.killNow(fmt.Sprintf("during the model request for %s, step %d", f, step+1))
			}
			switch step {
			case 0:
				return e.call(r, "Writing "+f+".", "workspace/write_file", map[string]any{"path": f, "content": f + " from coding-agent\n"})
			case 1:
				return e.call(r, "Checking "+f+".", "workspace/run_command", map[string]any{"command": "sleep 0.1 && cat " + f})
			}
			return done("Wrote " + f + ".")
		}})
	quickstart(t, e)
	e.cfg.Conversation.Enabled = false
	lease := soakForgeLease
	e.cfg.ForgeLeaseSeconds = &lease
	n := e.gh.AddIssue("acme/app", forgetest.IssueSeed{Title: soakTasks[1].title, Body: "Create " + soakTasks[1].file + ".",
		Author: "alice", Labels: []string{"coding agent", "bug"}})
	e.gh.Watch(func(c forgetest.Call) bool { return w.forge(c) })
	t.Cleanup(func() { e.gh.Watch(nil) })
	return e, []int{e.ref.Number, n}
}

// forge sees a request to the forge: a write is an event, killed at before
// or after it was served; the step comment before a command is followed by
// the command's own event, killed at delay into it.
func (w *soakWalk) forge(c forgetest.Call) bool {
	name, write := soakDescribe(c)
	if !write {
		return true
	}
	if !c.Served {
		if w.event(name) {
			if !w.after {
				w.killNow("before " + name)
				return false
			}
			w.mu.Lock()
			w.target = c.Seq
			w.mu.Unlock()
		}
		return true
	}
	w.mu.Lock()
	target := w.target == c.Seq
	w.mu.Unlock()
	if target {
		w.killNow("after " + name)
		return false
	}
	if f, ok := strings.CutPrefix(name, "comment step: Checking "); ok {
		point := "tool call: run_command on " + strings.TrimSuffix(f, ".")
		if w.event(point) {
			time.AfterFunc(w.delay, func() { w.killNow(fmt.Sprintf("%s, %s into it", point, w.delay)) })
		}
	}
	return true
}

var (
	soakLabelPath   = regexp.MustCompile(`/issues/(\d+)/labels(?:/(.+))?$`)
	soakCommentPath = regexp.MustCompile(`/issues/(\d+)/comments$`)
)

// soakDescribe names a request to the forge, and says whether it is a
// write (git's fetches are reads).
func soakDescribe(c forgetest.Call) (string, bool) {
	if c.Method == "GET" || c.Method == "HEAD" || strings.HasSuffix(c.Path, "git-upload-pack") {
		return "", false
	}
	switch m := soakLabelPath.FindStringSubmatch(c.Path); {
	case m != nil && c.Method == "DELETE":
		name, _ := url.PathUnescape(m[2])
		if name == "coding agent" {
			return fmt.Sprintf("the claim of #%s: the take of %q", m[1], name), true
		}
		return fmt.Sprintf("label change on #%s: remove %q", m[1], name), true
	case m != nil:
		var v struct{ Labels []string }
		if json.Unmarshal(c.Body, &v) != nil { // the bare array GitHub takes too
			_ = json.Unmarshal(c.Body, &v.Labels)
		}
		return fmt.Sprintf("label change on #%s: add %q", m[1], strings.Join(v.Labels, ", ")), true
	}
	if soakCommentPath.MatchString(c.Path) && c.Method == "POST" {
		var v struct{ Body string }
		_ = json.Unmarshal(c.Body, &v)
		what := "comment"
		if key, ok := postonce.KeyOf(v.Body); ok {
			what = "comment " + key[strings.LastIndexByte(key, '/')+1:]
		}
		first, _, _ := strings.Cut(postonce.Unmark(v.Body), "\n")
		return what + ": " + first, true
	}
	switch {
	case strings.HasSuffix(c.Path, "/pulls") && c.Method == "POST":
		return "delivery: the pull request opened", true
	case strings.HasSuffix(c.Path, "git-receive-pack"):
		return "delivery: the push", true
	}
	return c.Method + " " + c.Path, true
}

// soakKind is the kind of a kill point, for the summary.
func soakKind(point string) string {
	for _, k := range []string{"claim", "label change", "comment step", "comment closing", "comment delivery", "delivery", "model request", "tool call"} {
		if strings.Contains(point, k) {
			return k
		}
	}
	return "other"
}

type soakRun struct {
	err    error
	stderr string
}

// startSoakRun runs `coding-agent run` on e's config to its end, or to
// its kill at w's point.
func startSoakRun(t *testing.T, bin string, e *env, w *soakWalk) soakRun {
	t.Helper()
	cmd := exec.Command(bin, "run", "--config", writeConfig(t, e.cfg))
	cmd.Env = append(os.Environ(), "CA_TEST_TOKEN="+e.gh.Token, "CA_TEST_KEY="+apiKey)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	dead := make(chan struct{})
	go func() {
		exited <- cmd.Wait()
		close(dead)
	}()
	w.mu.Lock()
	w.kill = func(string) {
		_ = cmd.Process.Kill()
		<-dead
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.kill = nil
		w.mu.Unlock()
	}()
	select {
	case err := <-exited:
		w.mu.Lock()
		killed := w.point != ""
		w.mu.Unlock()
		if killed && w.at > 0 {
			return soakRun{stderr: out.String()}
		}
		return soakRun{err: err, stderr: out.String()}
	case <-time.After(2 * time.Minute): // only turns a hang into a failure that says where
		_ = cmd.Process.Kill()
		<-dead
		t.Fatalf("run did not end within 2 minutes; log:\n%s", readTree(t, filepath.Dir(e.cfg.Logging.File)))
	}
	return soakRun{}
}

// soakCheck says how task n (writing file) did not end exactly once; none
// when it did.
// soakForgeLease is the soak's forge_lease_seconds, the shortest allowed:
// a task killed between the forge's take and the store's claim waits that
// long to be put up.
const soakForgeLease = 30

// soakLeft reports whether task n is still in processing on the forge
// once a run ended.
func soakLeft(e *env, n int) bool {
	return slices.Contains(e.gh.Labels("acme/app", n), "coding agent processing")
}

func soakCheck(t *testing.T, e *env, n int, file string) []string {
	t.Helper()
	var problems []string
	labels := slices.Clone(e.gh.Labels("acme/app", n))
	slices.Sort(labels)
	st, err := sqlite.Open(context.Background(), e.cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ref := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n}
	rec, err := st.Get(context.Background(), ref)
	switch {
	case err != nil && slices.Contains(labels, "coding agent processing"):
		problems = append(problems, "stranded: in processing on the forge, in no store ("+err.Error()+")")
	case err != nil:
		problems = append(problems, "no store row: "+err.Error())
	case rec.Status != task.Done:
		problems = append(problems, fmt.Sprintf("store status %s", rec.Status))
	}
	if !slices.Equal(labels, []string{"bug", "coding agent done"}) {
		problems = append(problems, fmt.Sprintf("labels %q", labels))
	}
	var bodies, keys []string
	for _, c := range e.gh.Comments("acme/app", n) {
		if c.Author != e.gh.BotLogin {
			continue
		}
		bodies = append(bodies, postonce.Unmark(c.Body))
		if k, ok := postonce.KeyOf(c.Body); ok {
			keys = append(keys, k)
		}
	}
	all := strings.Join(bodies, "\n")
	for _, want := range []string{"Writing " + file + ".", "Checking " + file + ".", "Wrote " + file + ".", "coding-agent delivered its work"} {
		if c := strings.Count(all, want); c != 1 {
			problems = append(problems, fmt.Sprintf("%q in %d comments", want, c))
		}
	}
	slices.Sort(keys)
	if d := len(keys) - len(slices.Compact(slices.Clone(keys))); d > 0 {
		problems = append(problems, fmt.Sprintf("%d comments posted twice under one key", d))
	}
	if strings.Contains(all, "took over") {
		problems = append(problems, "a restart on the same host said it took the task over")
	}
	branch := "coding-agent/issue-" + strconv.Itoa(n)
	pulls := 0
	for _, p := range e.gh.Pulls("acme/app") {
		if p.Head == branch {
			pulls++
		}
	}
	if pulls != 1 {
		problems = append(problems, fmt.Sprintf("%d pull requests from %s", pulls, branch))
	}
	if got, ok := e.gh.FileAt("acme/app", branch, file); !ok || got != file+" from coding-agent\n" {
		problems = append(problems, fmt.Sprintf("%s on %s: %q, %v", file, branch, got, ok))
	}
	if len(problems) > 0 && len(bodies) > 0 {
		problems = append(problems, "its comments:\n"+strings.Join(bodies, "\n-----\n"))
	}
	return problems
}

// fullEnv set to anything runs the stress tests at the counts their issues
// ask for (see README, Development), where the test command runs fewer.
const fullEnv = "CODING_AGENT_TEST_FULL"

// stress is ci, or full with fullEnv set.
func stress(ci, full int) int {
	if os.Getenv(fullEnv) != "" {
		return full
	}
	return ci
}
