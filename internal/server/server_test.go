package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	ghforge "github.com/coding-agent/coding-agent/internal/forge/github"
	glforge "github.com/coding-agent/coding-agent/internal/forge/gitlab"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/server"
	"github.com/coding-agent/coding-agent/internal/task"
)

const (
	ghSecret = "gh-webhook-secret-0123"
	glToken  = "gl-webhook-token-4567"
)

var labels = task.Labels{Bot: "coding agent", Paused: "coding agent paused", Processing: "coding agent processing"}

// events records what the listener signalled.
type events struct {
	mu        sync.Mutex
	labelled  []task.Ref
	commented []task.Ref
}

func (e *events) Labelled(ref task.Ref) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.labelled = append(e.labelled, ref)
}

func (e *events) Commented(ref task.Ref) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.commented = append(e.commented, ref)
}

func (e *events) got() ([]task.Ref, []task.Ref) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.labelled), slices.Clone(e.commented)
}

type listener struct {
	t   *testing.T
	srv *httptest.Server
	ev  *events

	mu      sync.Mutex
	results []string // "forge result" of each delivery (Options.Delivered)
}

func (l *listener) delivered(forge, result string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.results = append(l.results, forge+" "+result)
}

func (l *listener) resultsNow() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.results)
}

func newListener(t *testing.T, o server.Options) *listener {
	t.Helper()
	ev := &events{}
	o.Events, o.Labels = ev, labels
	if o.Watched == nil {
		o.Watched = func(_, repo string, _ int64) bool { return strings.EqualFold(repo, "acme/app") }
	}
	o.Self = func(author string) bool { return author == "coding-agent-bot" }
	l := &listener{t: t, ev: ev}
	o.Delivered = l.delivered
	l.srv = httptest.NewServer(server.New(o))
	t.Cleanup(l.srv.Close)
	return l
}

