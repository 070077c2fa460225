package gitea_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/gitea"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// The contract tests run against the emulator (forgetest.Gitea) and,
// when CODING_AGENT_GITEA_URL names one with an administrator's token in
// CODING_AGENT_GITEA_ADMIN_TOKEN, against a real Gitea (or Forgejo) as
// well: the same checks, so the emulator answers as Gitea does where the
// adapter looks. On the real one they make their own users, repository,
// labels and issues, named afresh each run. docs/design.md says how to
// build and start Gitea 1.26 here.

// backend is where a world lives: what the tests do as people, and the
// repository's state read without the adapter.
type backend interface {
	// issue opens an issue as alice carrying labels (made when missing).
	issue(w *world, title string, labels []string) int
	comment(w *world, n int, user, body string) int64
	addLabel(w *world, n int, label, user string)
	setPermission(w *world, user, perm string)
	// reactions are the reactions on issue n.
	reactions(w *world, n int) []string
	// hooked sends to target the deliveries of bob labelling issue n with
	// label and commenting on it, signed with secret.
	hooked(w *world, target, secret string, n int, label string)
}

// world is one run's users and repository: alice owns it, bob may write,
// carol may read, bot is the agent (an administrator of it).
type world struct {
	t                      *testing.T
	b                      backend
	url                    string
	repo                   string
	bot, alice, bob, carol string
	botTok                 string
	client                 *gitea.Client
	ownerClient            *gitea.Client
}

// both runs f on a world of the emulator, and of the real Gitea if any.
func both(t *testing.T, f func(t *testing.T, w *world)) {
	t.Run("emulator", func(t *testing.T) { f(t, emulated(t)) })
	t.Run("gitea", func(t *testing.T) { f(t, real(t)) })
}

func (w *world) clients() {
	var err error
	if w.client, err = gitea.New(gitea.Options{APIURL: w.url, Token: w.botTok, Repositories: []string{w.repo}}); err != nil {
		w.t.Fatal(err)
	}
	if w.ownerClient, err = gitea.New(gitea.Options{APIURL: w.url + "/api/v1/", Token: w.botTok, Owner: w.alice}); err != nil {
		w.t.Fatal(err)
	}
}

// emu is the emulator as a backend.
type emu struct{ g *forgetest.Gitea }

func emulated(t *testing.T) *world {
	g := forgetest.NewGitea(t)
	w := &world{t: t, b: emu{g}, url: g.URL(), bot: g.BotUsername, alice: "alice", bob: "bob", carol: "carol", botTok: g.Token}
	w.repo = "alice/app"
	g.AddRepo(w.repo)
	g.SetPermission(w.repo, "bob", "write")
	w.clients()
	return w
}

func (e emu) issue(w *world, title string, labels []string) int {
	return e.g.AddIssue(w.repo, forgetest.IssueSeed{Title: title, Body: "body of " + title, Author: w.alice, Labels: labels})
}
func (e emu) comment(w *world, n int, user, body string) int64 {
	return e.g.AddComment(w.repo, n, user, body)
}
func (e emu) addLabel(w *world, n int, label, user string) { e.g.AddLabelBy(w.repo, n, label, user) }
func (e emu) setPermission(w *world, user, perm string)    { e.g.SetPermission(w.repo, user, perm) }
func (e emu) reactions(w *world, n int) []string           { return e.g.Reactions(w.repo, n, 0) }
func (e emu) hooked(w *world, target, secret string, n int, label string) {
	for _, d := range []forgetest.Delivery{e.g.LabelHook(w.repo, n, label, w.bob, secret), e.g.CommentHook(w.repo, n, w.bob, "hi", secret)} {
		resp, err := d.Send(http.DefaultClient, target)
		if err != nil {
			w.t.Fatal(err)
		}
		resp.Body.Close()
	}
}

// instance is a real Gitea as a backend.
type instance struct {
	*forgetest.RealGitea
	aliceTok, bobTok string
}

func real(t *testing.T) *world {
	g := &instance{RealGitea: forgetest.NewRealGitea(t)}
	w := &world{t: t, b: g, url: g.URL}
	w.bot, w.botTok = g.User("bot")
	w.alice, g.aliceTok = g.User("alice")
	w.bob, g.bobTok = g.User("bob")
	w.carol, _ = g.User("carol")
	w.repo = w.alice + "/app"
	g.Repo(g.aliceTok, "app")
	g.Collaborator(g.aliceTok, w.repo, w.bob, "write")
	// The bot administers the repository: Gitea shows others'
	// permissions to administrators only (CanWrite).
	g.Collaborator(g.aliceTok, w.repo, w.bot, "admin")
	w.clients()
	return w
}

