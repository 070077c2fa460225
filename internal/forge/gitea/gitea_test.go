package gitea_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/gitea"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// noWait is a Sleep that returns at once.
func noWait(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func newClient(t *testing.T, g *forgetest.Gitea) *gitea.Client {
	t.Helper()
	c, err := gitea.New(gitea.Options{APIURL: g.URL(), Token: g.Token, Repositories: []string{"acme/app"}, Sleep: noWait})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	for _, o := range []gitea.Options{{APIURL: "https://gitea.example.com"}, {APIURL: "gitea.example.com", Token: "t"}} {
		if _, err := gitea.New(o); err == nil {
			t.Errorf("New(%+v) took it", o)
		}
	}
}

// A revoked token is forge.ErrAuth; a missing issue forge.ErrNotFound.
func TestErrorsSayWhatHappened(t *testing.T) {
	g := forgetest.NewGitea(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	c := newClient(t, g)
	ref := task.Ref{Forge: task.Gitea, Repo: "acme/app", Kind: task.Issue, Number: n}
	if _, err := c.Get(context.Background(), task.Ref{Forge: task.Gitea, Repo: "acme/app", Kind: task.Issue, Number: 77}); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("a missing issue: %v", err)
	}
	g.Token = "another"
	_, err := c.Get(context.Background(), ref)
	if !errors.Is(err, forge.ErrAuth) || !strings.Contains(err.Error(), "gitea.token") {
		t.Errorf("a revoked token: %v", err)
	}
	if _, err := c.Get(context.Background(), task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n}); err == nil {
		t.Error("a GitHub ref was read")
	}
}

// A comment whose POST landed but whose answer was lost (a 502 after
// Gitea acted) is posted once; so is a pull request.
func TestAmbiguousPostsLandOnce(t *testing.T) {
	g := forgetest.NewGitea(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	c := newClient(t, g)
	ctx := context.Background()
	ref := task.Ref{Forge: task.Gitea, Repo: "acme/app", Kind: task.Issue, Number: n}
	g.Inject(forgetest.Fault{Method: "POST", Path: "/comments", Status: http.StatusBadGateway, AfterServe: true})
	cm, err := c.PostComment(ctx, ref, "Working on it.")
	if err != nil || cm.ID == 0 {
		t.Fatalf("PostComment = %+v, %v", cm, err)
	}
	if got := g.Comments("acme/app", n); len(got) != 1 {
		t.Fatalf("%d comments, want 1: %+v", len(got), got)
	}
	g.CommitFile("acme/app", "agent/1", "a.txt", "a\n", "Add a")
	g.Inject(forgetest.Fault{Method: "POST", Path: "/pulls", Status: http.StatusBadGateway, AfterServe: true})
	ch, err := c.OpenChange(ctx, ref, forge.NewChange{Head: "agent/1", Base: "main", Title: "Work", Body: "b", Draft: true})
	if err != nil || !ch.Draft {
		t.Fatalf("OpenChange = %+v, %v", ch, err)
	}
	if ps := g.Pulls("acme/app"); len(ps) != 1 || ps[0].Title != "WIP: Work" {
		t.Fatalf("pull requests: %+v", ps)
	}
	// A 422 (nothing to propose) is final, not retried.
	g.ResetRequests()
	if _, err := c.OpenChange(ctx, ref, forge.NewChange{Head: "main", Base: "main", Title: "x"}); err == nil {
		t.Fatal("a pull request without changes was opened")
	}
	if got := g.Count("POST", "/pulls"); got != 1 {
		t.Fatalf("%d POSTs for a final refusal", got)
	}
}

// The take's lock: a fresh one held by another process refuses the take
// and is left; a stale one (older than five minutes) is removed and the
// take goes on; a lock Gitea could not record (a 500) is no take.
func TestTakeLabelLock(t *testing.T) {
	g := forgetest.NewGitea(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Labels: []string{"coding agent"}})
	c := newClient(t, g)
	ctx := context.Background()
	ref := task.Ref{Forge: task.Gitea, Repo: "acme/app", Kind: task.Issue, Number: n}
	react := func() {
		req, _ := http.NewRequest("POST", g.URL()+"/api/v1/repos/acme/app/issues/1/reactions", strings.NewReader(`{"content":"rocket"}`))
		req.Header.Set("Authorization", "token "+g.Token)
		resp, err := g.Client().Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("reacting: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	react()
	if err := c.TakeLabel(ctx, ref, "coding agent"); !errors.Is(err, forge.ErrLabelAbsent) {
		t.Fatalf("a held lock: %v", err)
	}
	if got := g.Labels("acme/app", n); len(got) != 1 || len(g.Reactions("acme/app", n, 0)) != 1 {
		t.Fatalf("the lock or the label moved: %q, %q", got, g.Reactions("acme/app", n, 0))
	}

	// Ten minutes ago (the emulator's stamps never go back), a process
	// took the lock and died.
	g2 := forgetest.NewGitea(t)
	g2.SetClock(func() time.Time { return time.Now().Add(-10 * time.Minute) })
	n = g2.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Labels: []string{"coding agent"}})
	c2 := newClient(t, g2)
	g = g2
	react()
	g2.SetClock(time.Now)
	if err := c2.TakeLabel(ctx, ref, "coding agent"); err != nil {
		t.Fatalf("a stale lock: %v", err)
	}
	if got := g2.Labels("acme/app", n); len(got) != 0 || len(g2.Reactions("acme/app", n, 0)) != 0 {
		t.Fatalf("after the take: labels %q, reactions %q", got, g2.Reactions("acme/app", n, 0))
	}

	g2.AddLabelBy("acme/app", n, "coding agent", "alice")
	g2.Inject(forgetest.Fault{Method: "POST", Path: "/reactions", Status: http.StatusInternalServerError})
	err := c2.TakeLabel(ctx, ref, "coding agent")
	if err == nil || errors.Is(err, forge.ErrLabelAbsent) {
		t.Fatalf("a lock Gitea refused with a 500: %v", err)
	}
	if got := g2.Labels("acme/app", n); len(got) != 1 {
		t.Fatalf("the label went without the lock: %q", got)
	}
}