// send delivers d at path and returns the status and the body.
func (l *listener) send(path string, d forgetest.Delivery) (int, string) {
	l.t.Helper()
	resp, err := d.Send(l.srv.Client(), l.srv.URL+path)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (l *listener) get(path string) (int, string) {
	l.t.Helper()
	resp, err := l.srv.Client().Get(l.srv.URL + path)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func both() server.Options { return server.Options{Webhooks: webhooks(ghSecret, glToken)} }

// webhooks are GitHub's webhook under ghSecret and GitLab's under glToken
// ("": not served).
func webhooks(ghSecret, glToken string) []server.Webhook {
	var w []server.Webhook
	if ghSecret != "" {
		w = append(w, server.Webhook{Forge: task.GitHub, Secret: ghSecret, Hooks: ghforge.Hooks{}})
	}
	if glToken != "" {
		w = append(w, server.Webhook{Forge: task.GitLab, Secret: glToken, Hooks: glforge.Hooks{}})
	}
	return w
}

func TestGitHubSignature(t *testing.T) {
	gh := forgetest.NewGitHub(t)
	gh.AddRepo("acme/app")
	n := gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	issue := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n}
	l := newListener(t, both())

	for name, d := range map[string]forgetest.Delivery{
		"unsigned":          gh.LabelHook("acme/app", n, "coding agent", "alice", ""),
		"another secret":    gh.LabelHook("acme/app", n, "coding agent", "alice", "not-the-secret"),
		"sha1 only":         withoutHeader(gh.LabelHook("acme/app", n, "coding agent", "alice", ghSecret), "X-Hub-Signature-256"),
		"body changed":      withBody(gh.LabelHook("acme/app", n, "coding agent", "alice", ghSecret), `{"action":"labeled"}`),
		"not hex":           withHeader(gh.LabelHook("acme/app", n, "coding agent", "alice", ghSecret), "X-Hub-Signature-256", "sha256=zz"),
		"a GitLab token in": withHeader(gh.LabelHook("acme/app", n, "coding agent", "alice", ""), "X-Gitlab-Token", glToken),
	} {
		if status, body := l.send("/webhooks/github", d); status != http.StatusUnauthorized {
			t.Errorf("%s: status %d (%s), want 401", name, status, body)
		}
	}
	if lb, cm := l.ev.got(); len(lb)+len(cm) != 0 {
		t.Fatalf("refused deliveries signalled %v %v", lb, cm)
	}

	signed := gh.LabelHook("acme/app", n, "coding agent", "alice", ghSecret)
	if status, body := l.send("/webhooks/github", signed); status != http.StatusAccepted {
		t.Fatalf("signed delivery: status %d (%s), want 202", status, body)
	}
	if lb, _ := l.ev.got(); !slices.Equal(lb, []task.Ref{issue}) {
		t.Fatalf("labelled %v, want %v", lb, issue)
	}
	want := append(slices.Repeat([]string{"github unauthorized"}, 6), "github accepted")
	if r := l.resultsNow(); !slices.Equal(r, want) {
		t.Errorf("results %v, want six unauthorized, then accepted", r)
	}
}

// A refused delivery leaves no trace: the same delivery id, properly
// signed, is still heard.
func TestRefusedDeliveryIsNotRemembered(t *testing.T) {
	gh := forgetest.NewGitHub(t)
	gh.AddRepo("acme/app")
	n := gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	l := newListener(t, both())
	good := gh.LabelHook("acme/app", n, "coding agent", "alice", ghSecret)
	forged := withHeader(good, "X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	if status, _ := l.send("/webhooks/github", forged); status != http.StatusUnauthorized {
		t.Fatalf("forged: %d", status)
	}
	if status, _ := l.send("/webhooks/github", good); status != http.StatusAccepted {
		t.Fatalf("good after forged: %d", status)
	}
}

func TestGitHubEvents(t *testing.T) {
	gh := forgetest.NewGitHub(t)
	gh.AddRepo("acme/app")
	gh.AddRepo("acme/other")
	n := gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	pr := gh.AddPull("acme/app", forgetest.PullSeed{IssueSeed: forgetest.IssueSeed{Title: "p", Author: "alice"}, Head: "f", Base: "main"})
	o := gh.AddIssue("acme/other", forgetest.IssueSeed{Title: "o", Author: "alice"})
	issue := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n}
	pull := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.PullRequest, Number: pr}
	l := newListener(t, both())

	for _, c := range []struct {
		name   string
		d      forgetest.Delivery
		status int
	}{
		{"bot label on an issue", gh.LabelHook("acme/app", n, "coding agent", "alice", ghSecret), 202},
		{"another label", gh.LabelHook("acme/app", n, "bug", "alice", ghSecret), 200},
		{"bot label on a pull request", gh.LabelHook("acme/app", pr, "coding agent", "alice", ghSecret), 202},
		{"comment on the issue", gh.CommentHook("acme/app", n, "bob", "also this", ghSecret), 202},
		{"comment on the pull request", gh.CommentHook("acme/app", pr, "bob", "and this", ghSecret), 202},
		{"the bot's own comment", gh.CommentHook("acme/app", n, "coding-agent-bot", "Working on it.", ghSecret), 200},
		{"a repository not configured", gh.LabelHook("acme/other", o, "coding agent", "alice", ghSecret), 200},
		{"ping", withHeader(gh.LabelHook("acme/app", n, "x", "alice", ghSecret), "X-GitHub-Event", "ping"), 200},
		{"push", withHeader(gh.LabelHook("acme/app", n, "y", "alice", ghSecret), "X-GitHub-Event", "push"), 200},
	} {
		if status, body := l.send("/webhooks/github", c.d); status != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.name, status, body, c.status)
		}
	}
	lb, cm := l.ev.got()
	if !slices.Equal(lb, []task.Ref{issue, pull}) {
		t.Errorf("labelled %v", lb)
	}
	if !slices.Equal(cm, []task.Ref{issue, pull}) {
		t.Errorf("commented %v", cm)
	}
}

func TestGitHubResumeByRemovingThePausedLabel(t *testing.T) {
	l := newListener(t, both())
	body := `{"action":"unlabeled","label":{"name":"coding agent paused"},"issue":{"number":4,"labels":[]},` +
		`"repository":{"full_name":"acme/app"},"sender":{"login":"alice"}}`
	d := signedGitHub("issues", body)
	if status, resp := l.send("/webhooks/github", d); status != http.StatusAccepted {
		t.Fatalf("status %d (%s)", status, resp)
	}
	if lb, _ := l.ev.got(); len(lb) != 1 || lb[0].Number != 4 {
		t.Fatalf("labelled %v", lb)
	}
}

func TestMalformedPayloadIs400(t *testing.T) {
	l := newListener(t, both())
	for _, body := range []string{`{"action":`, `{"action":"labeled","label":{"name":"coding agent"}}`} {
		if status, resp := l.send("/webhooks/github", signedGitHub("issues", body)); status != http.StatusBadRequest {
			t.Errorf("%s: status %d (%s), want 400", body, status, resp)
		}
	}
	if want := []string{"github malformed", "github malformed"}; !slices.Equal(l.resultsNow(), want) {
		t.Errorf("results %v, want %v", l.resultsNow(), want)
	}
}

