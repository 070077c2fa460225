package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/store"
)

// testEvents: a task's events come back in the order added, whole; an
// unknown task has none to add; pruning drops only the older ones, and
// a task's events outlive its checkpoint.
func testEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	ref := Ref(1)
	mustClaim(t, s, ref, LiveOwner(t, "m"))
	t0 := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	want := []store.Event{
		{At: t0, Kind: store.EventRound, Host: "h1"},
		{At: t0.Add(time.Second), Kind: store.EventRequest, Phase: "execution", Title: "Writing hello.txt", TokensIn: 120, TokensOut: 9, Millis: 812},
		{At: t0.Add(2 * time.Second), Kind: store.EventCall, Title: "fs/write_file", Args: `{"path":"hello.txt"}`, Text: "wrote 6 bytes\u0000ok", Error: true},
		{At: t0.Add(48 * time.Hour), Kind: store.EventEnd, Title: "done"},
	}
	for _, e := range want {
		if err := s.AddEvent(ctx, ref, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ClearCheckpoint(ctx, ref); err != nil {
		t.Fatal(err)
	}
	got, err := s.Events(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if got, err := s.Events(ctx, ref, store.EventCall, store.EventEnd); err != nil || len(got) != 2 || got[0].Kind != store.EventCall || got[1].Kind != store.EventEnd {
		t.Errorf("the call and end events: %+v, %v", got, err)
	}
	if got, err := s.Events(ctx, ref, store.EventRound); err != nil || len(got) != 1 || got[0].Host != "h1" {
		t.Errorf("the round events: %+v, %v", got, err)
	}
	if err := s.AddEvent(ctx, Ref(2), store.Event{Kind: store.EventEnd}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an event of an unknown task: %v, want ErrNotFound", err)
	}
	if es, err := s.Events(ctx, Ref(2)); err != nil || len(es) != 0 {
		t.Errorf("events of an unknown task: %v, %v", es, err)
	}
	n, err := s.PruneEvents(ctx, t0.Add(time.Hour))
	if err != nil || n != 3 {
		t.Fatalf("pruned %d, %v; want 3", n, err)
	}
	if got, err := s.Events(ctx, ref); err != nil || len(got) != 1 || got[0].Kind != store.EventEnd {
		t.Errorf("after pruning: %+v, %v", got, err)
	}
}
