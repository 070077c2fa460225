package postonce_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/task"
)

// failure is a failed POST as the fake forge answers it.
type failure struct {
	kind   postonce.Kind
	wait   time.Duration // what the forge asks for
	landed bool          // the comment was stored all the same
}

func (f failure) Error() string { return fmt.Sprintf("post failed (kind %d)", f.kind) }

func classify(err error, _ time.Time) (postonce.Kind, time.Duration) {
	if f, ok := errors.AsType[failure](err); ok {
		return f.kind, f.wait
	}
	return postonce.Ambiguous, 0
}

var (
	t0         = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	errListing = errors.New("listing comments: 502")
	ambiguous  = failure{kind: postonce.Ambiguous}
)

// fake is a forge whose POSTs and look-ups follow a script; past the end
// of a script, a POST succeeds and a look-up finds what landed.
type fake struct {
	posts   []error // nil: the POST succeeds
	lookups []error // nil: the look-up answers
	stored  []task.Comment
	nPost   int
	sinces  []time.Time
	waits   []time.Duration
}

func (f *fake) post(context.Context) (task.Comment, error) {
	f.nPost++
	var err error
	if f.nPost <= len(f.posts) {
		err = f.posts[f.nPost-1]
	}
	fl, failed := errors.AsType[failure](err)
	if err == nil || failed && fl.landed {
		f.stored = append(f.stored, task.Comment{ID: int64(f.nPost), Author: "bot", Body: "hi"})
	}
	if err != nil {
		return task.Comment{}, err
	}
	return f.stored[len(f.stored)-1], nil
}

func (f *fake) find(_ context.Context, since time.Time) (task.Comment, bool, error) {
	f.sinces = append(f.sinces, since)
	if n := len(f.sinces); n <= len(f.lookups) && f.lookups[n-1] != nil {
		return task.Comment{}, false, f.lookups[n-1]
	}
	if len(f.stored) == 0 {
		return task.Comment{}, false, nil
	}
	return f.stored[len(f.stored)-1], true, nil
}

func (f *fake) sleep(ctx context.Context, d time.Duration) error {
	f.waits = append(f.waits, d)
	return ctx.Err()
}

func TestPost(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name           string
		posts, lookups []error
		wantErr        string // "" means success
		wantPosts      int
		wantLookups    int
		wantWaits      []time.Duration
		wantID         int64
	}{
		{name: "success first try", wantPosts: 1, wantID: 1},
		{name: "502 that landed is not posted again", posts: []error{failure{kind: postonce.Ambiguous, landed: true}},
			wantPosts: 1, wantLookups: 1, wantWaits: []time.Duration{s}, wantID: 1},
		{name: "502 that did not land is posted again", posts: []error{ambiguous},
			wantPosts: 2, wantLookups: 1, wantWaits: []time.Duration{s}, wantID: 2},
		{name: "429 waits as long as Retry-After, no look-up", posts: []error{failure{kind: postonce.Refused, wait: 7 * s}},
			wantPosts: 2, wantWaits: []time.Duration{7 * s}, wantID: 2},
		{name: "a named wait shorter than the backoff waits the backoff",
			posts:     []error{ambiguous, failure{kind: postonce.Refused, wait: s}},
			wantPosts: 3, wantLookups: 1, wantWaits: []time.Duration{s, 2 * s}, wantID: 3},
		{name: "4xx is final", posts: []error{failure{kind: postonce.Final}},
			wantErr: "post failed (kind 0)", wantPosts: 1},
		{name: "gives up after 4 attempts, looking once more", posts: []error{ambiguous, ambiguous, ambiguous, ambiguous},
			wantErr: "giving up after 4 attempts: post failed", wantPosts: 4, wantLookups: 4, wantWaits: []time.Duration{s, 2 * s, 4 * s}},
		{name: "the last attempt landed", posts: []error{ambiguous, ambiguous, ambiguous, failure{kind: postonce.Ambiguous, landed: true}},
			wantPosts: 4, wantLookups: 4, wantWaits: []time.Duration{s, 2 * s, 4 * s}, wantID: 4},
		{name: "a failing look-up counts as an attempt", posts: []error{ambiguous}, lookups: []error{errListing},
			wantPosts: 2, wantLookups: 2, wantWaits: []time.Duration{s, 2 * s}, wantID: 2},
		{name: "failing look-ups use up the attempts", posts: []error{ambiguous}, lookups: []error{errListing, errListing, errListing, errListing},
			wantErr:   "giving up after 4 attempts: checking whether an earlier attempt landed: listing comments: 502",
			wantPosts: 1, wantLookups: 4, wantWaits: []time.Duration{s, 2 * s, 4 * s}},
		{name: "a refusal after an ambiguous failure needs no second look",
			posts:     []error{ambiguous, failure{kind: postonce.Refused, wait: 30 * s}},
			wantPosts: 3, wantLookups: 1, wantWaits: []time.Duration{s, 30 * s}, wantID: 3},
		{name: "a wait beyond MaxWait ends it", posts: []error{failure{kind: postonce.Refused, wait: time.Hour}},
			wantErr: "not retrying, the forge asks to wait 1h0m0s: post failed", wantPosts: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake{posts: tc.posts, lookups: tc.lookups}
			o := postonce.Options{Now: func() time.Time { return t0 }, Sleep: f.sleep}
			cm, err := o.Post(t.Context(), nil, f.post, f.find, classify)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			case tc.wantErr != "" && tc.lookups == nil && !errors.Is(err, tc.posts[len(tc.posts)-1]):
				t.Errorf("error %v does not wrap the forge's %v", err, tc.posts[len(tc.posts)-1])
			}
			if cm.ID != tc.wantID {
				t.Errorf("returned comment %d, want %d", cm.ID, tc.wantID)
			}
			if f.nPost != tc.wantPosts || len(f.sinces) != tc.wantLookups {
				t.Errorf("%d POSTs and %d look-ups, want %d and %d", f.nPost, len(f.sinces), tc.wantPosts, tc.wantLookups)
			}
			if diff := cmp.Diff(tc.wantWaits, f.waits); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			if len(f.stored) > 1 {
				t.Errorf("%d comments stored, want at most 1", len(f.stored))
			}
			for _, since := range f.sinces {
				if want := t0.Add(-postonce.ClockSkew); !since.Equal(want) {
					t.Errorf("looked since %v, want %v (the first attempt less the clock skew)", since, want)
				}
			}
		})
	}
}

func TestPostStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	f := &fake{posts: []error{ambiguous, ambiguous}}
	o := postonce.Options{Sleep: func(ctx context.Context, d time.Duration) error { cancel(); return f.sleep(ctx, d) }}
	_, err := o.Post(ctx, nil, f.post, f.find, classify)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ambiguous) || f.nPost != 1 || len(f.sinces) != 0 {
		t.Errorf("error %v after %d POSTs and %d look-ups; want context.Canceled after 1 and none", err, f.nPost, len(f.sinces))
	}
}

func TestPostStopsWhenContextEndsDuringThePost(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	f := &fake{}
	post := func(ctx context.Context) (task.Comment, error) {
		f.nPost++
		cancel()
		return task.Comment{}, fmt.Errorf("sending: %w", ctx.Err())
	}
	_, err := postonce.Options{Sleep: f.sleep}.Post(ctx, nil, post, f.find, classify)
	if !errors.Is(err, context.Canceled) || f.nPost != 1 || len(f.waits) != 0 || len(f.sinces) != 0 {
		t.Errorf("error %v after %d POSTs, waits %v, %d look-ups", err, f.nPost, f.waits, len(f.sinces))
	}
}

func TestLanded(t *testing.T) {
	since := t0.Add(-postonce.ClockSkew)
	cs := []task.Comment{
		{ID: 1, Author: "bot", Body: "done", CreatedAt: since.Add(-time.Second)},         // before the window
		{ID: 2, Author: "alice", Body: "done", CreatedAt: t0},                            // someone else
		{ID: 3, Author: "bot", Body: "done", CreatedAt: t0, System: true},                // a system note
		{ID: 4, Author: "bot", Body: "done!", CreatedAt: t0},                             // other words
		{ID: 6, Author: "Bot", Body: "done\r\n", CreatedAt: t0.Add(time.Second)},         // ours, as stored
		{ID: 5, Author: "bot", Body: "done", CreatedAt: since},                           // ours too, older
		{ID: 7, Author: "bot", Body: "done", CreatedAt: t0.Add(-postonce.ClockSkew / 2)}, // older still
	}
	got, ok := postonce.Landed(cs, "bot", "done\n", since)
	if !ok || got.ID != 6 {
		t.Errorf("Landed = %+v, %v; want comment 6, the newest match", got, ok)
	}
	if _, ok := postonce.Landed(cs[:4], "bot", "done", since); ok {
		t.Error("Landed matched a comment outside the window, by someone else, a system note or with other words")
	}
}