func TestDuplicateDeliveriesAreIgnored(t *testing.T) {
	gh := forgetest.NewGitHub(t)
	gh.AddRepo("acme/app")
	n := gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	gl := forgetest.NewGitLab(t)
	gl.AddProject("acme/app")
	iid := gl.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	l := newListener(t, both())

	d := gh.LabelHook("acme/app", n, "coding agent", "alice", ghSecret)
	for i, want := range []int{202, 200, 200} {
		if status, body := l.send("/webhooks/github", d); status != want {
			t.Errorf("GitHub delivery %d: status %d (%s), want %d", i+1, status, body, want)
		}
	}
	g := gl.LabelHook("acme/app", forgetest.KindIssue, iid, "coding agent", "alice", glToken)
	if status, _ := l.send("/webhooks/gitlab", g); status != 202 {
		t.Errorf("GitLab delivery: %d", status)
	}
	// A retry keeps its Idempotency-Key; another hook of the same event
	// (a group's and a project's) has the same X-Gitlab-Event-UUID.
	retry := withHeader(g, "X-Gitlab-Event-UUID", "0b5c3a52-0000-4000-8000-000000000001")
	sibling := withHeader(g, "Idempotency-Key", "0b5c3a52-0000-4000-8000-000000000002")
	for name, d := range map[string]forgetest.Delivery{"retry": retry, "another hook": sibling} {
		if status, body := l.send("/webhooks/gitlab", d); status != 200 || !strings.Contains(body, "duplicate") {
			t.Errorf("GitLab %s: status %d (%s), want 200 duplicate", name, status, body)
		}
	}
	if lb, _ := l.ev.got(); len(lb) != 2 {
		t.Fatalf("labelled %d times, want once per forge: %v", len(lb), lb)
	}
	if want := []string{"github accepted", "github duplicate", "github duplicate", "gitlab accepted", "gitlab duplicate",
		"gitlab duplicate"}; !slices.Equal(l.resultsNow(), want) {
		t.Errorf("results %v, want %v", l.resultsNow(), want)
	}
}

func TestDeliveriesAreRememberedBoundedly(t *testing.T) {
	gh := forgetest.NewGitHub(t)
	gh.AddRepo("acme/app")
	n := gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	o := both()
	o.Deliveries = 2
	l := newListener(t, o)
	// Other deliveries have other bodies: a body seen within the hour is
	// a duplicate too.
	first := gh.LabelHook("acme/app", n, "coding agent", "alice", ghSecret)
	l.send("/webhooks/github", first)
	l.send("/webhooks/github", gh.CommentHook("acme/app", n, "bob", "second", ghSecret))
	if status, _ := l.send("/webhooks/github", first); status != 200 {
		t.Fatalf("still remembered: %d", status)
	}
	l.send("/webhooks/github", gh.CommentHook("acme/app", n, "bob", "third", ghSecret))
	if status, _ := l.send("/webhooks/github", first); status != 202 {
		t.Fatalf("two newer deliveries later, the first is forgotten: status %d, want 202", status)
	}
}

func TestGitLabToken(t *testing.T) {
	gl := forgetest.NewGitLab(t)
	gl.AddProject("acme/app")
	iid := gl.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	l := newListener(t, both())
	for name, d := range map[string]forgetest.Delivery{
		"no token":      gl.LabelHook("acme/app", forgetest.KindIssue, iid, "coding agent", "alice", ""),
		"wrong token":   gl.LabelHook("acme/app", forgetest.KindIssue, iid, "coding agent", "alice", glToken+"x"),
		"token's start": gl.LabelHook("acme/app", forgetest.KindIssue, iid, "coding agent", "alice", glToken[:5]),
		"GitHub's HMAC": withHeader(gl.LabelHook("acme/app", forgetest.KindIssue, iid, "coding agent", "alice", ""), "X-Hub-Signature-256", "sha256=00"),
	} {
		if status, body := l.send("/webhooks/gitlab", d); status != http.StatusUnauthorized {
			t.Errorf("%s: status %d (%s), want 401", name, status, body)
		}
	}
	if lb, cm := l.ev.got(); len(lb)+len(cm) != 0 {
		t.Fatalf("refused deliveries signalled %v %v", lb, cm)
	}
	// The refused deliveries' label is on the issue now: another issue.
	next := gl.AddIssue("acme/app", forgetest.IssueSeed{Title: "u", Author: "alice"})
	if status, body := l.send("/webhooks/gitlab", gl.LabelHook("acme/app", forgetest.KindIssue, next, "coding agent", "alice", glToken)); status != 202 {
		t.Fatalf("status %d (%s)", status, body)
	}
}

