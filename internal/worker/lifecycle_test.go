package worker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	ghforge "github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
	"github.com/coding-agent/coding-agent/internal/watch"
)

// The worker's life cycle against the GitHub emulator, the SQLite store, a
// fake runner and a test clock: no model, no MCP server, no Node.

var testLabels = task.Labels{Bot: "agent", Processing: "agent processing", Done: "agent done", Failed: "agent failed",
	Paused: "agent paused", Stopped: "agent stopped", Awaiting: "agent awaiting"}

// fakeRunner ends every run with out (or err), after saving a checkpoint
// so that the test sees whether the transition keeps or drops it.
type fakeRunner struct {
	st   store.Store
	out  engine.Outcome
	err  error
	runs int
	in   engine.Input
}

func (r *fakeRunner) Run(ctx context.Context, in engine.Input) (engine.Outcome, error) {
	r.runs++
	r.in = in
	if err := r.st.SaveCheckpoint(ctx, in.Task.Ref, store.Checkpoint{Step: 1, Data: []byte(`{}`)}); err != nil {
		return engine.Outcome{}, err
	}
	return r.out, r.err
}

type world struct {
	t   *testing.T
	gh  *forgetest.GitHub
	st  *sqlite.Store
	run *fakeRunner
	w   *Worker
	ref task.Ref
	now time.Time
}

func newWorld(t *testing.T, conv bool) *world {
	t.Helper()
	gh := forgetest.NewGitHub(t)
	gh.AddRepo("acme/app")
	n := gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "Add a file", Body: "Please.", Author: "alice",
		Labels: []string{"bug", testLabels.Bot}})
	f, err := ghforge.New(ghforge.Options{APIURL: gh.URL(), Token: gh.Token, Repositories: []string{"acme/app"},
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	wd := &world{t: t, gh: gh, st: st, run: &fakeRunner{st: st}, now: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC),
		ref: task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n}}
	gh.SetClock(func() time.Time { return wd.now }) // one clock for the forge and the worker
	wd.w = New(Options{Forge: f, Store: st, Agent: wd.run, Labels: testLabels, BotName: gh.BotLogin,
		Owner:        store.Owner{Host: "test", PID: 1},
		Trust:        watch.Trust{HearAuthor: true, LabelerNeedsWrite: true},
		Conversation: Conversation{Enabled: conv, Keywords: []string{"thanks"}, Timeout: time.Hour, MaxRounds: 2},
		Now:          func() time.Time { return wd.now }})
	return wd
}

// claim makes the producer take the task.
func (wd *world) claim() {
	wd.t.Helper()
	if n, err := wd.w.Produce(wd.t.Context()); err != nil || n != 1 {
		wd.t.Fatalf("produce: %d claimed, %v", n, err)
	}
}

func (wd *world) labels() []string {
	l := wd.gh.Labels(wd.ref.Repo, wd.ref.Number)
	slices.Sort(l)
	return l
}

func (wd *world) want(status task.Status, labels ...string) {
	wd.t.Helper()
	rec, err := wd.st.Get(wd.t.Context(), wd.ref)
	if err != nil {
		wd.t.Fatal(err)
	}
	if rec.Status != status {
		wd.t.Errorf("status %s, want %s (error %q)", rec.Status, status, rec.Error)
	}
	slices.Sort(labels)
	if got := wd.labels(); !slices.Equal(got, labels) {
		wd.t.Errorf("labels %q, want %q", got, labels)
	}
}

func (wd *world) checkpoint() bool {
	_, ok, err := wd.st.LoadCheckpoint(wd.t.Context(), wd.ref)
	if err != nil {
		wd.t.Fatal(err)
	}
	return ok
}

func (wd *world) comments() []string {
	var out []string
	for _, c := range wd.gh.Comments(wd.ref.Repo, wd.ref.Number) {
		out = append(out, c.Body)
	}
	return out
}

// Every event of the table is walked by a test below.
var walked = map[event]string{
	claimed: "TestClaim", replied: "TestConversationTransitions", closedEarly: "TestClosedBeforeWork",
	runDone: "TestRunEnds", roundDone: "TestConversationTransitions", runFailed: "TestRunEnds", runBroke: "TestRunEnds",
	runPaused: "TestRunEnds", runStopped: "TestRunEnds", runInterrupted: "TestRunEnds",
	runAsked: "TestServerQuestionAwaitsTheAnswer", unanswered: "TestServerQuestionUnanswered",
	conversationEnded: "TestConversationTransitions", storeFailed: "TestStoreFailureStopsTheTask",
	authRefused: "TestRefusedCredentialsLeaveTheTaskQueued",
	reopened:    "TestRepliesJudgedAsAPersonWould", stopAwaiting: "TestStoppedLabelOnAnAwaitingTask",
}

