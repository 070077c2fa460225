package worker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	ghforge "github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/watch"
)

// host is another host watching wd's repository: its own forge client and
// its own SQLite store, no store shared with wd.
func (wd *world) host(t *testing.T, name string) (*Worker, *sqlite.Store) {
	t.Helper()
	f, err := ghforge.New(ghforge.Options{APIURL: wd.gh.URL(), Token: wd.gh.Token, Repositories: []string{"acme/app"},
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w := New(Options{Forge: f, Store: st, Agent: &fakeRunner{st: st}, Labels: testLabels, BotName: wd.gh.BotLogin,
		Owner: store.Owner{Host: name, PID: 1}, Trust: watch.Trust{HearAuthor: true, LabelerNeedsWrite: true},
		Conversation: Conversation{Enabled: true, Keywords: []string{"thanks"}, Timeout: time.Hour, MaxRounds: 2},
		Now:          func() time.Time { return wd.now }})
	return w, st
}

// A host that read the task before another took it loses the take: it
// does not run the task, leaves the winner's processing label, posts
// nothing and has no row in its store.
func TestLoserOfTheTakeLeavesNoTrace(t *testing.T) {
	wd := newWorld(t, false)
	loser, lst := wd.host(t, "b")
	seen, err := wd.w.o.Forge.Get(t.Context(), wd.ref) // what the loser read before the winner took it
	if err != nil {
		t.Fatal(err)
	}
	wd.claim()
	ok, err := loser.take(t.Context(), seen, claimed, task.Failed)
	if err != nil || ok {
		t.Fatalf("loser's take: %v, %v; want false, nil", ok, err)
	}
	wd.want(task.Queued, "bug", testLabels.Processing)
	if c := wd.comments(); len(c) != 0 {
		t.Errorf("comments %q, want none", c)
	}
	if _, err := lst.Get(t.Context(), wd.ref); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("loser's store has the task (%v), want no row", err)
	}
	if n, err := loser.Backlog(t.Context()); err != nil || n != 0 {
		t.Errorf("loser's backlog: %d, %v; want nothing to resume", n, err)
	}
}

// Hosts with stores of their own polling at once: each task is claimed by
// exactly one of them, and the replies of an awaiting task too.
// A host that read the task before another took it, ran and finished it,
// loses the take and takes back the processing label it added: a done task
// does not say processing.
func TestLoserAfterTheWinnerFinishedLeavesNoLabel(t *testing.T) {
	wd := newWorld(t, false)
	wd.run.out = engine.Outcome{End: engine.Done, Summary: "did it"}
	loser, _ := wd.host(t, "b")
	seen, err := wd.w.o.Forge.Get(t.Context(), wd.ref)
	if err != nil {
		t.Fatal(err)
	}
	wd.claim()
	if err := wd.w.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	wd.want(task.Done, "bug", testLabels.Done)
	ok, err := loser.take(t.Context(), seen, claimed, task.Failed)
	if err != nil || ok {
		t.Fatalf("loser's take: %v, %v; want false, nil", ok, err)
	}
	wd.want(task.Done, "bug", testLabels.Done)
}

func TestConcurrentHostsClaimEachTaskOnce(t *testing.T) {
	wd := newWorld(t, false)
	for range 9 {
		wd.gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "more", Author: "alice", Labels: []string{testLabels.Bot}})
	}
	const hosts = 4
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		total  int
		stores []*sqlite.Store
	)
	for i := range hosts {
		w, st := wd.host(t, string(rune('a'+i)))
		stores = append(stores, st)
		wg.Go(func() {
			n, err := w.Produce(t.Context())
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if total != 10 {
		t.Errorf("%d claims for 10 tasks", total)
	}
	held := map[task.Ref]int{}
	for _, st := range stores {
		recs, err := st.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Status != task.Queued {
				t.Errorf("%s: %s in a store, want only queued rows", r.Ref, r.Status)
			}
			held[r.Ref]++
		}
	}
	for ref, n := range held {
		if n != 1 {
			t.Errorf("%s held in %d stores", ref, n)
		}
		if l := wd.gh.Labels(ref.Repo, ref.Number); !slices.Equal(l, []string{testLabels.Processing}) &&
			!slices.Equal(l, []string{"bug", testLabels.Processing}) {
			t.Errorf("%s labels %q", ref, l)
		}
	}
	if len(held) != 10 {
		t.Errorf("%d tasks held, want 10", len(held))
	}
}

// A paused task is resumed by asking again (the bot adds the bot label),
// by the host that paused it last: of two hosts whose stores both say
// paused, polling at once, that one resumes it.
func TestResumeIsArbitrated(t *testing.T) {
	wd, other := pausedOnTwoHosts(t)
	var wg sync.WaitGroup
	got := make(chan int, 2)
	for _, w := range []*Worker{wd.w, other} {
		wg.Go(func() {
			n, err := w.Produce(t.Context())
			if err != nil {
				t.Error(err)
			}
			got <- n
		})
	}
	wg.Wait()
	close(got)
	sum := 0
	for n := range got {
		sum += n
	}
	if sum != 1 {
		t.Errorf("%d hosts resumed the task, want 1", sum)
	}
	if rec, err := wd.st.Get(t.Context(), wd.ref); err != nil || rec.Status != task.Queued {
		t.Errorf("the host that paused it last: %+v, %v; want it queued there", rec, err)
	}
	if l := wd.labels(); !slices.Equal(l, []string{"agent processing", "bug"}) {
		t.Errorf("labels %q", l)
	}
	// One after the other: the second sees the task taken up (processing),
	// and once it is done, its stale paused row resumes nothing.
	for _, w := range []*Worker{wd.w, other} {
		if n, err := w.Produce(t.Context()); err != nil || n != 0 {
			t.Errorf("a later pass: %d, %v; want nothing claimed", n, err)
		}
	}
	wd.gh.RemoveLabelDirect(wd.ref.Repo, wd.ref.Number, testLabels.Processing)
	wd.gh.AddLabelDirect(wd.ref.Repo, wd.ref.Number, testLabels.Done)
	for _, w := range []*Worker{wd.w, other} {
		if n, err := w.Produce(t.Context()); err != nil || n != 0 {
			t.Errorf("a pass after the task was done: %d, %v; want nothing claimed", n, err)
		}
	}
}

// A reply judged by two hosts (both stores await it) starts one round: the
// loser's row still awaits, and it posts nothing.
func TestLoserOfAReplyLeavesItsRowAwaiting(t *testing.T) {
	wd := newWorld(t, true)
	wd.claim()
	wd.run.out = engine.Outcome{End: engine.Done, Comment: "done", Summary: "wrote the file"}
	if err := wd.w.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	loser, lst := wd.host(t, "b")
	conv, _, err := wd.st.LoadConversation(t.Context(), wd.ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lst.Claim(t.Context(), wd.ref, store.Owner{Host: "b", PID: 1}); err != nil {
		t.Fatal(err)
	}
	if err := lst.SetStatus(t.Context(), wd.ref, task.Awaiting, ""); err != nil {
		t.Fatal(err)
	}
	if err := lst.SaveConversation(t.Context(), wd.ref, conv); err != nil {
		t.Fatal(err)
	}
	wd.now = wd.now.Add(time.Minute)
	wd.gh.AddComment(wd.ref.Repo, wd.ref.Number, "alice", "Please add a second file.")
	seen, err := wd.w.o.Forge.Get(t.Context(), wd.ref)
	if err != nil {
		t.Fatal(err)
	}
	before := len(wd.comments())
	if n, err := wd.w.Replies(t.Context()); err != nil || n != 1 {
		t.Fatalf("winner's replies: %d, %v", n, err)
	}
	if ok, err := loser.take(t.Context(), seen, replied, task.Awaiting); err != nil || ok {
		t.Fatalf("loser's take: %v, %v; want false, nil", ok, err)
	}
	if rec, err := lst.Get(t.Context(), wd.ref); err != nil || rec.Status != task.Awaiting {
		t.Errorf("loser's row %+v, %v; want still awaiting", rec, err)
	}
	if n, err := loser.Replies(t.Context()); err != nil || n != 0 {
		t.Errorf("loser's next pass: %d, %v; want nothing started", n, err)
	}
	// Past the conversation's timeout, with no reply it has not judged, the
	// loser's row, behind, ends nothing.
	conv.Mark = 1 << 40
	if err := lst.SaveConversation(t.Context(), wd.ref, conv); err != nil {
		t.Fatal(err)
	}
	wd.now = wd.now.Add(2 * time.Hour)
	if n, err := loser.Replies(t.Context()); err != nil || n != 0 {
		t.Errorf("loser's pass after the timeout: %d, %v", n, err)
	}
	if c := wd.comments(); len(c) != before {
		t.Errorf("comments %q: the loser posted", c[before:])
	}
	wd.want(task.Queued, "bug", testLabels.Processing)
}

// A take the forge does not answer (5xx on the removal) may have been
// another host's win: the producer records nothing and the next pass
// tries again.
func TestFailedTakeRecordsNothing(t *testing.T) {
	wd := newWorld(t, false)
	wd.gh.Inject(forgetest.Fault{Method: "DELETE", Path: "/labels/agent", Status: 502}) // this client does not retry
	if n, err := wd.w.Produce(t.Context()); err != nil || n != 0 {
		t.Fatalf("produce: %d, %v", n, err)
	}
	if _, err := wd.st.Get(t.Context(), wd.ref); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a row after a failed take (%v), want none", err)
	}
	if c := wd.comments(); len(c) != 0 {
		t.Errorf("comments %q", c)
	}
	wd.claim()
	wd.want(task.Queued, "bug", testLabels.Processing)
}

// The race TestResumeIsArbitrated can lose under load, made certain: the
// host that paused the task last has already asked again (the bot added
// the bot label) when the other host, whose store says paused from an
// earlier pause, reads the task. The other host leaves it; the host that
// paused it last resumes it.
func TestResumeAskedAgainIsLeftToItsHost(t *testing.T) {
	wd, other := pausedOnTwoHosts(t)
	if err := wd.w.o.Forge.AddLabel(t.Context(), wd.ref, testLabels.Bot); err != nil { // "test" asks again
		t.Fatal(err)
	}
	if n, err := other.Produce(t.Context()); err != nil || n != 0 {
		t.Fatalf("the other host: %d claimed, %v; want the task left to the host that paused it last", n, err)
	}
	if n, err := wd.w.Produce(t.Context()); err != nil || n != 1 {
		t.Fatalf("the host that paused it last: %d claimed, %v", n, err)
	}
	if rec, err := wd.st.Get(t.Context(), wd.ref); err != nil || rec.Status != task.Queued {
		t.Errorf("the host that paused it last: %+v, %v; want it queued there", rec, err)
	}
}

// pausedOnTwoHosts is a task both hosts' stores say paused ("test", this
// world's, and "b"), paused by b once and then by test, last, the bot label
// gone: removing the paused label resumes it.
func pausedOnTwoHosts(t *testing.T) (*world, *Worker) {
	wd := newWorld(t, false)
	other, ost := wd.host(t, "b")
	for _, st := range []store.Store{wd.st, ost} {
		if _, err := st.Claim(t.Context(), wd.ref, store.Owner{Host: "x", PID: 1}); err != nil {
			t.Fatal(err)
		}
		if err := st.SetStatus(t.Context(), wd.ref, task.Paused, ""); err != nil {
			t.Fatal(err)
		}
	}
	wd.gh.RemoveLabelDirect(wd.ref.Repo, wd.ref.Number, testLabels.Bot)
	for _, host := range []string{"b", "test"} {
		body, err := report.English.Paused(1, "the paused label was added", testLabels.Paused, testLabels.Bot, host)
		if err != nil {
			t.Fatal(err)
		}
		wd.gh.AddComment(wd.ref.Repo, wd.ref.Number, wd.gh.BotLogin, body)
	}
	return wd, other
}
