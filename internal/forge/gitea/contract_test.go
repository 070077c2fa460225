package gitea_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
	"github.com/coding-agent/coding-agent/internal/task"
)

// The contract tests run against a Gitea (or Forgejo) instance named by
// CODING_AGENT_GITEA_URL, with an administrator's token in
// CODING_AGENT_GITEA_ADMIN_TOKEN: they make their own users, repository,
// labels and issues there, named afresh each run. docs/design.md says how
// to build and start Gitea 1.26 here. Without the variables they are
// skipped.
type instance struct {
	t     *testing.T
	url   string
	admin string
}

func realGitea(t *testing.T) *instance {
	u, tok := os.Getenv("CODING_AGENT_GITEA_URL"), os.Getenv("CODING_AGENT_GITEA_ADMIN_TOKEN")
	if u == "" || tok == "" {
		t.Skip("CODING_AGENT_GITEA_URL and CODING_AGENT_GITEA_ADMIN_TOKEN name no Gitea to test against")
	}
	return &instance{t: t, url: strings.TrimRight(u, "/"), admin: tok}
}

// call sends method path with body as JSON under token (or basic auth
// user:password when token holds a colon) and decodes the answer into
// out; it fails the test unless the status is want.
func (g *instance) call(method, path, token string, body, out any, want int) {
	g.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, g.url+"/api/v1"+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if user, pass, ok := strings.Cut(token, ":"); ok {
		req.SetBasicAuth(user, pass)
	} else {
		req.Header.Set("Authorization", "token "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		g.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			g.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

const password = "Contract-Passw0rd!"

// user makes a user and returns its login and a token of it.
func (g *instance) user(prefix, suffix string) (login, token string) {
	login = prefix + "-" + suffix
	g.call("POST", "/admin/users", g.admin, map[string]any{"username": login, "email": login + "@example.com",
		"password": password, "must_change_password": false}, nil, http.StatusCreated)
	var tk struct {
		SHA1 string `json:"sha1"`
	}
	g.call("POST", "/users/"+login+"/tokens", login+":"+password, map[string]any{"name": "t", "scopes": []string{"all"}}, &tk, http.StatusCreated)
	return login, tk.SHA1
}

// world is one run's users and repository: alice owns it, bob may write,
// carol may not, bot is the agent.
type world struct {
	*instance
	repo                     string
	bot, alice, bob, carol   string
	botTok, aliceTok, bobTok string
	client                   *gitea.Client
	ownerClient              *gitea.Client
	labelIDs                 map[string]int64
}

func newWorld(t *testing.T) *world {
	g := realGitea(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	s := hex.EncodeToString(b)
	w := &world{instance: g, labelIDs: map[string]int64{}}
	w.bot, w.botTok = g.user("bot", s)
	w.alice, w.aliceTok = g.user("alice", s)
	w.bob, w.bobTok = g.user("bob", s)
	w.carol, _ = g.user("carol", s)
	w.repo = w.alice + "/app"
	g.call("POST", "/user/repos", w.aliceTok, map[string]any{"name": "app", "auto_init": true, "default_branch": "main"}, nil, http.StatusCreated)
	g.call("PUT", "/repos/"+w.repo+"/collaborators/"+w.bob, w.aliceTok, map[string]any{"permission": "write"}, nil, http.StatusNoContent)
	// The bot administers the repository: Gitea shows others'
	// permissions to administrators only (CanWrite).
	g.call("PUT", "/repos/"+w.repo+"/collaborators/"+w.bot, w.aliceTok, map[string]any{"permission": "admin"}, nil, http.StatusNoContent)
	var err error
	if w.client, err = gitea.New(gitea.Options{APIURL: g.url, Token: w.botTok, Repositories: []string{w.repo}}); err != nil {
		t.Fatal(err)
	}
	if w.ownerClient, err = gitea.New(gitea.Options{APIURL: g.url + "/api/v1/", Token: w.botTok, Owner: w.alice}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) label(ctx context.Context, name string) int64 {
	w.t.Helper()
	if id, ok := w.labelIDs[name]; ok {
		return id
	}
	if err := w.client.CreateLabel(ctx, w.repo, name, "#1d76db"); err != nil {
		w.t.Fatal(err)
	}
	var ls []struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	w.call("GET", "/repos/"+w.repo+"/labels?limit=50", w.aliceTok, nil, &ls, http.StatusOK)
	for _, l := range ls {
		w.labelIDs[l.Name] = l.ID
	}
	return w.labelIDs[name]
}

// issue opens an issue as alice with labels.
func (w *world) issue(ctx context.Context, title string, labels ...string) task.Ref {
	w.t.Helper()
	ids := []int64{}
	for _, l := range labels {
		ids = append(ids, w.label(ctx, l))
	}
	var is struct {
		Number int `json:"number"`
	}
	w.call("POST", "/repos/"+w.repo+"/issues", w.aliceTok, map[string]any{"title": title, "body": "body of " + title, "labels": ids}, &is, http.StatusCreated)
	return task.Ref{Forge: task.Gitea, Repo: w.repo, Kind: task.Issue, Number: is.Number}
}

func TestContractReadAndTalk(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	acct, err := w.client.Account(ctx)
	if err != nil || acct.Login != w.bot || acct.Bot {
		t.Fatalf("Account = %+v, %v; want %s, not a bot", acct, err, w.bot)
	}
	if ok, err := w.client.CanPush(ctx, w.repo); err != nil || !ok {
		t.Fatalf("CanPush = %v, %v", ok, err)
	}
	ref := w.issue(ctx, "Add a greeting", "coding agent", "bug")
	other := w.issue(ctx, "Not for the agent", "bug")
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

	var bobs struct {
		ID int64 `json:"id"`
	}
	w.call("POST", fmt.Sprintf("/repos/%s/issues/%d/comments", w.repo, ref.Number), w.bobTok, map[string]any{"body": "Keep it short."}, &bobs, http.StatusCreated)
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
		if err := w.client.React(ctx, ref, bobs.ID, forge.ReactionSeen); err != nil {
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
	w.call("PUT", "/repos/"+w.repo+"/collaborators/"+w.bot, w.aliceTok, map[string]any{"permission": "write"}, nil, http.StatusNoContent)
	for _, u := range []struct {
		login string
		want  bool
	}{{w.bob, false}, {w.alice, true}, {w.carol, false}} {
		if ok, err := w.client.CanWrite(ctx, ref, u.login); err != nil || ok != u.want {
			t.Errorf("CanWrite(%s) by a writer = %v, %v; want %v", u.login, ok, err, u.want)
		}
	}
	w.label(ctx, "coding agent done")
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
	w.call("POST", fmt.Sprintf("/repos/%s/issues/%d/labels", w.repo, other.Number), w.bobTok,
		map[string]any{"labels": []int64{w.label(ctx, "coding agent")}}, nil, http.StatusOK)
	if who, err := w.client.LabeledBy(ctx, other, "coding agent"); err != nil || who != w.bob {
		t.Fatalf("LabeledBy = %q, %v; want %s", who, err, w.bob)
	}
	if who, err := w.client.LabeledBy(ctx, other, "coding agent done"); err != nil || who != w.bot {
		t.Fatalf("LabeledBy(done) = %q, %v; want %s", who, err, w.bot)
	}
}

// Of takers racing for one label, exactly one takes it; the lock reaction
// is gone afterwards.
func TestContractTakeLabel(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	ref := w.issue(ctx, "Race for it", "coding agent")
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
		var rs []struct {
			Content string `json:"content"`
		}
		w.call("GET", fmt.Sprintf("/repos/%s/issues/%d/reactions", w.repo, ref.Number), w.aliceTok, nil, &rs, http.StatusOK)
		if len(rs) != 0 {
			t.Fatalf("round %d: reactions left: %+v", round, rs)
		}
	}
	if err := w.client.TakeLabel(ctx, ref, "coding agent"); !errors.Is(err, forge.ErrLabelAbsent) {
		t.Fatalf("taking an absent label: %v", err)
	}
}

// A branch pushed over HTTP becomes a draft pull request (a WIP: title),
// found again by its branch; opening it again gives the same one.
func TestContractDelivery(t *testing.T) {
	w := newWorld(t)
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

	ref := w.issue(ctx, "Say hello")
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
}

// Gitea's deliveries, as it sends them, are verified and read by Hooks: a
// label added, a comment.
func TestContractWebhooks(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
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
	w.call("POST", "/repos/"+w.repo+"/hooks", w.aliceTok, map[string]any{"type": "gitea", "active": true,
		"events": []string{"issues", "issue_comment", "pull_request", "issue_label", "pull_request_label"},
		"config": map[string]string{"url": srv.URL, "content_type": "json", "secret": secret}}, nil, http.StatusCreated)
	ref := w.issue(ctx, "Hooked")
	w.call("POST", fmt.Sprintf("/repos/%s/issues/%d/labels", w.repo, ref.Number), w.bobTok,
		map[string]any{"labels": []int64{w.label(ctx, "coding agent")}}, nil, http.StatusOK)
	w.call("POST", fmt.Sprintf("/repos/%s/issues/%d/comments", w.repo, ref.Number), w.bobTok, map[string]any{"body": "hi"}, nil, http.StatusCreated)
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