func TestGitLabEvents(t *testing.T) {
	gl := forgetest.NewGitLab(t)
	gl.AddProject("acme/app")
	gl.AddProject("acme/other")
	iid := gl.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	mr := gl.AddMR("acme/app", forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: "m", Author: "alice"}, SourceBranch: "f", TargetBranch: "main"})
	other := gl.AddIssue("acme/other", forgetest.IssueSeed{Title: "o", Author: "alice"})
	issue := task.Ref{Forge: task.GitLab, Repo: "acme/app", Kind: task.Issue, Number: iid}
	merge := task.Ref{Forge: task.GitLab, Repo: "acme/app", Kind: task.MergeRequest, Number: mr}
	l := newListener(t, both())
	for _, c := range []struct {
		name   string
		d      forgetest.Delivery
		status int
	}{
		{"another label", gl.LabelHook("acme/app", forgetest.KindIssue, iid, "bug", "alice", glToken), 200},
		{"bot label on an issue", gl.LabelHook("acme/app", forgetest.KindIssue, iid, "coding agent", "alice", glToken), 202},
		{"a label beside the bot's", gl.LabelHook("acme/app", forgetest.KindIssue, iid, "docs", "alice", glToken), 200},
		{"bot label on a merge request", gl.LabelHook("acme/app", forgetest.KindMergeRequest, mr, "coding agent", "alice", glToken), 202},
		{"note on the issue", gl.NoteHook("acme/app", forgetest.KindIssue, iid, "bob", "also this", glToken), 202},
		{"note on the merge request", gl.NoteHook("acme/app", forgetest.KindMergeRequest, mr, "bob", "and this", glToken), 202},
		{"the bot's own note", gl.NoteHook("acme/app", forgetest.KindMergeRequest, mr, "coding-agent-bot", "Working on it.", glToken), 200},
		{"confidential note", withHeader(gl.NoteHook("acme/app", forgetest.KindIssue, iid, "bob", "psst", glToken), "X-Gitlab-Event", "Confidential Note Hook"), 202},
		{"a project not configured", gl.LabelHook("acme/other", forgetest.KindIssue, other, "coding agent", "alice", glToken), 200},
		{"a push", withHeader(gl.NoteHook("acme/app", forgetest.KindIssue, iid, "bob", "x", glToken), "X-Gitlab-Event", "Push Hook"), 200},
	} {
		if status, body := l.send("/webhooks/gitlab", c.d); status != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.name, status, body, c.status)
		}
	}
	lb, cm := l.ev.got()
	if !slices.Equal(lb, []task.Ref{issue, merge}) {
		t.Errorf("labelled %v", lb)
	}
	if !slices.Equal(cm, []task.Ref{issue, merge, issue}) {
		t.Errorf("commented %v", cm)
	}
}

func TestGitLabResumeByRemovingThePausedLabel(t *testing.T) {
	l := newListener(t, both())
	body := `{"object_kind":"issue","event_type":"issue","project":{"id":7,"path_with_namespace":"acme/app"},` +
		`"object_attributes":{"iid":3,"action":"update"},"labels":[],` +
		`"changes":{"labels":{"previous":[{"title":"coding agent paused"}],"current":[]}}}`
	d := forgetest.Delivery{Header: http.Header{"X-Gitlab-Event": {"Issue Hook"}, "X-Gitlab-Token": {glToken}}, Body: []byte(body)}
	if status, resp := l.send("/webhooks/gitlab", d); status != http.StatusAccepted {
		t.Fatalf("status %d (%s)", status, resp)
	}
}

// A path whose secret is not configured is not served at all.
func TestWebhookPathNeedsItsSecret(t *testing.T) {
	gh := forgetest.NewGitHub(t)
	gh.AddRepo("acme/app")
	n := gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	l := newListener(t, server.Options{Webhooks: webhooks("", glToken)})
	if status, _ := l.send("/webhooks/github", gh.LabelHook("acme/app", n, "coding agent", "alice", "")); status != http.StatusNotFound {
		t.Fatalf("status %d, want 404", status)
	}
	if status, _ := l.get("/metrics"); status != http.StatusNotFound {
		t.Fatalf("/metrics without a handler: %d", status)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	var why error
	l := newListener(t, server.Options{Ready: func(context.Context) error { return why }})
	if status, body := l.get("/healthz"); status != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", status, body)
	}
	if status, _ := l.get("/readyz"); status != 200 {
		t.Fatalf("/readyz ready: %d", status)
	}
	why = errors.New("the state store cannot be read: sql: database is closed")
	if status, body := l.get("/readyz"); status != 503 || !strings.Contains(body, "database is closed") {
		t.Fatalf("/readyz not ready: %d %q", status, body)
	}
}

func signedGitHub(event, body string) forgetest.Delivery {
	d := forgetest.Delivery{Header: http.Header{}, Body: []byte(body)}
	d.Header.Set("X-GitHub-Event", event)
	d.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	d.Header.Set("X-Hub-Signature-256", "sha256="+hmacHex(ghSecret, body))
	return d
}

func withHeader(d forgetest.Delivery, k, v string) forgetest.Delivery {
	d.Header = d.Header.Clone()
	d.Header.Set(k, v)
	return d
}

func withoutHeader(d forgetest.Delivery, k string) forgetest.Delivery {
	d.Header = d.Header.Clone()
	d.Header.Del(k)
	return d
}

func withBody(d forgetest.Delivery, body string) forgetest.Delivery {
	d.Body = []byte(body)
	return d
}