func TestEveryEventIsWalked(t *testing.T) {
	for ev, tr := range lifecycle {
		if walked[ev] == "" {
			t.Errorf("event %q has no test", ev)
		}
		if len(tr.from) == 0 || tr.to == "" {
			t.Errorf("event %q: from %v to %q", ev, tr.from, tr.to)
		}
	}
}

// The table's from column holds at run time: every event move applies,
// to a task in every status, moves it only from a status the row lists;
// from any other, nothing changes (status, labels, comments). The rows
// that take a request (claimed, replied, reopened, stopped awaiting) are
// not move's: the forge's take and the store's claim decide them.
func TestTransitionsMoveOnlyFromTheirStatuses(t *testing.T) {
	all := task.Statuses // a new status is walked too
	for ev, tr := range lifecycle {
		if tr.take {
			continue
		}
		for _, st := range all {
			wd := newWorld(t, false)
			wd.claim()
			if err := wd.st.SetStatus(t.Context(), wd.ref, st, ""); err != nil {
				t.Fatal(err)
			}
			labels, comments := wd.labels(), len(wd.comments())
			moved, err := wd.w.move(t.Context(), ending{ref: wd.ref, log: wd.w.log(wd.ref), labels: labels}, ev)
			rec := wd.record()
			allowed := slices.Contains(tr.from, st)
			switch {
			case err != nil:
				t.Errorf("%s from %s: %v", ev, st, err)
			case allowed && rec.Status != tr.to && rec.Status != tr.retry:
				t.Errorf("%s from %s: status %s, want %s", ev, st, rec.Status, tr.to)
			case !allowed && (moved || rec.Status != st || !slices.Equal(wd.labels(), labels) || len(wd.comments()) != comments):
				t.Errorf("%s from %s, which the row does not list: moved %v, status %s, labels %q (were %q)",
					ev, st, moved, rec.Status, wd.labels(), labels)
			}
		}
	}
}

// The producer claims a task from any status it may be in, dropping the bot
// label and whatever final, pause or stop label an earlier round left.
func TestClaim(t *testing.T) {
	for _, from := range lifecycle[claimed].from {
		t.Run("from "+string(from)+"?", func(t *testing.T) {
			wd := newWorld(t, false)
			if from != "" {
				if _, err := wd.st.Claim(t.Context(), wd.ref, store.Owner{Host: "test", PID: 1}); err != nil {
					t.Fatal(err)
				}
				if err := wd.st.SetStatus(t.Context(), wd.ref, from, ""); err != nil {
					t.Fatal(err)
				}
			}
			for _, l := range []string{testLabels.Done, testLabels.Failed, testLabels.Stopped, testLabels.Awaiting} {
				wd.gh.AddLabelDirect(wd.ref.Repo, wd.ref.Number, l)
			}
			wd.claim()
			wd.want(task.Queued, "bug", testLabels.Processing)
		})
	}
	t.Run("processing label refused", func(t *testing.T) {
		wd := newWorld(t, false)
		wd.gh.Inject(forgetest.Fault{Method: "POST", Path: "/labels", Status: 422})
		if n, err := wd.w.Produce(t.Context()); err != nil || n != 0 {
			t.Fatalf("produce: %d, %v", n, err)
		}
		wd.want(task.Failed, "bug", testLabels.Bot) // the bot label stays: the next pass tries again
		wd.claim()
		wd.want(task.Queued, "bug", testLabels.Processing)
	})
}

func TestClosedBeforeWork(t *testing.T) {
	wd := newWorld(t, false)
	wd.claim()
	wd.gh.SetState(wd.ref.Repo, wd.ref.Number, "closed")
	wd.w.Process(t.Context(), wd.ref)
	wd.want(task.Stopped, "bug")
	if wd.run.runs != 0 || len(wd.comments()) != 0 {
		t.Errorf("%d runs, comments %q; want none", wd.run.runs, wd.comments())
	}
}