func (g *instance) token(w *world, user string) string {
	if user == w.bob {
		return g.bobTok
	}
	return g.aliceTok
}

func (g *instance) issue(w *world, title string, labels []string) int {
	return g.Issue(g.aliceTok, w.repo, title, "body of "+title, labels...)
}

func (g *instance) comment(w *world, n int, user, body string) int64 {
	return g.Comment(g.token(w, user), w.repo, n, body)
}

func (g *instance) addLabel(w *world, n int, label, user string) {
	g.AddLabel(g.token(w, user), w.repo, n, label)
}

func (g *instance) setPermission(w *world, user, perm string) {
	g.Collaborator(g.aliceTok, w.repo, user, perm)
}

func (g *instance) reactions(w *world, n int) []string {
	var rs []struct {
		Content string `json:"content"`
		User    struct {
			Login string `json:"login"`
		} `json:"user"`
	}
	g.Call("GET", fmt.Sprintf("/repos/%s/issues/%d/reactions", w.repo, n), g.aliceTok, nil, &rs, http.StatusOK)
	var out []string
	for _, r := range rs {
		out = append(out, r.User.Login+":"+r.Content)
	}
	return out
}

func (g *instance) hooked(w *world, target, secret string, n int, label string) {
	g.Call("POST", "/repos/"+w.repo+"/hooks", g.aliceTok, map[string]any{"type": "gitea", "active": true,
		"events": []string{"issues", "issue_comment", "pull_request", "issue_label", "pull_request_label"},
		"config": map[string]string{"url": target, "content_type": "json", "secret": secret}}, nil, http.StatusCreated)
	g.addLabel(w, n, label, w.bob)
	g.comment(w, n, w.bob, "hi")
}

// issue opens an issue as alice with labels.
func (w *world) issue(title string, labels ...string) task.Ref {
	return task.Ref{Forge: task.Gitea, Repo: w.repo, Kind: task.Issue, Number: w.b.issue(w, title, labels)}
}

func TestContractReadAndTalk(t *testing.T) { both(t, readAndTalk) }