// Reads through a proxy that answers HTML, or through pages: every page
// is read; garbage is an error, not an empty list.
func TestDiscoverPagesAndGarbage(t *testing.T) {
	g := forgetest.NewGitea(t)
	for range 73 {
		g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Labels: []string{"coding agent"}})
	}
	g.AddIssue("acme/app", forgetest.IssueSeed{Title: "other"})
	g.AddIssue("acme/lib", forgetest.IssueSeed{Title: "lib", Labels: []string{"coding agent"}})
	c := newClient(t, g)
	ts, err := c.Discover(context.Background(), "coding agent")
	if err != nil || len(ts) != 73 {
		t.Fatalf("Discover = %d tasks, %v", len(ts), err)
	}
	byOwner, err := gitea.New(gitea.Options{APIURL: g.URL(), Token: g.Token, Owner: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if ts, err := byOwner.Discover(context.Background(), "coding agent"); err != nil || len(ts) != 74 {
		t.Fatalf("Discover by owner = %d tasks, %v", len(ts), err)
	}
	g.Inject(forgetest.HTMLFault("GET", "/issues", 1))
	if ts, err := c.Discover(context.Background(), "coding agent"); err == nil {
		t.Fatalf("an HTML page read as %d tasks", len(ts))
	}
}

// The webhook reader: Gitea's and Forgejo's headers, a wrong signature,
// and which label changes wake the producer.
func TestHooks(t *testing.T) {
	g := forgetest.NewGitea(t)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Labels: []string{"coding agent paused"}})
	p := g.AddPull("acme/app", forgetest.PullSeed{IssueSeed: forgetest.IssueSeed{Title: "p"}})
	labels := task.Labels{Bot: "coding agent", Paused: "coding agent paused"}
	var got []forge.Event
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := gitea.Hooks{}
		proof, ok := h.Admit(r, "s3cret")
		body, _ := io.ReadAll(r.Body)
		if !ok {
			got = append(got, forge.Ignored("unsigned"))
			return
		}
		_, _ = proof.Write(body)
		if !proof.Valid() {
			got = append(got, forge.Ignored("bad signature"))
			return
		}
		ev, err := h.Read(r, body, labels)
		if err != nil {
			t.Errorf("Read: %v", err)
		}
		got = append(got, ev)
	}))
	defer srv.Close()
	forgejo := func(d forgetest.Delivery) forgetest.Delivery {
		for _, k := range []string{"Delivery", "Event", "Event-Type", "Signature"} {
			d.Header.Del("X-Gitea-" + k)
		}
		return d
	}
	for _, d := range []forgetest.Delivery{
		g.LabelHook("acme/app", n, "bug", "bob", "s3cret"),                   // paused, no bot label: nothing
		g.UnlabelHook("acme/app", n, "coding agent paused", "bob", "s3cret"), // a resume, perhaps
		forgejo(g.LabelHook("acme/app", p, "coding agent", "bob", "s3cret")),
		g.CommentHook("acme/app", p, "bob", "hi", "s3cret"),
		g.CommentHook("acme/app", n, "bob", "hi", "wrong"),
	} {
		resp, err := d.Send(srv.Client(), srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	issue := task.Ref{Forge: task.Gitea, Repo: "acme/app", Kind: task.Issue, Number: n}
	pull := task.Ref{Forge: task.Gitea, Repo: "acme/app", Kind: task.PullRequest, Number: p}
	want := []forge.Event{
		forge.Ignored("issues label_updated does not ask for the agent"),
		{What: forge.Labelled, Ref: issue},
		{What: forge.Labelled, Ref: pull},
		{What: forge.Commented, Ref: pull, Author: "bob"},
		forge.Ignored("bad signature"),
	}
	if len(got) != len(want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("delivery %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// A take costs four requests, a pull request's as an issue's: react, read
// the issue, remove the label, release (the labels' ids read once before).
func TestTakeLabelCostsFourRequests(t *testing.T) {
	g := forgetest.NewGitea(t)
	p := g.AddPull("acme/app", forgetest.PullSeed{IssueSeed: forgetest.IssueSeed{Title: "p", Labels: []string{"coding agent", "x"}}})
	c := newClient(t, g)
	ref := task.Ref{Forge: task.Gitea, Repo: "acme/app", Kind: task.PullRequest, Number: p}
	if err := c.RemoveLabel(context.Background(), ref, "x"); err != nil { // reads the labels' ids
		t.Fatal(err)
	}
	g.ResetRequests()
	if err := c.TakeLabel(context.Background(), ref, "coding agent"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range g.Requests() {
		got = append(got, r.Method+" "+r.Path)
	}
	if len(got) != 4 {
		t.Errorf("the take made %d requests, want 4: %q", len(got), got)
	}
}

// The take cut at each of its four requests, before the forge served it
// and after (its answer never heard), as a process killed there leaves it:
// a second taker, once a lock the cut one left has gone stale, takes the
// label exactly when it is still there; of the two, at most one took it
// (a read cut short is sent again by Go's HTTP client: that taker may
// finish its take); no lock stays.
func TestTakeLabelCutAtEveryRequest(t *testing.T) {
	for at := int64(1); at <= 4; at++ {
		for _, after := range []bool{false, true} {
			g := forgetest.NewGitea(t)
			start := time.Now().Add(-time.Hour)
			clock := forgetest.NewClock(start)
			g.SetClock(clock.Now)
			n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Labels: []string{"coding agent", "coding agent done"}})
			ref := task.Ref{Forge: task.Gitea, Repo: "acme/app", Kind: task.Issue, Number: n}
			c := newClient(t, g)
			// Not the take's requests: the bot's name, the labels' ids.
			if _, err := c.BotUser(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := c.RemoveLabel(context.Background(), ref, "coding agent done"); err != nil {
				t.Fatal(err)
			}
			first := int64(0)
			var seen []string
			g.Watch(func(call forgetest.Call) bool {
				if first == 0 {
					first = call.Seq
				}
				if call.Seq-first+1 != at || call.Served != after {
					return true
				}
				seen = append(seen, call.Method+" "+call.Path)
				return false
			})
			err := c.TakeLabel(context.Background(), ref, "coding agent")
			g.Watch(nil)
			name := fmt.Sprintf("cut at request %d (%s), after it was served: %v", at, strings.Join(seen, ""), after)
			if len(seen) != 1 {
				t.Fatalf("%s: the take was not cut there (%d cuts)", name, len(seen))
			}
			labelled := slices.Contains(g.Labels("acme/app", n), "coding agent")
			if err == nil && labelled {
				t.Errorf("%s: the cut taker took the label and left it", name)
			}
			clock.Set(time.Now()) // any lock left is stale now
			err2 := newClient(t, g).TakeLabel(context.Background(), ref, "coding agent")
			switch {
			case labelled && err2 != nil:
				t.Errorf("%s: the label was left and a second taker could not take it: %v", name, err2)
			case !labelled && !errors.Is(err2, forge.ErrLabelAbsent):
				t.Errorf("%s: the label was gone and a second taker got %v", name, err2)
			}
			if err == nil && err2 == nil {
				t.Errorf("%s: both takers took the label", name)
			}
			if slices.Contains(g.Labels("acme/app", n), "coding agent") {
				t.Errorf("%s: the label is still there after the second take", name)
			}
			if rs := g.Reactions("acme/app", n, 0); len(rs) != 0 {
				t.Errorf("%s: a lock stayed: %q", name, rs)
			}
		}
	}
}