// Each way a run ends, from a task claimed with stale labels left by an
// earlier round: the status, the labels, the notice, the checkpoint.
func TestRunEnds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		out        engine.Outcome
		err        error
		cancel     bool // the shutdown grace ran out: the run's context is cancelled
		status     task.Status
		labels     []string
		notice     string // in the one comment posted; "" none
		checkpoint bool   // kept
		reason     string // in the store record
	}{
		{name: "done", out: engine.Outcome{End: engine.Done, Comment: "ok"}, status: task.Done,
			labels: []string{"bug", testLabels.Done}},
		{name: "failed", out: engine.Outcome{End: engine.Failed, Reason: "the model gave up"}, status: task.Failed,
			labels: []string{"bug", testLabels.Failed}, notice: "the model gave up", reason: "the model gave up"},
		{name: "failed on its checks", out: engine.Outcome{End: engine.Failed,
			Reason: "the repository's checks still fail after 2 feedback round(s): `pytest -q` (exit 1)",
			Checks: []engine.CheckResult{{Command: "pytest -q", ExitCode: 1, Output: "FAILED test_hello.py::test_greets"}},
			Ran:    []toolhost.CommandRun{{Command: "pytest -q", ExitCode: 1}}}, status: task.Failed,
			labels: []string{"bug", testLabels.Failed}, notice: "FAILED test_hello.py::test_greets", reason: "`pytest -q` (exit 1)"},
		{name: "failed and reported", out: engine.Outcome{End: engine.Failed, Reason: "verification failed", Reported: true},
			status: task.Failed, labels: []string{"bug", testLabels.Failed}, reason: "verification failed"},
		{name: "system error", err: errors.New("model request 3: 503"), status: task.Failed,
			labels: []string{"bug", testLabels.Failed}, notice: "503", checkpoint: true, reason: "503"},
		{name: "paused", out: engine.Outcome{End: engine.Paused, Reason: `the "agent paused" label was added`, Calls: 4},
			status: task.Paused, labels: []string{"bug", testLabels.Done, testLabels.Failed}, notice: "agent paused", checkpoint: true},
		{name: "stopped", out: engine.Outcome{End: engine.Stopped, Reason: "the task was closed", Calls: 2},
			status: task.Stopped, labels: []string{"bug", testLabels.Done, testLabels.Failed}, notice: "the task was closed"},
		{name: "interrupted", out: engine.Outcome{End: engine.Interrupted, Reason: "shutting down", Calls: 3},
			status: task.Queued, labels: []string{"bug", testLabels.Processing, testLabels.Done, testLabels.Failed},
			notice: "3", checkpoint: true},
		{name: "cut off after the grace", err: context.Canceled, cancel: true, status: task.Queued,
			labels: []string{"bug", testLabels.Processing, testLabels.Done, testLabels.Failed}, checkpoint: true, notice: "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd := newWorld(t, false)
			wd.claim()
			// Left by an earlier round, after the claim dropped them.
			wd.gh.AddLabelDirect(wd.ref.Repo, wd.ref.Number, testLabels.Done)
			wd.gh.AddLabelDirect(wd.ref.Repo, wd.ref.Number, testLabels.Failed)
			wd.run.out, wd.run.err = tc.out, tc.err
			ctx := t.Context()
			if tc.cancel {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				wd.run.st = cancelling{wd.st, cancel}
			}
			wd.w.Process(ctx, wd.ref)
			wd.want(tc.status, tc.labels...)
			c := wd.comments()
			switch {
			case tc.notice == "" && len(c) != 0:
				t.Errorf("comments %q, want none", c)
			case tc.notice != "" && (len(c) != 1 || !strings.Contains(c[0], tc.notice)):
				t.Errorf("comments %q, want one saying %q", c, tc.notice)
			}
			if got := wd.checkpoint(); got != tc.checkpoint {
				t.Errorf("checkpoint kept: %v, want %v", got, tc.checkpoint)
			}
			rec, _ := wd.st.Get(t.Context(), wd.ref)
			if !strings.Contains(rec.Error, tc.reason) || (tc.reason == "" && rec.Error != "") {
				t.Errorf("store error %q, want %q", rec.Error, tc.reason)
			}
		})
	}
}

// A failed run's comment under language ja is Japanese throughout: the
// evidence of what it ran too (it was English, in a Japanese comment).
func TestFailureCommentKeepsToItsLanguage(t *testing.T) {
	wd := newWorld(t, false)
	wd.w.o.Lang = report.Japanese
	wd.claim()
	wd.run.out = engine.Outcome{End: engine.Failed, Reason: "checks fail",
		Checks: []engine.CheckResult{{Command: "pytest -q", ExitCode: 1, Output: "1 failed"}},
		Ran:    []toolhost.CommandRun{{Command: "pytest -q", ExitCode: 1}}}
	wd.w.Process(t.Context(), wd.ref)
	c := wd.comments()
	if len(c) != 1 || !strings.Contains(c[0], "coding-agent が実行したチェック") || strings.Contains(c[0], "Checks run by") {
		t.Errorf("the failure comment:\n%s", strings.Join(c, "\n-----\n"))
	}
}