func readAndTalk(t *testing.T, w *world) {
	ctx := context.Background()
	acct, err := w.client.Account(ctx)
	if err != nil || acct.Login != w.bot || acct.Bot {
		t.Fatalf("Account = %+v, %v; want %s, not a bot", acct, err, w.bot)
	}
	if ok, err := w.client.CanPush(ctx, w.repo); err != nil || !ok {
		t.Fatalf("CanPush = %v, %v", ok, err)
	}
	ref := w.issue("Add a greeting", "coding agent", "bug")
	other := w.issue("Not for the agent", "bug")
	if err := w.client.CreateLabel(ctx, w.repo, "coding agent done", "#0e8a16"); err != nil {
		t.Fatal(err)
	}
	labels, err := w.client.RepoLabels(ctx, w.repo)
	if err != nil || !slices.Contains(labels, "coding agent") || !slices.Contains(labels, "bug") {
		t.Fatalf("RepoLabels = %q, %v", labels, err)
	}
	for _, c := range []*gitea.Client{w.client, w.ownerClient} {
		ts, err := c.Discover(ctx, "coding agent")
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 1 || ts[0].Ref != ref || ts[0].Author != w.alice || ts[0].Title != "Add a greeting" {
			t.Fatalf("Discover = %+v, want only %s", ts, ref)
		}
	}
	got, err := w.client.Get(ctx, ref)
	if err != nil || got.Ref != ref || got.State != "open" || !got.HasLabel("bug") || got.Body != "body of Add a greeting" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := w.client.Get(ctx, task.Ref{Forge: task.Gitea, Repo: w.repo, Kind: task.Issue, Number: 999}); !errors.Is(err, forge.ErrNotFound) {
		t.Fatalf("Get of a missing issue: %v, want ErrNotFound", err)
	}

	bobs := w.b.comment(w, ref.Number, w.bob, "Keep it short.")
	before := time.Now().Add(-2 * time.Second)
	posted, err := w.client.PostComment(ctx, ref, "Working on it.")
	if err != nil || posted.Author != w.bot || posted.ID == 0 {
		t.Fatalf("PostComment = %+v, %v", posted, err)
	}
	cs, err := w.client.Comments(ctx, ref)
	if err != nil || len(cs) != 2 || cs[0].Author != w.bob || cs[1].ID != posted.ID {
		t.Fatalf("Comments = %+v, %v", cs, err)
	}
	if err := w.client.EditComment(ctx, ref, posted.ID, "Done."); err != nil {
		t.Fatal(err)
	}
	since, err := w.client.CommentsSince(ctx, ref, before)
	if err != nil || len(since) == 0 || since[len(since)-1].Body != "Done." {
		t.Fatalf("CommentsSince = %+v, %v", since, err)
	}
	for range 2 {
		if err := w.client.React(ctx, ref, bobs, forge.ReactionSeen); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.client.DeleteComment(ctx, ref, posted.ID); err != nil {
		t.Fatal(err)
	}
	if err := w.client.DeleteComment(ctx, ref, posted.ID); !errors.Is(err, forge.ErrNotFound) {
		t.Fatalf("deleting it again: %v, want ErrNotFound", err)
	}

	for _, u := range []struct {
		login string
		want  bool
	}{{w.bob, true}, {w.alice, true}, {w.carol, false}, {"nobody-at-all-here", false}} {
		if ok, err := w.client.CanWrite(ctx, ref, u.login); err != nil || ok != u.want {
			t.Errorf("CanWrite(%s) = %v, %v; want %v", u.login, ok, err, u.want)
		}
	}
	// A bot that may only write knows only the owner for a writer.
	w.b.setPermission(w, w.bot, "write")
	for _, u := range []struct {
		login string
		want  bool
	}{{w.bob, false}, {w.alice, true}, {w.carol, false}} {
		if ok, err := w.client.CanWrite(ctx, ref, u.login); err != nil || ok != u.want {
			t.Errorf("CanWrite(%s) by a writer = %v, %v; want %v", u.login, ok, err, u.want)
		}
	}
	for range 2 {
		if err := w.client.AddLabel(ctx, other, "coding agent done"); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := w.client.RemoveLabel(ctx, other, "coding agent done"); err != nil {
			t.Fatal(err)
		}
	}
	w.b.addLabel(w, other.Number, "coding agent", w.bob)
	if who, err := w.client.LabeledBy(ctx, other, "coding agent"); err != nil || who != w.bob {
		t.Fatalf("LabeledBy = %q, %v; want %s", who, err, w.bob)
	}
	if who, err := w.client.LabeledBy(ctx, other, "coding agent done"); err != nil || who != w.bot {
		t.Fatalf("LabeledBy(done) = %q, %v; want %s", who, err, w.bot)
	}
}

// Of takers racing for one label, exactly one takes it; the lock reaction
// is gone afterwards.
func TestContractTakeLabel(t *testing.T) { both(t, takeLabel) }

func takeLabel(t *testing.T, w *world) {
	ctx := context.Background()
	ref := w.issue("Race for it", "coding agent")
	for round := range 3 {
		if round > 0 {
			if err := w.client.AddLabel(ctx, ref, "coding agent"); err != nil {
				t.Fatal(err)
			}
		}
		const takers = 6
		var wg sync.WaitGroup
		errs := make([]error, takers)
		for i := range takers {
			c, _ := gitea.New(gitea.Options{APIURL: w.url, Token: w.botTok, Repositories: []string{w.repo}})
			wg.Go(func() { errs[i] = c.TakeLabel(ctx, ref, "coding agent") })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case errors.Is(err, forge.ErrLabelAbsent):
			default:
				t.Logf("round %d: a taker failed otherwise: %v", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d takers won: %v", round, won, errs)
		}
		got, err := w.client.Get(ctx, ref)
		if err != nil || got.HasLabel("coding agent") {
			t.Fatalf("the label is still there: %+v, %v", got, err)
		}
		if rs := w.b.reactions(w, ref.Number); len(rs) != 0 {
			t.Fatalf("round %d: reactions left: %+v", round, rs)
		}
	}
	if err := w.client.TakeLabel(ctx, ref, "coding agent"); !errors.Is(err, forge.ErrLabelAbsent) {
		t.Fatalf("taking an absent label: %v", err)
	}
}

// A branch pushed over HTTP becomes a draft pull request (a WIP: title),
// found again by its branch; opening it again gives the same one.
func TestContractDelivery(t *testing.T) { both(t, delivery) }

func delivery(t *testing.T, w *world) {
	ctx := context.Background()
	repo, err := w.client.Repository(ctx, task.Ref{Forge: task.Gitea, Repo: w.repo, Kind: task.Issue, Number: 1})
	if err != nil || repo.DefaultBranch != "main" || !strings.HasSuffix(repo.CloneURL, "/"+w.repo+".git") {
		t.Fatalf("Repository = %+v, %v", repo, err)
	}
	dir := t.TempDir()
	u, _ := url.Parse(repo.CloneURL)
	u.User = url.UserPassword(gitea.Kind.GitUser, w.botTok)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("clone", "-q", u.String(), ".")
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("-c", "user.name=bot", "-c", "user.email=bot@example.com", "checkout", "-q", "-b", "agent/issue-1")
	git("add", ".")
	git("-c", "user.name=bot", "-c", "user.email=bot@example.com", "commit", "-q", "-m", "add hello")
	git("push", "-q", "origin", "agent/issue-1")

	ref := w.issue("Say hello")
	if _, ok, err := w.client.FindChange(ctx, ref, "agent/issue-1"); err != nil || ok {
		t.Fatalf("FindChange before = %v, %v", ok, err)
	}
	nc := forge.NewChange{Head: "agent/issue-1", Base: "main", Title: "Say hello", Body: "Closes #1", Draft: true}
	ch, err := w.client.OpenChange(ctx, ref, nc)
	if err != nil || !ch.Draft || ch.Head != "agent/issue-1" || ch.Base != "main" || ch.Number == 0 {
		t.Fatalf("OpenChange = %+v, %v", ch, err)
	}
	again, err := w.client.OpenChange(ctx, ref, nc)
	if err != nil || again.Number != ch.Number {
		t.Fatalf("OpenChange again = %+v, %v; want #%d", again, err, ch.Number)
	}
	found, ok, err := w.client.FindChange(ctx, ref, "agent/issue-1")
	if err != nil || !ok || found.Number != ch.Number {
		t.Fatalf("FindChange = %+v, %v, %v", found, ok, err)
	}
	if err := w.client.EditChange(ctx, ref, ch.Number, "New body"); err != nil {
		t.Fatal(err)
	}
	pr := task.Ref{Forge: task.Gitea, Repo: w.repo, Kind: task.PullRequest, Number: ch.Number}
	got, err := w.client.Get(ctx, pr)
	if err != nil || got.Body != "New body" || got.HeadBranch != "agent/issue-1" || got.BaseBranch != "main" || got.Fork ||
		!strings.HasPrefix(got.Title, "WIP: ") {
		t.Fatalf("Get(pull request) = %+v, %v", got, err)
	}
	// A pull request is claimed as an issue is: its label, its reactions.
	if err := w.client.AddLabel(ctx, pr, "coding agent"); err != nil {
		t.Fatal(err)
	}
	if err := w.client.TakeLabel(ctx, pr, "coding agent"); err != nil {
		t.Fatalf("taking the pull request's label: %v", err)
	}
	if err := w.client.TakeLabel(ctx, pr, "coding agent"); !errors.Is(err, forge.ErrLabelAbsent) {
		t.Fatalf("taking it again: %v", err)
	}
	if rs := w.b.reactions(w, pr.Number); len(rs) != 0 {
		t.Fatalf("reactions left on the pull request: %q", rs)
	}
}

// Gitea's deliveries, as it sends them, are verified and read by Hooks: a
// label added, a comment.
func TestContractWebhooks(t *testing.T) { both(t, webhooks) }

func webhooks(t *testing.T, w *world) {
	const secret = "gitea-hook-secret"
	labels := task.Labels{Bot: "coding agent", Paused: "coding agent paused"}
	got := make(chan forge.Event, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		h := gitea.Hooks{}
		p, ok := h.Admit(r, secret)
		body, _ := io.ReadAll(r.Body)
		if !ok {
			t.Errorf("a delivery was refused: %v", r.Header)
			return
		}
		_, _ = p.Write(body)
		if !p.Valid() {
			t.Errorf("a delivery's signature is wrong")
			return
		}
		if _, reads := h.Reads(r); !reads {
			return
		}
		ev, err := h.Read(r, body, labels)
		if err != nil {
			t.Errorf("reading %s: %v", r.Header.Get("X-Gitea-Event"), err)
			return
		}
		got <- ev
	}))
	defer srv.Close()
	ref := w.issue("Hooked")
	w.b.hooked(w, srv.URL, secret, ref.Number, "coding agent")
	var labelled, commented bool
	for deadline := time.After(30 * time.Second); !labelled || !commented; {
		select {
		case ev := <-got:
			labelled = labelled || ev.What == forge.Labelled && ev.Ref == ref
			commented = commented || ev.What == forge.Commented && ev.Ref == ref && ev.Author == w.bob
		case <-deadline:
			t.Fatalf("in 30 s: labelled %v, commented %v", labelled, commented)
		}
	}
}
