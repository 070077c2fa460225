package postonce_test

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forge/gitlab"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// emulated is one forge adapter on its emulator, seen the same way for both.
type emulated struct {
	post   func(ctx context.Context, body string) (task.Comment, error)
	inject func(forgetest.Fault) // Path is filled in, and Method unless set: the comment POST
	posts  func() int            // comment POSTs received
	lists  func() int            // comment listings received
	mine   func() []int64        // IDs of the bot's stored comments
}

type sleepFunc = func(ctx context.Context, d time.Duration) error

var emulators = map[string]func(t *testing.T, sleep sleepFunc) emulated{
	"github": func(t *testing.T, sleep sleepFunc) emulated {
		g := forgetest.NewGitHub(t)
		n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
		g.AddComment("acme/app", n, "alice", "progress: step 1") // the same words by someone else
		c, err := github.New(github.Options{APIURL: g.URL(), Token: g.Token, Repositories: []string{"acme/app"},
			HTTPClient: g.Client(), Sleep: sleep})
		if err != nil {
			t.Fatal(err)
		}
		ref := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n}
		return emulated{
			post: func(ctx context.Context, body string) (task.Comment, error) { return c.PostComment(ctx, ref, body) },
			inject: func(f forgetest.Fault) {
				f.Method, f.Path = cmp.Or(f.Method, "POST"), "/comments"
				g.Inject(f)
			},
			posts: func() int { return g.Count("POST", "/comments") },
			lists: func() int { return g.Count("GET", "/comments") },
			mine: func() []int64 {
				var ids []int64
				for _, cm := range g.Comments("acme/app", n) {
					if cm.Author == g.BotLogin {
						ids = append(ids, cm.ID)
					}
				}
				return ids
			},
		}
	},
	"gitlab": func(t *testing.T, sleep sleepFunc) emulated {
		g := forgetest.NewGitLab(t)
		g.AddProject("acme/app")
		g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
		g.AddNote("acme/app", forgetest.KindIssue, 1, "alice", "progress: step 1", false)
		c, err := gitlab.New(gitlab.Options{APIURL: g.URL(), Token: g.Token, HTTPClient: g.Client(), Sleep: sleep})
		if err != nil {
			t.Fatal(err)
		}
		ref := task.Ref{Forge: task.GitLab, Repo: "acme/app", Kind: task.Issue, Number: 1}
		return emulated{
			post: func(ctx context.Context, body string) (task.Comment, error) { return c.PostComment(ctx, ref, body) },
			inject: func(f forgetest.Fault) {
				f.Method, f.Path = cmp.Or(f.Method, "POST"), "/notes"
				g.Inject(f)
			},
			posts: func() int { return g.Count("POST", "/notes") },
			lists: func() int { return g.Count("GET", "/notes") },
			mine: func() []int64 {
				var ids []int64
				for _, n := range g.Notes("acme/app", forgetest.KindIssue, 1) {
					if n.Author == g.BotUsername {
						ids = append(ids, n.ID)
					}
				}
				return ids
			},
		}
	},
}

// waits records the waits asked for instead of waiting.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return ctx.Err()
}

// TestBothForges runs each scenario on both adapters and their emulators:
// the same faults must give the same POSTs, look-ups, waits and comments.
func TestBothForges(t *testing.T) {
	s := time.Second
	scenarios := []struct {
		name                string
		faults              []forgetest.Fault
		wantErr             string // "" means success
		wantPosts, wantMine int
		wantLists           int
		wantWaits           []time.Duration
	}{
		{name: "success first try", wantPosts: 1, wantMine: 1},
		{name: "served, then 502: no duplicate", faults: []forgetest.Fault{{Status: 502, AfterServe: true}},
			wantPosts: 1, wantMine: 1, wantLists: 1, wantWaits: []time.Duration{s}},
		{name: "served, then a garbled 201: no duplicate", faults: []forgetest.Fault{{Status: 201, Body: `{"id":`, AfterServe: true}},
			wantPosts: 1, wantMine: 1, wantLists: 1, wantWaits: []time.Duration{s}},
		{name: "502 that did not land: posts again", faults: []forgetest.Fault{{Status: 502}},
			wantPosts: 2, wantMine: 1, wantLists: 1, wantWaits: []time.Duration{s}},
		{name: "429 waits as long as Retry-After", faults: []forgetest.Fault{{Status: 429, Header: map[string]string{"Retry-After": "7"}}},
			wantPosts: 2, wantMine: 1, wantWaits: []time.Duration{7 * s}},
		{name: "a 4xx is final", faults: []forgetest.Fault{{Status: 422}},
			wantErr: "posting comment on acme/app#1", wantPosts: 1},
		{name: "gives up after 4 attempts", faults: []forgetest.Fault{{Status: 503, Times: -1}},
			wantErr: "posting comment on acme/app#1: giving up after 4 attempts", wantPosts: 4, wantLists: 4,
			wantWaits: []time.Duration{s, 2 * s, 4 * s}},
		{name: "the fourth attempt landed", faults: []forgetest.Fault{{Status: 503, Times: 3}, {Status: 502, AfterServe: true}},
			wantPosts: 4, wantMine: 1, wantLists: 4, wantWaits: []time.Duration{s, 2 * s, 4 * s}},
		{name: "a failing look-up counts as an attempt",
			faults:    []forgetest.Fault{{Status: 502}, {Method: "GET", Status: 500}},
			wantPosts: 2, wantMine: 1, wantLists: 2, wantWaits: []time.Duration{s, 2 * s}},
	}
	for forgeName, setup := range emulators {
		for _, sc := range scenarios {
			t.Run(forgeName+"/"+sc.name, func(t *testing.T) {
				w := &waits{}
				e := setup(t, w.sleep)
				for _, f := range sc.faults {
					e.inject(f)
				}
				cm, err := e.post(t.Context(), "progress: step 1")
				switch {
				case sc.wantErr == "" && err != nil:
					t.Fatalf("error %v", err)
				case sc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), sc.wantErr)):
					t.Fatalf("error %v, want one containing %q", err, sc.wantErr)
				}
				mine := e.mine()
				if len(mine) != sc.wantMine || sc.wantMine == 1 && cm.ID != mine[0] {
					t.Errorf("bot comments %v, returned %d; want %d of them, the one returned", mine, cm.ID, sc.wantMine)
				}
				if e.posts() != sc.wantPosts || e.lists() != sc.wantLists {
					t.Errorf("%d POSTs and %d listings, want %d and %d", e.posts(), e.lists(), sc.wantPosts, sc.wantLists)
				}
				if diff := gocmp.Diff(sc.wantWaits, w.d); diff != "" {
					t.Errorf("waits (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestBothForgesStopWhenContextEnds: a cancelled wait ends the post with
// the context's error, after one POST, on both forges.
func TestBothForgesStopWhenContextEnds(t *testing.T) {
	for forgeName, setup := range emulators {
		t.Run(forgeName, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			e := setup(t, func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() })
			e.inject(forgetest.Fault{Status: 500, Times: -1})
			_, err := e.post(ctx, "x")
			if !errors.Is(err, context.Canceled) || e.posts() != 1 || e.lists() != 0 {
				t.Errorf("error %v after %d POSTs and %d listings; want context.Canceled after 1 and none", err, e.posts(), e.lists())
			}
		})
	}
}