// cancelling is a store whose checkpoint save cancels the run's context, as
// the end of the shutdown grace does mid-run.
type cancelling struct {
	store.Store
	cancel context.CancelFunc
}

func (c cancelling) SaveCheckpoint(ctx context.Context, ref task.Ref, cp store.Checkpoint) error {
	err := c.Store.SaveCheckpoint(ctx, ref, cp)
	c.cancel()
	return err
}

// A final label that cannot be set leaves the task queued with its
// checkpoint (where the engine keeps the outcome, returned at once on the
// next run): the next pass sets the labels.
func TestFinalLabelFailureIsRetried(t *testing.T) {
	wd := newWorld(t, false)
	wd.claim()
	wd.run.out = engine.Outcome{End: engine.Done}
	wd.gh.Inject(forgetest.Fault{Method: "POST", Path: "/labels", Status: 500})
	wd.w.Process(t.Context(), wd.ref)
	wd.want(task.Queued, "bug", testLabels.Processing)
	if !wd.checkpoint() {
		t.Error("the checkpoint holding the outcome was dropped")
	}
	if n, err := wd.w.Backlog(t.Context()); err != nil || n != 1 { // no queue: the store's queued status hands it over
		t.Fatalf("backlog: %d, %v", n, err)
	}
	wd.w.Process(t.Context(), wd.ref)
	wd.want(task.Done, "bug", testLabels.Done)
}

// The conversation: a round done awaits a reply; a reply from the author
// starts a round; a thanks, the timeout or closing the item ends it done; a
// thanks whose labels fail is judged again; max_rounds replies end it.
func TestConversationTransitions(t *testing.T) {
	round := func(wd *world) {
		wd.t.Helper()
		wd.run.out = engine.Outcome{End: engine.Done, Comment: "done", Summary: "wrote the file"}
		wd.w.Process(wd.t.Context(), wd.ref)
	}
	reply := func(wd *world, body string) int {
		wd.t.Helper()
		wd.now = wd.now.Add(time.Minute)
		wd.gh.AddComment(wd.ref.Repo, wd.ref.Number, "alice", body)
		n, err := wd.w.Replies(wd.t.Context())
		if err != nil {
			wd.t.Fatal(err)
		}
		return n
	}
	start := func(t *testing.T) *world {
		wd := newWorld(t, true)
		wd.claim()
		round(wd)
		wd.want(task.Awaiting, "bug", testLabels.Awaiting)
		if wd.checkpoint() {
			t.Error("a finished round kept its checkpoint")
		}
		return wd
	}
	t.Run("a reply starts a round", func(t *testing.T) {
		wd := start(t)
		if n := reply(wd, "Please add a second file."); n != 1 {
			t.Fatalf("%d rounds started, want 1", n)
		}
		wd.want(task.Queued, "bug", testLabels.Processing)
		round(wd)
		if got := wd.run.in.Rounds; !slices.Equal(got, []string{"wrote the file"}) {
			t.Errorf("round 2 was given the summaries %q", got)
		}
		wd.want(task.Awaiting, "bug", testLabels.Awaiting) // max_rounds 2: one more reply is heard
		reply(wd, "And a third.")
		round(wd)
		wd.want(task.Done, "bug", testLabels.Done)
		if n := reply(wd, "One more?"); n != 0 {
			t.Errorf("a reply after max_rounds started %d rounds", n)
		}
	})
	t.Run("thanks", func(t *testing.T) {
		wd := start(t)
		if n := reply(wd, "thanks"); n != 0 {
			t.Fatalf("%d rounds started", n)
		}
		wd.want(task.Done, "bug", testLabels.Done)
	})
	t.Run("thanks, labels refused", func(t *testing.T) {
		wd := start(t)
		wd.gh.Inject(forgetest.Fault{Method: "DELETE", Path: "awaiting", Status: 500})
		reply(wd, "thanks")
		wd.want(task.Awaiting, "bug", testLabels.Awaiting, testLabels.Done)
		if _, err := wd.w.Replies(t.Context()); err != nil {
			t.Fatal(err)
		}
		wd.want(task.Done, "bug", testLabels.Done)
	})
	t.Run("timeout", func(t *testing.T) {
		wd := start(t)
		wd.now = wd.now.Add(59 * time.Minute)
		if _, err := wd.w.Replies(t.Context()); err != nil {
			t.Fatal(err)
		}
		wd.want(task.Awaiting, "bug", testLabels.Awaiting)
		wd.now = wd.now.Add(2 * time.Minute)
		if _, err := wd.w.Replies(t.Context()); err != nil {
			t.Fatal(err)
		}
		wd.want(task.Done, "bug", testLabels.Done)
	})
	t.Run("closed", func(t *testing.T) {
		wd := start(t)
		wd.gh.SetState(wd.ref.Repo, wd.ref.Number, "closed")
		if _, err := wd.w.Replies(t.Context()); err != nil {
			t.Fatal(err)
		}
		wd.want(task.Done, "bug", testLabels.Done)
	})
}

