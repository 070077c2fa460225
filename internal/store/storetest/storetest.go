// Package storetest is the conformance suite every store.Store backend must
// pass. A backend's test calls Run with a function that opens an empty store.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Run runs the suite. open must return a new, empty store on every call; the
// suite closes it when the subtest ends, possibly after the subtest already
// closed it, so Close must tolerate a second call.
//
// The backend must judge liveness with this machine's os.Hostname and process
// table: the suite claims as the current process (alive) and as a reaped child
// process (dead).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"ClaimNew", testClaimNew},
		{"ClaimHeld", testClaimHeld},
		{"ReclaimAfterStatus", testReclaimAfterStatus},
		{"DeadOwnerTakeover", testDeadOwnerTakeover},
		{"ConcurrentClaim", testConcurrentClaim},
		{"LeaseLapses", testLeaseLapses},
		{"TakeOver", testTakeOver},
		{"ClaimQueued", testClaimQueued},
		{"Attempts", testAttempts},
		{"Renew", testRenew},
		{"Release", testRelease},
		{"FencedCheckpoint", testFencedCheckpoint},
		{"SetStatus", testSetStatus},
		{"ConcurrentCounters", testConcurrentCounters},
		{"List", testList},
		{"Checkpoint", testCheckpoint},
		{"Conversation", testConversation},
		{"ConversationOutlivesRound", testConversationOutlivesRound},
		{"ConcurrentConversations", testConcurrentConversations},
		{"Events", testEvents},
		{"NotFound", testNotFound},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close at cleanup: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// ignoreTimes leaves CreatedAt/UpdatedAt to the checks that are about them.
var ignoreTimes = cmpopts.IgnoreTypes(time.Time{})

// Ref returns a distinct issue ref for n.
func Ref(n int) task.Ref {
	return task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n}
}

// LiveOwner is an owner that is this (running) process on this host.
func LiveOwner(t *testing.T, model string) store.Owner {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatalf("hostname: %v", err)
	}
	return store.Owner{Host: host, PID: os.Getpid(), Instance: "this-process", Provider: "openai", Model: model, Lease: time.Hour}
}

// DeadOwner is an owner on this host whose process has exited: the PID of a
// child that was started and reaped.
func DeadOwner(t *testing.T) store.Owner {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("running a short-lived child: %v", err)
	}
	o := LiveOwner(t, "dead-model")
	o.PID = cmd.Process.Pid
	return o
}

func mustClaim(t *testing.T, s store.Store, ref task.Ref, o store.Owner) store.Record {
	t.Helper()
	rec, err := s.Claim(t.Context(), ref, o)
	if err != nil {
		t.Fatalf("Claim(%s, %+v): %v", ref, o, err)
	}
	return rec
}

func mustGet(t *testing.T, s store.Store, ref task.Ref) store.Record {
	t.Helper()
	rec, err := s.Get(t.Context(), ref)
	if err != nil {
		t.Fatalf("Get(%s): %v", ref, err)
	}
	return rec
}

func testClaimNew(t *testing.T, s store.Store) {
	ref := task.Ref{Forge: task.GitLab, Repo: "group/sub/app", Kind: task.MergeRequest, Number: 7}
	owner := LiveOwner(t, "m1")
	rec := mustClaim(t, s, ref, owner)
	want := store.Record{Ref: ref, Status: task.Running, Host: owner.Host, PID: owner.PID, Instance: owner.Instance,
		Provider: owner.Provider, Model: owner.Model}
	if diff := cmp.Diff(want, rec, ignoreTimes); diff != "" {
		t.Errorf("Claim record (-want +got):\n%s", diff)
	}
	if rec.CreatedAt.IsZero() || rec.UpdatedAt.IsZero() {
		t.Errorf("Claim times not set: created %v updated %v", rec.CreatedAt, rec.UpdatedAt)
	}
	if rec.CreatedAt.Location() != time.UTC || rec.UpdatedAt.Location() != time.UTC {
		t.Errorf("Claim times not UTC: %v, %v", rec.CreatedAt.Location(), rec.UpdatedAt.Location())
	}
	if got := mustGet(t, s, ref); !cmp.Equal(rec, got) {
		t.Errorf("Get after Claim differs (-claim +get):\n%s", cmp.Diff(rec, got))
	}
}

