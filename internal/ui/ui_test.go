package ui

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/golden"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
)

const token = "ui-token-0123456789abcdef"

var t0 = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

// seeded is a store holding a task in each end a page must show: done (with
// a delivery and a check), failed, paused (with a comment heard and two
// ignored) and awaiting a tool server's answer.
func seeded(t testing.TB) *sqlite.Store {
	now := t0
	s, err := sqlite.OpenWith(t.Context(), t.TempDir(), sqlite.Options{Hostname: "agent-1", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	owner := store.Owner{Host: "agent-1", PID: 1, Instance: "i1", Provider: "ollama", Model: "qwen3-coder:30b", Lease: time.Hour}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tasks := []struct {
		ref    task.Ref
		status task.Status
		why    string
		events []store.Event
	}{
		{task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 7}, task.Done, "", []store.Event{
			{At: at(0), Kind: store.EventRound, Title: "run started", Text: "Add a greeting file", URL: "https://github.com/acme/app/issues/7", Host: "agent-1"},
			{At: at(3 * time.Second), Kind: store.EventRequest, Title: "Writing hello.txt.", TokensIn: 1200, TokensOut: 80, Millis: 2900},
			{At: at(4 * time.Second), Kind: store.EventCall, Title: "workspace/write_file", Args: `{"path":"hello.txt","content":"hello\n"}`, Text: "Wrote 6 bytes to hello.txt.", Millis: 12},
			{At: at(6 * time.Second), Kind: store.EventRequest, Title: "Running the tests.", TokensIn: 1400, TokensOut: 40, Millis: 1800},
			{At: at(9 * time.Second), Kind: store.EventCall, Title: "workspace/run_command", Args: `{"command":"go test ./..."}`,
				Text: strings.Repeat("ok  \texample.com/app/pkg\t0.01s\n", 14) + "exit 0", Millis: 2500},
			{At: at(11 * time.Second), Kind: store.EventRequest, Title: "done", TokensIn: 1600, TokensOut: 30, Millis: 1200},
			{At: at(12 * time.Second), Kind: store.EventCheck, Title: "go test ./...", Text: "ok", Millis: 2000},
			{At: at(14 * time.Second), Kind: store.EventEnd, Title: "done"},
			{At: at(15 * time.Second), Kind: store.EventDelivery, Title: "the work was delivered", Text: "Pushed abc1234 to coding-agent/issue-7; draft pull request #8.", URL: "https://github.com/acme/app/pull/8"},
			{At: at(16 * time.Second), Kind: store.EventStatus, Title: "done: the task is done"},
		}},
		{task.Ref{Forge: task.GitLab, Repo: "group/sub/api", Kind: task.MergeRequest, Number: 3}, task.Failed, "the repository's checks still fail", []store.Event{
			{At: at(0), Kind: store.EventRound, Title: "run started", Text: "Fix the parser", URL: "https://gitlab.example.com/group/sub/api/-/merge_requests/3"},
			{At: at(2 * time.Second), Kind: store.EventRequest, Phase: "planning", Title: "plan: 2 actions", TokensIn: 900, TokensOut: 300, Millis: 4000},
			{At: at(5 * time.Second), Kind: store.EventCall, Phase: "execution", Title: "fs/edit_file (refused)", Args: `{"path":"../etc/passwd"}`, Text: "the path is outside the workspace", Error: true},
			{At: at(7 * time.Second), Kind: store.EventCompaction, Title: "conversation compacted from 30100 to 11800 tokens (the oldest part replaced by a summary)"},
			{At: at(9 * time.Second), Kind: store.EventCheck, Title: "pytest -q", Text: "FAILED test_parse.py::test_empty", Error: true, Exit: 1},
			{At: at(10 * time.Second), Kind: store.EventEnd, Title: "failed", Text: "the repository's checks still fail"},
		}},
		{task.Ref{Forge: task.Gitea, Repo: "acme/web", Kind: task.Issue, Number: 12}, task.Paused, "", []store.Event{
			{At: at(0), Kind: store.EventRound, Title: "run started", Text: "Refresh the styles"},
			{At: at(2 * time.Second), Kind: store.EventRequest, Title: "Looking around.", TokensIn: 700, TokensOut: 20, Millis: 900},
			{At: at(3 * time.Second), Kind: store.EventHeard, Title: "1 comment(s) handed to the agent, from @alice; 2 ignored", Count: 2},
			{At: at(4 * time.Second), Kind: store.EventEnd, Title: "paused", Text: `the "coding agent paused" label was added`},
		}},
		{task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 9}, task.Awaiting, "", []store.Event{
			{At: at(0), Kind: store.EventRound, Title: "run started", Text: "Deploy web"},
			{At: at(2 * time.Second), Kind: store.EventRequest, Title: "Deploying web.", TokensIn: 800, TokensOut: 25, Millis: 1100},
			{At: at(3 * time.Second), Kind: store.EventQuestion, Title: "deployer asked a question during deployer/deploy", Text: "Where should web be deployed?"},
			{At: at(3 * time.Second), Kind: store.EventEnd, Title: "asked", Text: "a server's question awaits an answer"},
			{At: at(4 * time.Second), Kind: store.EventStatus, Title: "asked: the task is awaiting"},
		}},
	}
	for i, tc := range tasks {
		now = t0.Add(time.Duration(i) * time.Minute)
		if _, err := s.Claim(t.Context(), tc.ref, owner); err != nil {
			t.Fatal(err)
		}
		if err := s.AddCounters(t.Context(), tc.ref, store.Counters{LLMCalls: 3, ToolCalls: 2, TokensIn: 4200, TokensOut: 150}); err != nil {
			t.Fatal(err)
		}
		for _, e := range tc.events {
			if err := s.AddEvent(t.Context(), tc.ref, e); err != nil {
				t.Fatal(err)
			}
		}
		now = now.Add(16 * time.Second)
		if err := s.SetStatus(t.Context(), tc.ref, tc.status, tc.why); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func pagesOf(t testing.TB, s Store) *httptest.Server {
	h, err := New(Options{Store: s, Token: token, Now: func() time.Time { return t0.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, auth bool) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if auth {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = fmt.Fprint(&b, readAll(t, resp))
	return resp.StatusCode, b.String(), resp.Header
}

func readAll(t *testing.T, resp *http.Response) string {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// The pages as they render, for a task in each end and the list with its
// filters (golden HTML: go test -update rewrites them).
func TestPagesRender(t *testing.T) {
	srv := pagesOf(t, seeded(t))
	for name, path := range map[string]string{
		"list":          "/tasks",
		"list-awaiting": "/tasks?state=awaiting",
		"list-repo":     "/tasks?repo=acme%2Fapp",
		"task-done":     "/tasks/github/acme/app/7",
		"task-failed":   "/tasks/gitlab/group/sub/api/!3",
		"task-paused":   "/tasks/gitea/acme/web/12",
		"task-awaiting": "/tasks/github/acme/app/9",
	} {
		t.Run(name, func(t *testing.T) {
			code, body, h := get(t, srv.URL+path, true)
			if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
				t.Fatalf("%s: %d %s\n%s", path, code, h.Get("Content-Type"), body)
			}
			golden.Check(t, name+".html", body)
		})
	}
}

// Without the token (none, a wrong one, a cookie of another value) every
// path is 401 and says nothing else; ?token= sets the cookie and sends the
// browser to the page without it; an unknown task is 404.
func TestPagesNeedTheToken(t *testing.T) {
	srv := pagesOf(t, seeded(t))
	for _, path := range []string{"/tasks", "/tasks/github/acme/app/7", "/tasks/nope", "/tasks?token=wrong-token-0123456789"} {
		code, body, _ := get(t, srv.URL+path, false)
		if code != http.StatusUnauthorized || strings.TrimSpace(body) != "401 Unauthorized" {
			t.Errorf("%s without the token: %d %q", path, code, body)
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/tasks", nil)
	req.AddCookie(&http.Cookie{Name: cookie, Value: "not-the-token-0123456789"})
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong cookie: %v %v", resp.StatusCode, err)
	}
	code, _, h := get(t, srv.URL+"/tasks/github/acme/app/7?token="+token, false)
	if code != http.StatusSeeOther || h.Get("Location") != "/tasks/github/acme/app/7" || !strings.Contains(h.Get("Set-Cookie"), cookie+"="+token) ||
		!strings.Contains(h.Get("Set-Cookie"), "HttpOnly") {
		t.Fatalf("?token=: %d, location %q, cookie %q", code, h.Get("Location"), h.Get("Set-Cookie"))
	}
	req, _ = http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/tasks/github/acme/app/7", nil)
	req.AddCookie(&http.Cookie{Name: cookie, Value: token})
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("with the cookie: %v %v", resp.StatusCode, err)
	}
	if code, _, _ := get(t, srv.URL+"/tasks/github/acme/app/99", true); code != http.StatusNotFound {
		t.Errorf("an unknown task: %d", code)
	}
	if _, err := New(Options{Store: seeded(t), Token: "short"}); err == nil {
		t.Error("a short token was taken")
	}
}

// A task's path is read back as the task, nested groups and pull or merge
// requests included.
func TestPathRoundTrip(t *testing.T) {
	for _, ref := range []task.Ref{
		{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 7},
		{Forge: task.GitHub, Repo: "acme/app", Kind: task.PullRequest, Number: 8},
		{Forge: task.GitLab, Repo: "group/sub/api", Kind: task.MergeRequest, Number: 3},
		{Forge: task.Gitea, Repo: "acme/web", Kind: task.Issue, Number: 12},
	} {
		got, err := refOf(strings.TrimPrefix(Path(ref), "/tasks/"))
		if err != nil || got != ref {
			t.Errorf("%s: %s read back as %v, %v", ref, Path(ref), got, err)
		}
	}
}

// A long result shows its first lines on the page; its whole text is one
// click away, as plain text, and only with the token.
func TestWholeTextOfAnEvent(t *testing.T) {
	srv := pagesOf(t, seeded(t))
	_, page, _ := get(t, srv.URL+"/tasks/github/acme/app/7", true)
	if !strings.Contains(page, `href="?event=4"`) || strings.Count(page, "example.com/app/pkg") != 8 {
		t.Fatalf("the page does not cut the long result to its first lines with a link to the rest:\n%s", page)
	}
	code, text, h := get(t, srv.URL+"/tasks/github/acme/app/7?event=4", true)
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") || strings.Count(text, "example.com/app/pkg") != 14 ||
		!strings.HasSuffix(text, "exit 0") {
		t.Fatalf("the whole text: %d %s\n%s", code, h.Get("Content-Type"), text)
	}
	for bad, want := range map[string]int{"?event=99": http.StatusNotFound, "?event=-1": http.StatusNotFound, "?event=x": http.StatusBadRequest} {
		if code, _, _ := get(t, srv.URL+"/tasks/github/acme/app/7"+bad, true); code != want {
			t.Errorf("%s: %d, want %d", bad, code, want)
		}
	}
	if code, _, _ := get(t, srv.URL+"/tasks/github/acme/app/7?event=4", false); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d", code)
	}
}