// During a shutdown, a run that ends on a system error (the model answering
// 502 within the grace) is left to resume, as an interrupted one is: not
// failed.
func TestSystemErrorDuringShutdownResumes(t *testing.T) {
	wd := newWorld(t, false)
	shutdown := make(chan struct{})
	wd.w.o.Shutdown = shutdown
	wd.claim()
	close(shutdown)
	wd.run.err = errors.New("model request 3: 502 bad gateway")
	wd.w.Process(t.Context(), wd.ref)
	wd.want(task.Queued, "bug", testLabels.Processing)
	if !wd.checkpoint() {
		t.Error("the checkpoint was dropped")
	}
}

// An outcome the worker does not know is a failure, never a task left
// running without a status.
func TestUnknownOutcomeFails(t *testing.T) {
	wd := newWorld(t, false)
	wd.claim()
	wd.run.out = engine.Outcome{}
	wd.w.Process(t.Context(), wd.ref)
	wd.want(task.Failed, "bug", testLabels.Failed)
}

// The bot label counts as a request only from someone trusted (write
// access, the allow list, or the bot's own user for the operator's
// commands). An outsider's label is removed and one comment says why;
// nothing is claimed or recorded, and later passes post nothing more.
func TestLabelFromAnOutsiderIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		labeler string
		setup   func(wd *world)
		trust   *watch.Trust // nil: the defaults
		refused bool
	}{
		{name: "outsider", labeler: "mallory", refused: true},
		{name: "outsider, trusted repository", labeler: "mallory", trust: &watch.Trust{HearAuthor: true}},
		{name: "writer", labeler: "carol", setup: func(wd *world) { wd.gh.SetPermission("acme/app", "carol", "write") }},
		{name: "triage is not write", labeler: "tri", refused: true,
			setup: func(wd *world) { wd.gh.SetPermission("acme/app", "tri", "triage") }},
		{name: "allow list", labeler: "dave", trust: &watch.Trust{Allowed: []string{"Dave"}, LabelerNeedsWrite: true}},
		{name: "owner", labeler: "acme"},
		{name: "the bot's own user", labeler: "coding-agent-bot"},
		{name: "the author without access", labeler: "alice", refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd := newWorld(t, false)
			if tc.setup != nil {
				tc.setup(wd)
			}
			if tc.trust != nil {
				wd.w.o.Trust = *tc.trust
			}
			wd.gh.RemoveLabelDirect(wd.ref.Repo, wd.ref.Number, testLabels.Bot)
			wd.gh.AddLabelBy(wd.ref.Repo, wd.ref.Number, testLabels.Bot, tc.labeler)
			n, err := wd.w.Produce(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if !tc.refused {
				if n != 1 {
					t.Fatalf("%d claimed, want 1", n)
				}
				wd.want(task.Queued, "bug", testLabels.Processing)
				return
			}
			if n != 0 {
				t.Fatalf("%d claimed, want 0", n)
			}
			if _, err := wd.st.Get(t.Context(), wd.ref); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the store holds the refused task: %v", err)
			}
			if got := wd.labels(); !slices.Equal(got, []string{"bug"}) {
				t.Errorf("labels %q, want only bug", got)
			}
			for range 2 { // later passes find nothing to refuse again
				if n, err := wd.w.Produce(t.Context()); err != nil || n != 0 {
					t.Fatalf("a later pass: %d claimed, %v", n, err)
				}
			}
			cs := wd.comments()
			if len(cs) != 1 || !strings.Contains(cs[0], "@"+tc.labeler) || !strings.Contains(cs[0], "no write access") {
				t.Errorf("comments %q, want one saying @%s has no write access", cs, tc.labeler)
			}
			if wd.run.runs != 0 {
				t.Errorf("the agent ran %d times", wd.run.runs)
			}
		})
	}
}
