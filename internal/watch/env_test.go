package watch_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge"
	ghforge "github.com/coding-agent/coding-agent/internal/forge/github"
	glforge "github.com/coding-agent/coding-agent/internal/forge/gitlab"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/watch"
)

// start is when every emulated issue is opened.
var start = time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)

// clock is a time source that stands still until moved: the emulators'
// clock (when comments are created) and the Watcher's (its backoff).
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(t time.Time) *clock { return &clock{now: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// client is what the tests use of an adapter: what a Watcher needs, plus
// labels to pause and stop the task with.
type client interface {
	watch.Forge
	forge.Labeler
}

// env is one emulated forge with one issue, authored by alice and opened at
// start, and the real adapter on it.
type env struct {
	name string
	f    client
	ref  task.Ref
	bot  string
	clk  *clock // the emulator's clock

	addComment func(author, body string) int64
	addSystem  func(body string) int64 // nil: the forge has no system notes
	grantWrite func(user string)
	reactions  func(id int64) []string
	closeIssue func(t *testing.T)
	requests   func() []forgetest.Request
	reset      func()
	inject     func(forgetest.Fault)

	issuePath    string                               // the issue's URL path as sent
	commentsPath string                               // its comment (note) list's
	isPermission func(forgetest.Request, string) bool // a permission request about user
}

// setup says how to open an env.
type setup struct {
	assignees []string
	// cache puts the adapter on an HTTP client built like the app's: retry
	// → conditional-GET cache → network. Otherwise it talks to the emulator
	// directly, one request per call.
	cache bool
}

// forges are the two emulated forges every behaviour is checked on.
var forges = []struct {
	name string
	open func(*testing.T, setup) *env
}{
	{"github", openGitHub},
	{"gitlab", openGitLab},
}

// httpClient is the adapter's HTTP client over base.
func httpClient(base *http.Client, s setup) *http.Client {
	if !s.cache {
		return base
	}
	return httpx.NewClient(httpx.Options{
		Base:  httpx.NewCache(base.Transport, 100),
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
}

func openGitHub(t *testing.T, s setup) *env {
	t.Helper()
	g := forgetest.NewGitHub(t)
	clk := newClock(start)
	g.SetClock(clk.Now)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "Add --dry-run", Body: "please", Author: "alice",
		Labels: []string{"coding agent"}, Assignees: s.assignees})
	f, err := ghforge.New(ghforge.Options{APIURL: g.URL(), Token: g.Token, Repositories: []string{"acme/app"},
		HTTPClient: httpClient(g.Client(), s),
		Sleep:      func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	issuePath := "/repos/acme/app/issues/1"
	return &env{
		name: "github", f: f, bot: g.BotLogin, clk: clk,
		ref: task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n},
		addComment: func(author, body string) int64 {
			clk.Add(time.Second)
			return g.AddComment("acme/app", n, author, body)
		},
		grantWrite: func(user string) { g.SetPermission("acme/app", user, "write") },
		reactions:  func(id int64) []string { return g.Reactions("acme/app", id) },
		closeIssue: func(*testing.T) {
			clk.Add(time.Second)
			g.SetState("acme/app", n, "closed")
		},
		requests:     g.Requests,
		reset:        g.ResetRequests,
		inject:       g.Inject,
		issuePath:    issuePath,
		commentsPath: issuePath + "/comments",
		isPermission: func(r forgetest.Request, user string) bool {
			return strings.HasSuffix(r.Path, "/collaborators/"+user+"/permission")
		},
	}
}

func openGitLab(t *testing.T, s setup) *env {
	t.Helper()
	g := forgetest.NewGitLab(t)
	clk := newClock(start)
	g.SetClock(clk.Now)
	g.AddProject("acme/app")
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "Add --dry-run", Body: "please", Author: "alice",
		Labels: []string{"coding agent"}, Assignees: s.assignees})
	f, err := glforge.New(glforge.Options{APIURL: g.URL(), Token: g.Token, Projects: []string{"acme/app"},
		HTTPClient: httpClient(g.Client(), s),
		Sleep:      func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	issuePath := "/api/v4/projects/acme%2Fapp/issues/1"
	return &env{
		name: "gitlab", f: f, bot: g.BotUsername, clk: clk,
		ref: task.Ref{Forge: task.GitLab, Repo: "acme/app", Kind: task.Issue, Number: n},
		addComment: func(author, body string) int64 {
			clk.Add(time.Second)
			return g.AddNote("acme/app", forgetest.KindIssue, n, author, body, false)
		},
		addSystem: func(body string) int64 {
			clk.Add(time.Second)
			return g.AddNote("acme/app", forgetest.KindIssue, n, "alice", body, true)
		},
		grantWrite: func(user string) { g.AddMember("acme/app", user, 30) },
		reactions:  func(id int64) []string { return g.Awards("acme/app", forgetest.KindIssue, n, id) },
		closeIssue: func(t *testing.T) {
			t.Helper()
			clk.Add(time.Second)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, g.URL()+"/projects/acme%2Fapp/issues/1?state_event=close", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("PRIVATE-TOKEN", g.Token)
			resp, err := g.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("closing the issue: %s", resp.Status)
			}
		},
		requests:     g.Requests,
		reset:        g.ResetRequests,
		inject:       g.Inject,
		issuePath:    issuePath,
		commentsPath: issuePath + "/notes",
		isPermission: func(r forgetest.Request, user string) bool {
			return strings.HasSuffix(r.Path, "/members/all") && strings.Contains(r.Query, "query="+user)
		},
	}
}

// task reads the issue through the adapter, as a run does when it starts.
func (e *env) task(t *testing.T) task.Task {
	t.Helper()
	tk, err := e.f.Get(t.Context(), e.ref)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// watcher starts a Watcher on the issue as it is now, with no comments in
// the agent's context, hearing the author, people with write access and
// allowed.
func (e *env) watcher(t *testing.T, o watch.Options, allowed ...string) *watch.Watcher {
	t.Helper()
	o.Forge = e.f
	return watch.New(o, e.audience(e.f, e.task(t), allowed...), nil)
}

// audience is the default audience rule on tk: the author, people with
// write access and allowed are heard.
func (e *env) audience(f watch.Forge, tk task.Task, allowed ...string) *watch.Audience {
	return &watch.Audience{Forge: f, Task: tk, Bot: e.bot, Trust: watch.Trust{Allowed: allowed, HearAuthor: true}, Writers: true}
}

// count is how many requests since the last reset match.
func (e *env) count(match func(forgetest.Request) bool) int {
	n := 0
	for _, r := range e.requests() {
		if match(r) {
			n++
		}
	}
	return n
}

func (e *env) issueGets() int {
	return e.count(func(r forgetest.Request) bool { return r.Method == http.MethodGet && r.Path == e.issuePath })
}

func (e *env) commentReads() int {
	return e.count(func(r forgetest.Request) bool { return r.Method == http.MethodGet && r.Path == e.commentsPath })
}

func (e *env) permissionChecks(user string) int {
	return e.count(func(r forgetest.Request) bool { return e.isPermission(r, user) })
}

// eachForge runs f as a subtest on each emulated forge.
func eachForge(t *testing.T, s setup, f func(t *testing.T, e *env)) {
	for _, fg := range forges {
		t.Run(fg.name, func(t *testing.T) { f(t, fg.open(t, s)) })
	}
}