func testClaimHeld(t *testing.T, s store.Store) {
	ref := Ref(1)
	first := mustClaim(t, s, ref, LiveOwner(t, "m1"))
	// The same live process (another goroutine, another worker) is refused too.
	if _, err := s.Claim(t.Context(), ref, LiveOwner(t, "m2")); !errors.Is(err, store.ErrClaimed) {
		t.Fatalf("Claim of a task held by a live process: err = %v, want ErrClaimed", err)
	}
	if got := mustGet(t, s, ref); !cmp.Equal(first, got) {
		t.Errorf("refused Claim changed the row (-before +after):\n%s", cmp.Diff(first, got))
	}
	// A holder on another host cannot be probed: its lease holds, even with a dead PID.
	other := DeadOwner(t)
	other.Host = "elsewhere.invalid"
	mustClaim(t, s, Ref(2), other)
	if _, err := s.Claim(t.Context(), Ref(2), LiveOwner(t, "m1")); !errors.Is(err, store.ErrClaimed) {
		t.Fatalf("Claim of a task held on another host: err = %v, want ErrClaimed", err)
	}
}

func testReclaimAfterStatus(t *testing.T, s store.Store) {
	statuses := []task.Status{task.Done, task.Failed, task.Stopped, task.Awaiting, task.Queued, task.Paused}
	for i, st := range statuses {
		ref := Ref(100 + i)
		mustClaim(t, s, ref, LiveOwner(t, "m1"))
		delta := store.Counters{LLMCalls: 1, ToolCalls: 2, TokensIn: 30, TokensOut: 4}
		if err := s.AddCounters(t.Context(), ref, delta); err != nil {
			t.Fatalf("AddCounters: %v", err)
		}
		if err := s.SetStatus(t.Context(), ref, st, "boom"); err != nil {
			t.Fatalf("SetStatus(%s): %v", st, err)
		}
		next := LiveOwner(t, "m2")
		next.Provider = "ollama"
		rec, err := s.Claim(t.Context(), ref, next)
		if err != nil {
			t.Fatalf("Claim after %s: %v", st, err)
		}
		want := store.Record{Ref: ref, Status: task.Running, Host: next.Host, PID: next.PID, Instance: next.Instance,
			Provider: "ollama", Model: "m2", Counters: delta}
		if diff := cmp.Diff(want, rec, ignoreTimes); diff != "" {
			t.Errorf("Claim after %s (-want +got):\n%s", st, diff)
		}
		if got := mustGet(t, s, ref); !cmp.Equal(rec, got) {
			t.Errorf("Get after reclaim differs from Claim's record (-claim +get):\n%s", cmp.Diff(rec, got))
		}
	}
}

func testDeadOwnerTakeover(t *testing.T, s store.Store) {
	ref := Ref(3)
	dead := DeadOwner(t)
	mustClaim(t, s, ref, dead)
	live := LiveOwner(t, "m2")
	rec, err := s.Claim(t.Context(), ref, live)
	if err != nil {
		t.Fatalf("Claim of a task held by dead pid %d: %v", dead.PID, err)
	}
	if rec.PID != live.PID || rec.Model != "m2" || rec.Status != task.Running {
		t.Errorf("after takeover: pid %d model %q status %s, want pid %d model m2 running",
			rec.PID, rec.Model, rec.Status, live.PID)
	}
}

func testConcurrentClaim(t *testing.T, s store.Store) {
	const n = 8
	ref := Ref(4)
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = s.Claim(t.Context(), ref, LiveOwner(t, fmt.Sprintf("m%d", i)))
		})
	}
	close(start)
	wg.Wait()
	wins := 0
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, store.ErrClaimed):
			t.Errorf("claimer %d: err = %v, want nil or ErrClaimed", i, err)
		}
	}
	if wins != 1 {
		t.Errorf("%d of %d concurrent claims won, want exactly 1", wins, n)
	}
}

