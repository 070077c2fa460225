package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// equateEmpty lets a backend load no summaries as nil or as an empty list.
var equateEmpty = cmpopts.EquateEmpty()

func mustSaveConversation(t *testing.T, s store.Store, ref task.Ref, c store.Conversation) {
	t.Helper()
	if err := s.SaveConversation(t.Context(), ref, c); err != nil {
		t.Fatalf("SaveConversation(%s, %+v): %v", ref, c, err)
	}
}

// conversationEqual loads ref's conversation and compares it with want;
// times compare as instants and must come back in UTC.
func conversationEqual(t *testing.T, s store.Store, ref task.Ref, want store.Conversation) {
	t.Helper()
	got, ok, err := s.LoadConversation(t.Context(), ref)
	if err != nil || !ok {
		t.Fatalf("LoadConversation(%s): ok=%v err=%v, want a conversation", ref, ok, err)
	}
	if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
		t.Errorf("LoadConversation(%s) (-want +got):\n%s", ref, diff)
	}
	if got.Since.Location() != time.UTC {
		t.Errorf("LoadConversation(%s): Since in %v, want UTC", ref, got.Since.Location())
	}
}

func noConversation(t *testing.T, s store.Store, ref task.Ref, when string) {
	t.Helper()
	got, ok, err := s.LoadConversation(t.Context(), ref)
	if err != nil || ok {
		t.Errorf("LoadConversation(%s) %s = %+v, ok=%v, err=%v; want ok=false and no error", ref, when, got, ok, err)
	}
}

func testConversation(t *testing.T, s store.Store) {
	ref := Ref(20)
	mustClaim(t, s, ref, LiveOwner(t, "m1"))
	noConversation(t, s, ref, "of a fresh task")

	// Since in another zone, with nanoseconds: it must come back as the same
	// instant in UTC. Mark beyond 2^53 catches a float on the way.
	since := time.Date(2026, 4, 5, 6, 7, 8, 123456789, time.FixedZone("JST", 9*3600))
	first := store.Conversation{
		Round: 2,
		Mark:  1<<53 + 1,
		Since: since,
		Summaries: []string{
			"fixed the <nil> check & added a test",
			"line one\nline two \"quoted\" \\ \t tab",
			"レビューの指摘を反映しました 🎉",
			"",
		},
	}
	mustSaveConversation(t, s, ref, first)
	conversationEqual(t, s, ref, first)
	if got, _, _ := s.LoadConversation(t.Context(), ref); !got.Since.Equal(since) || got.Since.Nanosecond() != 123456789 {
		t.Errorf("Since = %v, want the instant %v to the nanosecond", got.Since, since)
	}

	// A second save replaces the whole conversation: a shorter list leaves
	// nothing of the longer one behind.
	second := store.Conversation{Round: 3, Mark: 42, Since: since.Add(time.Hour).UTC(), Summaries: []string{"only"}}
	mustSaveConversation(t, s, ref, second)
	conversationEqual(t, s, ref, second)

	// The zero value round-trips too (no summaries, no time).
	mustSaveConversation(t, s, ref, store.Conversation{})
	got, ok, err := s.LoadConversation(t.Context(), ref)
	if err != nil || !ok || got.Round != 0 || got.Mark != 0 || !got.Since.IsZero() || len(got.Summaries) != 0 {
		t.Errorf("LoadConversation after saving the zero value = %+v, ok=%v, err=%v; want the zero value", got, ok, err)
	}

	// Another task's conversation is its own.
	other := Ref(21)
	mustClaim(t, s, other, LiveOwner(t, "m1"))
	noConversation(t, s, other, "of a task whose neighbour has one")
	mustSaveConversation(t, s, other, first)
	mustSaveConversation(t, s, ref, second)
	conversationEqual(t, s, other, first)
	conversationEqual(t, s, ref, second)
}