func testSetStatus(t *testing.T, s store.Store) {
	ref := Ref(5)
	claimed := mustClaim(t, s, ref, LiveOwner(t, "m1"))
	if err := s.SetStatus(t.Context(), ref, task.Failed, "model unreachable"); err != nil {
		t.Fatalf("SetStatus failed: %v", err)
	}
	rec := mustGet(t, s, ref)
	if rec.Status != task.Failed || rec.Error != "model unreachable" {
		t.Errorf("after SetStatus(failed): status %s error %q", rec.Status, rec.Error)
	}
	if rec.UpdatedAt.Before(claimed.UpdatedAt) || !rec.CreatedAt.Equal(claimed.CreatedAt) {
		t.Errorf("times after SetStatus: created %v (was %v), updated %v (was %v)",
			rec.CreatedAt, claimed.CreatedAt, rec.UpdatedAt, claimed.UpdatedAt)
	}
	if rec.Host != claimed.Host || rec.PID != claimed.PID {
		t.Errorf("SetStatus changed the owner: %s/%d", rec.Host, rec.PID)
	}
	if err := s.SetStatus(t.Context(), ref, task.Awaiting, "ignored"); err != nil {
		t.Fatalf("SetStatus awaiting: %v", err)
	}
	rec = mustGet(t, s, ref)
	if rec.Status != task.Awaiting || rec.Error != "" {
		t.Errorf("after SetStatus(awaiting): status %s error %q, want awaiting and no error", rec.Status, rec.Error)
	}
}