// testConversationOutlivesRound walks what a finished round does to a task:
// its checkpoint is cleared, its status changes, and the next round claims
// it again. The conversation survives all of it, and no checkpoint call
// touches it (nor it the checkpoint).
func testConversationOutlivesRound(t *testing.T, s store.Store) {
	ctx, ref := t.Context(), Ref(22)
	mustClaim(t, s, ref, LiveOwner(t, "m1"))
	conv := store.Conversation{Round: 1, Mark: 901, Since: time.Date(2026, 2, 3, 4, 5, 6, 7, time.UTC),
		Summaries: []string{"round one"}}
	cp := store.Checkpoint{Step: 5, Data: []byte("agent state"), CreatedAt: time.Date(2026, 2, 3, 4, 0, 0, 0, time.UTC)}
	if err := s.SaveCheckpoint(ctx, ref, cp); err != nil {
		t.Fatalf("SaveCheckpoint: %v", err)
	}
	mustSaveConversation(t, s, ref, conv)
	loadEqual(t, s, ref, cp)

	if err := s.ClearCheckpoint(ctx, ref); err != nil {
		t.Fatalf("ClearCheckpoint: %v", err)
	}
	conversationEqual(t, s, ref, conv)
	if err := s.SetStatus(ctx, ref, task.Awaiting, ""); err != nil {
		t.Fatalf("SetStatus(awaiting): %v", err)
	}
	conversationEqual(t, s, ref, conv)
	mustClaim(t, s, ref, LiveOwner(t, "m2"))
	conversationEqual(t, s, ref, conv)

	// The next round's checkpoints come and go beside the conversation.
	if err := s.SaveCheckpoint(ctx, ref, store.Checkpoint{Step: 1, Data: []byte("round two")}); err != nil {
		t.Fatalf("SaveCheckpoint in round two: %v", err)
	}
	conversationEqual(t, s, ref, conv)
	if err := s.ClearCheckpoint(ctx, ref); err != nil {
		t.Fatalf("ClearCheckpoint after round two: %v", err)
	}
	if _, ok, err := s.LoadCheckpoint(ctx, ref); err != nil || ok {
		t.Errorf("LoadCheckpoint after clear: ok=%v err=%v, want ok=false (a conversation is no checkpoint)", ok, err)
	}
	conversationEqual(t, s, ref, conv)
}

// convFor is writer w's i-th conversation: every field derives from (w, i),
// so a load that mixes two saves is detectable.
func convFor(w, i int) store.Conversation {
	c := store.Conversation{
		Round: w*1000 + i,
		Mark:  int64(w*1000+i) * 7,
		Since: time.Date(2026, 1, 1, 0, 0, w, i, time.UTC),
	}
	for range w + 1 {
		c.Summaries = append(c.Summaries, fmt.Sprintf("writer %d save %d", w, i))
	}
	return c
}

// consistent reports whether c is whole: exactly convFor(w, i) for the (w,
// i) its Round names.
func consistent(c store.Conversation) bool {
	w, i := c.Round/1000, c.Round%1000
	return cmp.Equal(convFor(w, i), c, equateEmpty)
}

func testConcurrentConversations(t *testing.T, s store.Store) {
	const writers, saves = 8, 10
	shared := Ref(30)
	mustClaim(t, s, shared, LiveOwner(t, "m1"))
	own := make([]task.Ref, writers)
	for w := range writers {
		own[w] = Ref(31 + w)
		mustClaim(t, s, own[w], LiveOwner(t, "m1"))
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range saves {
				for _, ref := range []task.Ref{shared, own[w]} {
					if err := s.SaveConversation(t.Context(), ref, convFor(w, i)); err != nil {
						t.Errorf("writer %d: SaveConversation(%s): %v", w, ref, err)
						return
					}
				}
				got, ok, err := s.LoadConversation(t.Context(), shared)
				if err != nil || !ok || !consistent(got) {
					t.Errorf("writer %d: LoadConversation during saves = %+v, ok=%v, err=%v; want one whole save",
						w, got, ok, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	// Every writer's last save is its (saves-1)-th: one of those is final.
	got, ok, err := s.LoadConversation(t.Context(), shared)
	if err != nil || !ok || !consistent(got) || got.Round%1000 != saves-1 {
		t.Errorf("LoadConversation of the shared task = %+v, ok=%v, err=%v; want some writer's last save", got, ok, err)
	}
	for w, ref := range own {
		conversationEqual(t, s, ref, convFor(w, saves-1))
	}
}