func testConcurrentCounters(t *testing.T, s store.Store) {
	ref := Ref(6)
	mustClaim(t, s, ref, LiveOwner(t, "m1"))
	const workers, each = 8, 10
	delta := store.Counters{LLMCalls: 1, ToolCalls: 2, TokensIn: 100, TokensOut: 7}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if err := s.AddCounters(t.Context(), ref, delta); err != nil {
					t.Errorf("AddCounters: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	k := workers * each
	want := store.Counters{LLMCalls: k, ToolCalls: 2 * k, TokensIn: 100 * k, TokensOut: 7 * k}
	if got := mustGet(t, s, ref).Counters; got != want {
		t.Errorf("counters = %+v, want %+v", got, want)
	}
}

func testList(t *testing.T, s store.Store) {
	got, err := s.List(t.Context())
	if err != nil || len(got) != 0 {
		t.Fatalf("List of an empty store = %v, %v; want no rows", got, err)
	}
	a, b, c := Ref(10), Ref(11), Ref(12)
	for _, r := range []task.Ref{a, b, c} {
		mustClaim(t, s, r, LiveOwner(t, "m1"))
	}
	if err := s.SetStatus(t.Context(), b, task.Done, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.AddCounters(t.Context(), a, store.Counters{LLMCalls: 1}); err != nil {
		t.Fatal(err)
	}
	got, err = s.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var refs []task.Ref
	for _, r := range got {
		refs = append(refs, r.Ref)
	}
	if diff := cmp.Diff([]task.Ref{a, b, c}, refs); diff != "" {
		t.Errorf("List order, most recently updated first (-want +got):\n%s", diff)
	}
	for _, r := range got {
		if g := mustGet(t, s, r.Ref); !cmp.Equal(g, r) {
			t.Errorf("List row differs from Get (-get +list):\n%s", cmp.Diff(g, r))
		}
	}
}

func testCheckpoint(t *testing.T, s store.Store) {
	ref := Ref(7)
	mustClaim(t, s, ref, LiveOwner(t, "m1"))
	ctx := t.Context()
	if _, ok, err := s.LoadCheckpoint(ctx, ref); err != nil || ok {
		t.Fatalf("LoadCheckpoint before any save: ok=%v err=%v, want ok=false", ok, err)
	}
	at := time.Date(2026, 3, 1, 12, 30, 45, 123456000, time.UTC)
	cp1 := store.Checkpoint{Step: 1, Data: []byte(`{"messages":[1]}`), CreatedAt: at}
	if err := s.SaveCheckpoint(ctx, ref, cp1); err != nil {
		t.Fatalf("SaveCheckpoint: %v", err)
	}
	loadEqual(t, s, ref, cp1)
	cp2 := store.Checkpoint{Step: 2, Data: []byte{0, 1, 2, 0xff}, CreatedAt: at.Add(time.Second)}
	if err := s.SaveCheckpoint(ctx, ref, cp2); err != nil {
		t.Fatalf("SaveCheckpoint replacing: %v", err)
	}
	loadEqual(t, s, ref, cp2)

	// Another task's checkpoint is its own.
	other := Ref(8)
	mustClaim(t, s, other, LiveOwner(t, "m1"))
	if err := s.SaveCheckpoint(ctx, other, store.Checkpoint{Step: 9, Data: []byte("x")}); err != nil {
		t.Fatalf("SaveCheckpoint without time: %v", err)
	}
	got, ok, err := s.LoadCheckpoint(ctx, other)
	if err != nil || !ok || got.Step != 9 || got.CreatedAt.IsZero() {
		t.Errorf("LoadCheckpoint(other) = %+v, %v, %v; want step 9 with a creation time", got, ok, err)
	}
	loadEqual(t, s, ref, cp2)

	if err := s.ClearCheckpoint(ctx, ref); err != nil {
		t.Fatalf("ClearCheckpoint: %v", err)
	}
	if _, ok, err := s.LoadCheckpoint(ctx, ref); err != nil || ok {
		t.Errorf("LoadCheckpoint after clear: ok=%v err=%v, want ok=false", ok, err)
	}
	if err := s.ClearCheckpoint(ctx, ref); err != nil {
		t.Errorf("ClearCheckpoint without a checkpoint: %v", err)
	}
	if _, ok, _ := s.LoadCheckpoint(ctx, other); !ok {
		t.Errorf("clearing one task's checkpoint cleared another's")
	}
}

func loadEqual(t *testing.T, s store.Store, ref task.Ref, want store.Checkpoint) {
	t.Helper()
	got, ok, err := s.LoadCheckpoint(t.Context(), ref)
	if err != nil || !ok {
		t.Fatalf("LoadCheckpoint: ok=%v err=%v", ok, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadCheckpoint (-want +got):\n%s", diff)
	}
}

func testNotFound(t *testing.T, s store.Store) {
	ctx, ref := t.Context(), Ref(404)
	mustClaim(t, s, Ref(1), LiveOwner(t, "m1")) // a store that is not empty
	checks := map[string]error{}
	_, checks["Get"] = s.Get(ctx, ref)
	checks["SetStatus"] = s.SetStatus(ctx, ref, task.Done, "")
	checks["AddCounters"] = s.AddCounters(ctx, ref, store.Counters{LLMCalls: 1})
	checks["SaveCheckpoint"] = s.SaveCheckpoint(ctx, ref, store.Checkpoint{Step: 1, Data: []byte("x")})
	_, _, checks["LoadCheckpoint"] = s.LoadCheckpoint(ctx, ref)
	checks["ClearCheckpoint"] = s.ClearCheckpoint(ctx, ref)
	checks["SaveConversation"] = s.SaveConversation(ctx, ref, store.Conversation{Round: 1, Summaries: []string{"x"}})
	_, _, checks["LoadConversation"] = s.LoadConversation(ctx, ref)
	for name, err := range checks {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s on an unknown task: err = %v, want ErrNotFound", name, err)
		}
	}
	recs, err := s.List(ctx)
	if err != nil || len(recs) != 1 {
		t.Errorf("calls on an unknown task created rows: %d rows, err %v", len(recs), err)
	}
}

func testClose(t *testing.T, s store.Store) {
	mustClaim(t, s, Ref(1), LiveOwner(t, "m1"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := s.Get(t.Context(), Ref(1))
	if err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after Close: err = %v, want a closed-store error", err)
	}
}

// otherHost is an owner on another host (its process cannot be probed)
// whose claims hold for lease.
func otherHost(t *testing.T, instance string, lease time.Duration) store.Owner {
	o := LiveOwner(t, "m-"+instance)
	o.Host, o.PID, o.Instance, o.Lease = "elsewhere.invalid", 1, instance, lease
	return o
}

// lapse waits until a lease of d taken now has lapsed.
func lapse(d time.Duration) { time.Sleep(d + 20*time.Millisecond) }

func testLeaseLapses(t *testing.T, s store.Store) {
	ref := Ref(20)
	held := mustClaim(t, s, ref, otherHost(t, "a", 50*time.Millisecond))
	if held.Instance != "a" || !held.LeaseUntil.After(held.UpdatedAt) {
		t.Fatalf("claim record: instance %q lease until %v (updated %v)", held.Instance, held.LeaseUntil, held.UpdatedAt)
	}
	if _, err := s.Claim(t.Context(), ref, otherHost(t, "b", time.Hour)); !errors.Is(err, store.ErrClaimed) {
		t.Fatalf("Claim within another host's lease: err = %v, want ErrClaimed", err)
	}
	lapse(50 * time.Millisecond)
	rec, err := s.Claim(t.Context(), ref, otherHost(t, "b", time.Hour))
	if err != nil {
		t.Fatalf("Claim after the lease lapsed: %v", err)
	}
	if rec.Instance != "b" || rec.Status != task.Running || time.Until(rec.LeaseUntil) < 30*time.Minute {
		t.Errorf("after the lapse: instance %q status %s lease until %v", rec.Instance, rec.Status, rec.LeaseUntil)
	}
}

// ClaimQueued takes a queued task, or a running one whose holder no longer
// holds it; never a finished one, which Claim would take.
func testClaimQueued(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.ClaimQueued(ctx, Ref(50), otherHost(t, "b", time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ClaimQueued of an unknown task: %v, want ErrNotFound", err)
	}
	mustClaim(t, s, Ref(51), otherHost(t, "a", time.Hour))
	if _, err := s.ClaimQueued(ctx, Ref(51), otherHost(t, "b", time.Hour)); !errors.Is(err, store.ErrClaimed) {
		t.Errorf("ClaimQueued within the holder's lease: %v, want ErrClaimed", err)
	}
	for i, st := range []task.Status{task.Done, task.Failed, task.Awaiting, task.Paused, task.Stopped} {
		ref := Ref(60 + i)
		mustClaim(t, s, ref, otherHost(t, "a", time.Hour))
		if err := s.SetStatus(ctx, ref, st, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ClaimQueued(ctx, ref, otherHost(t, "b", time.Hour)); !errors.Is(err, store.ErrNotHeld) {
			t.Errorf("ClaimQueued of a %s task: %v, want ErrNotHeld", st, err)
		}
		if got := mustGet(t, s, ref); got.Status != st || got.Instance != "a" {
			t.Errorf("refused ClaimQueued changed a %s task: %+v", st, got)
		}
	}
	mustClaim(t, s, Ref(52), otherHost(t, "a", time.Hour))
	if err := s.SetStatus(ctx, Ref(52), task.Queued, ""); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.ClaimQueued(ctx, Ref(52), otherHost(t, "b", time.Hour)); err != nil || rec.Status != task.Running || rec.Instance != "b" {
		t.Errorf("ClaimQueued of a queued task: %+v, %v; want it running under b", rec, err)
	}
	mustClaim(t, s, Ref(53), otherHost(t, "a", time.Millisecond))
	lapse(time.Millisecond)
	if rec, err := s.ClaimQueued(ctx, Ref(53), otherHost(t, "b", time.Hour)); err != nil || rec.Instance != "b" {
		t.Errorf("ClaimQueued of a running task whose lease lapsed: %+v, %v; want it running under b", rec, err)
	}
}

// Attempts counts the runs a round began: each ClaimQueued, whether of a
// queued task or of one whose holder died, adds one; a takeover adds none
// (the run it queues is counted when it is claimed); a refused claim
// changes nothing; Claim starts a new round at 0.
func testAttempts(t *testing.T, s store.Store) {
	ctx := t.Context()
	ref := Ref(80)
	attempts := func() int { t.Helper(); return mustGet(t, s, ref).Attempts }
	if rec := mustClaim(t, s, ref, otherHost(t, "a", time.Hour)); rec.Attempts != 0 {
		t.Fatalf("a new round's attempts: %d, want 0", rec.Attempts)
	}
	if err := s.SetStatus(ctx, ref, task.Queued, ""); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.ClaimQueued(ctx, ref, otherHost(t, "a", time.Millisecond)); err != nil || rec.Attempts != 1 {
		t.Fatalf("first run: %+v, %v; want attempt 1", rec, err)
	}
	lapse(time.Millisecond) // the run's process died
	if rec, err := s.ClaimQueued(ctx, ref, otherHost(t, "b", time.Hour)); err != nil || rec.Attempts != 2 {
		t.Fatalf("the job delivered again: %+v, %v; want attempt 2", rec, err)
	}
	if _, err := s.ClaimQueued(ctx, ref, otherHost(t, "c", time.Hour)); !errors.Is(err, store.ErrClaimed) || attempts() != 2 {
		t.Fatalf("a refused ClaimQueued: %v, attempts %d; want ErrClaimed and 2", err, attempts())
	}
	if _, err := s.Release(ctx, ref); err != nil { // b's run is released, to be taken over
		t.Fatal(err)
	}
	prev, err := s.TakeOver(ctx, ref, otherHost(t, "d", time.Hour))
	if err != nil || prev.Attempts != 2 || attempts() != 2 {
		t.Fatalf("TakeOver: %+v, %v, attempts %d; want the record before at 2, and 2 after", prev, err, attempts())
	}
	if err := s.SetStatus(ctx, ref, task.Queued, ""); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.ClaimQueued(ctx, ref, otherHost(t, "d", time.Hour)); err != nil || rec.Attempts != 3 {
		t.Fatalf("the run the takeover queued: %+v, %v; want attempt 3", rec, err)
	}
	if err := s.SetStatus(ctx, ref, task.Failed, "given up"); err != nil {
		t.Fatal(err)
	}
	if rec := mustClaim(t, s, ref, otherHost(t, "e", time.Hour)); rec.Attempts != 0 {
		t.Errorf("the next round's attempts: %d, want 0", rec.Attempts)
	}
}

func testTakeOver(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.TakeOver(ctx, Ref(30), otherHost(t, "b", time.Hour)); !errors.Is(err, store.ErrNotHeld) {
		t.Errorf("TakeOver of an unknown task: %v, want ErrNotHeld", err)
	}
	mustClaim(t, s, Ref(31), otherHost(t, "a", time.Hour))
	if _, err := s.TakeOver(ctx, Ref(31), otherHost(t, "b", time.Hour)); !errors.Is(err, store.ErrClaimed) {
		t.Errorf("TakeOver within the lease: %v, want ErrClaimed", err)
	}
	for i, st := range []task.Status{task.Queued, task.Done, task.Failed, task.Awaiting, task.Paused, task.Stopped} {
		ref := Ref(40 + i)
		mustClaim(t, s, ref, otherHost(t, "a", time.Millisecond))
		if err := s.SetStatus(ctx, ref, st, ""); err != nil {
			t.Fatal(err)
		}
		lapse(time.Millisecond)
		if _, err := s.TakeOver(ctx, ref, otherHost(t, "b", time.Hour)); !errors.Is(err, store.ErrNotHeld) {
			t.Errorf("TakeOver of a %s task: %v, want ErrNotHeld", st, err)
		}
		if got := mustGet(t, s, ref); got.Status != st || got.Instance != "a" {
			t.Errorf("refused TakeOver changed a %s task: %+v", st, got)
		}
	}
	a := otherHost(t, "a", time.Millisecond)
	mustClaim(t, s, Ref(32), a)
	lapse(time.Millisecond)
	prev, err := s.TakeOver(ctx, Ref(32), otherHost(t, "b", time.Hour))
	if err != nil {
		t.Fatalf("TakeOver after the lease lapsed: %v", err)
	}
	if prev.Instance != "a" || prev.Host != a.Host || prev.Status != task.Running {
		t.Errorf("TakeOver returned %+v, want the record as a held it", prev)
	}
	if got := mustGet(t, s, Ref(32)); got.Instance != "b" || got.Status != task.Running {
		t.Errorf("after TakeOver: %+v", got)
	}
	// Of several processes taking over at once, one wins.
	mustClaim(t, s, Ref(33), a)
	lapse(time.Millisecond)
	var wg sync.WaitGroup
	wins := make(chan string, 8)
	for i := range 8 {
		wg.Go(func() {
			id := fmt.Sprintf("c%d", i)
			if _, err := s.TakeOver(ctx, Ref(33), otherHost(t, id, time.Hour)); err == nil {
				wins <- id
			} else if !errors.Is(err, store.ErrClaimed) {
				t.Errorf("concurrent TakeOver: %v", err)
			}
		})
	}
	wg.Wait()
	close(wins)
	var won []string
	for id := range wins {
		won = append(won, id)
	}
	if len(won) != 1 || mustGet(t, s, Ref(33)).Instance != won[0] {
		t.Errorf("concurrent TakeOver winners %q, row held by %q", won, mustGet(t, s, Ref(33)).Instance)
	}
}

func testRenew(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := otherHost(t, "a", 200*time.Millisecond)
	for _, n := range []int{50, 51, 52} {
		mustClaim(t, s, Ref(n), a)
	}
	if err := s.SetStatus(ctx, Ref(52), task.Done, ""); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, Ref(53), otherHost(t, "b", time.Hour))
	before := mustGet(t, s, Ref(50)).LeaseUntil
	a.Lease = time.Hour
	refs, err := s.Renew(ctx, a)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	slices.SortFunc(refs, func(x, y task.Ref) int { return x.Number - y.Number })
	if !slices.Equal(refs, []task.Ref{Ref(50), Ref(51)}) {
		t.Errorf("Renew returned %v, want the two running tasks a holds", refs)
	}
	if after := mustGet(t, s, Ref(50)).LeaseUntil; !after.After(before.Add(30 * time.Minute)) {
		t.Errorf("lease until %v after Renew, was %v", after, before)
	}
	lapse(200 * time.Millisecond)
	if _, err := s.Claim(ctx, Ref(50), otherHost(t, "b", time.Hour)); !errors.Is(err, store.ErrClaimed) {
		t.Errorf("Claim of a renewed task past its first lease: %v, want ErrClaimed", err)
	}
	if refs, err := s.Renew(ctx, otherHost(t, "nobody", time.Hour)); err != nil || len(refs) != 0 {
		t.Errorf("Renew of an instance holding nothing: %v, %v", refs, err)
	}
}

func testRelease(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := otherHost(t, "a", time.Hour)
	mustClaim(t, s, Ref(60), a)
	prev, err := s.Release(ctx, Ref(60))
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	if prev.Instance != "a" {
		t.Errorf("Release returned %+v, want the record as a held it", prev)
	}
	got := mustGet(t, s, Ref(60))
	if got.Instance != "" || !got.LeaseUntil.IsZero() || got.Status != task.Running {
		t.Errorf("after Release: instance %q lease %v status %s, want no holder, still running", got.Instance, got.LeaseUntil, got.Status)
	}
	if refs, err := s.Renew(ctx, a); err != nil || len(refs) != 0 {
		t.Errorf("the old holder's Renew after Release: %v, %v; want nothing", refs, err)
	}
	if _, err := s.TakeOver(ctx, Ref(60), otherHost(t, "b", time.Hour)); err != nil {
		t.Errorf("TakeOver after Release: %v", err)
	}
	mustClaim(t, s, Ref(61), a)
	if err := s.SetStatus(ctx, Ref(61), task.Queued, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, Ref(61)); err != nil {
		t.Errorf("Release of a queued task: %v", err)
	}
	if err := s.SetStatus(ctx, Ref(61), task.Done, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, Ref(61)); !errors.Is(err, store.ErrNotHeld) {
		t.Errorf("Release of a done task: %v, want ErrNotHeld", err)
	}
	if _, err := s.Release(ctx, Ref(62)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Release of an unknown task: %v, want ErrNotFound", err)
	}
}

func testFencedCheckpoint(t *testing.T, s store.Store) {
	ctx, ref := t.Context(), Ref(70)
	mustClaim(t, s, ref, otherHost(t, "a", time.Hour))
	if err := store.HeldBy(s, "a").SaveCheckpoint(ctx, ref, store.Checkpoint{Step: 1, Data: []byte("a1")}); err != nil {
		t.Fatalf("the holder's fenced save: %v", err)
	}
	step := func() int {
		cp, ok, err := s.LoadCheckpoint(ctx, ref)
		if err != nil || !ok {
			t.Fatalf("LoadCheckpoint: %v, %v", ok, err)
		}
		return cp.Step
	}
	if err := s.SaveCheckpoint(ctx, ref, store.Checkpoint{Step: 2, Data: []byte("b"), Holder: "b"}); !errors.Is(err, store.ErrClaimed) {
		t.Errorf("a save fenced by an instance that does not hold the task: %v, want ErrClaimed", err)
	}
	if got := step(); got != 1 {
		t.Errorf("checkpoint step %d after a refused save, want 1", got)
	}
	if _, err := s.Release(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := store.HeldBy(s, "a").SaveCheckpoint(ctx, ref, store.Checkpoint{Step: 3, Data: []byte("a3")}); !errors.Is(err, store.ErrClaimed) {
		t.Errorf("the released holder's save: %v, want ErrClaimed", err)
	}
	if err := s.SaveCheckpoint(ctx, ref, store.Checkpoint{Step: 4, Data: []byte("free")}); err != nil || step() != 4 {
		t.Errorf("an unfenced save: %v, step %d; want it written", err, step())
	}
	if err := store.HeldBy(s, "a").SaveCheckpoint(ctx, Ref(71), store.Checkpoint{Step: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a fenced save for an unknown task: %v, want ErrNotFound", err)
	}
}

// The probe a store is opened with for TakeoverRules: this host's name, and
// which of its PIDs live (all but ProbeDeadPID).
const (
	ProbeHost    = "h1"
	ProbeDeadPID = 4242
)

// ProbeAlive is the liveness probe TakeoverRules expects.
func ProbeAlive(pid int) bool { return pid != ProbeDeadPID }

// TakeoverRules checks the claim rule against holders of every kind, on a
// store opened with Hostname ProbeHost and Alive ProbeAlive: a dead process
// of this host is taken over at once, a live one and one on another host
// hold while their lease runs, a lapsed lease does not hold.
func TakeoverRules(t *testing.T, s store.Store) {
	t.Helper()
	me := store.Owner{Host: ProbeHost, PID: 1000, Instance: "me", Model: "new", Lease: time.Hour}
	cases := []struct {
		holder   store.Owner
		takeover bool
	}{
		{store.Owner{Host: ProbeHost, PID: ProbeDeadPID, Instance: "a", Lease: time.Hour}, true},
		{store.Owner{Host: ProbeHost, PID: ProbeDeadPID + 1, Instance: "b", Lease: time.Hour}, false},
		{store.Owner{Host: "h2", PID: ProbeDeadPID, Instance: "c", Lease: time.Hour}, false},
		{store.Owner{Host: "h2", PID: ProbeDeadPID + 1, Instance: "d"}, true}, // its lease has lapsed
	}
	for i, c := range cases {
		ref := Ref(i + 1)
		if _, err := s.Claim(t.Context(), ref, c.holder); err != nil {
			t.Fatal(err)
		}
		rec, err := s.Claim(t.Context(), ref, me)
		switch {
		case c.takeover && err != nil:
			t.Errorf("holder %+v: Claim = %v, want takeover", c.holder, err)
		case c.takeover && (rec.Host != ProbeHost || rec.PID != 1000 || rec.Model != "new"):
			t.Errorf("holder %+v: after takeover %+v", c.holder, rec)
		case !c.takeover && !errors.Is(err, store.ErrClaimed):
			t.Errorf("holder %+v: Claim = %v, want ErrClaimed", c.holder, err)
		}
	}
}

// EveryCall calls each method of s but Close once on ref, as o, and
// returns their errors by method name: for tests of a store that can no
// longer answer (its database broken or gone), whose every call must fail.
func EveryCall(ctx context.Context, s store.Store, ref task.Ref, o store.Owner) map[string]error {
	errs := map[string]error{}
	_, errs["Claim"] = s.Claim(ctx, ref, o)
	_, errs["ClaimQueued"] = s.ClaimQueued(ctx, ref, o)
	_, errs["TakeOver"] = s.TakeOver(ctx, ref, o)
	_, errs["Renew"] = s.Renew(ctx, o)
	_, errs["Release"] = s.Release(ctx, ref)
	errs["SetStatus"] = s.SetStatus(ctx, ref, task.Done, "")
	errs["AddCounters"] = s.AddCounters(ctx, ref, store.Counters{LLMCalls: 1})
	errs["SaveCheckpoint"] = s.SaveCheckpoint(ctx, ref, store.Checkpoint{Step: 2, Data: []byte("step two")})
	_, _, errs["LoadCheckpoint"] = s.LoadCheckpoint(ctx, ref)
	errs["ClearCheckpoint"] = s.ClearCheckpoint(ctx, ref)
	errs["SaveConversation"] = s.SaveConversation(ctx, ref, store.Conversation{Round: 1})
	_, _, errs["LoadConversation"] = s.LoadConversation(ctx, ref)
	_, errs["Get"] = s.Get(ctx, ref)
	_, errs["List"] = s.List(ctx)
	return errs
}
