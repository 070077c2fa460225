package forgetest

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Gitea emulates the part of Gitea's REST API (/api/v1, as Gitea 1.26 and
// Forgejo answer it) the daemon uses: repositories, their labels (by id),
// issues and pull requests sharing one number sequence, comments, the
// timeline's label events, reactions on issues and comments (one of a kind
// per user, as Gitea's unique index keeps them), collaborator permissions
// (shown to the repository's administrators only) and pull requests, with
// Link-header pagination and second-precision timestamps. Each repository
// is served over git's smart HTTP at /{owner}/{name}.git. Seed it with
// AddRepo, AddIssue, AddPull, AddComment, AddLabelBy and SetPermission;
// inspect it with Labels, Comments, Reactions, Pulls, Requests and Count;
// make webhook deliveries with LabelHook and CommentHook; break it with
// Inject.
type Gitea struct {
	base
	*GitRepos

	// Token is the access token the emulator accepts ("Authorization:
	// token …", or as git's password).
	Token string
	// BotUsername is the user the token belongs to (GET /user); it
	// administers every repository unless SetPermission says otherwise.
	BotUsername string

	t   testing.TB
	srv *httptest.Server

	// revoked: Token is answered 401 (RevokeToken), on the API and by git.
	revoked atomic.Bool

	dmu    sync.Mutex // guards everything below
	repos  map[string]*gtRepo
	nextID int64
	last   time.Time
}

type gtRepo struct {
	id        int64
	full      string
	items     map[int]*gtItem
	next      int
	labels    []*gtLabel
	perms     map[string]string // lowercased user → none, read, write, admin
	defBranch string
}

type gtLabel struct {
	id    int64
	name  string
	color string
}

type gtItem struct {
	id        int64
	number    int
	pull      bool
	title     string
	body      string
	author    string
	state     string
	labels    []int64
	assignees []string
	head      string
	base      string
	headRepo  string // the head branch's repository; "" for the item's own
	created   time.Time
	updated   time.Time
	comments  []*gtComment
	events    []gtEvent
	reactions []gtReaction
}

type gtComment struct {
	id        int64
	author    string
	body      string
	created   time.Time
	updated   time.Time
	reactions []gtReaction
}

// gtEvent is a label added (add) or removed on the timeline.
type gtEvent struct {
	id      int64
	user    string
	label   *gtLabel
	add     bool
	created time.Time
}

type gtReaction struct {
	user    string
	content string
	created time.Time
}

// NewGitea starts an emulated Gitea; it is closed when the test ends.
func NewGitea(t testing.TB) *Gitea {
	t.Helper()
	g := &Gitea{Token: "gitea-forgetest-token", BotUsername: "coding-agent-bot", t: t, repos: map[string]*gtRepo{}, nextID: 500}
	g.GitRepos = newGitRepos(t, "Gitea", func(tok string) bool {
		return !g.revoked.Load() && subtle.ConstantTimeCompare([]byte(tok), []byte(g.Token)) == 1
	})
	api := g.wrap(g.routes(), gtErrBody)
	git := g.wrap(g.GitRepos, gitErrBody)
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := gitPath(r.URL.Path); ok {
			git.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	}))
	g.GitRepos.url = g.srv.URL
	t.Cleanup(g.srv.Close)
	return g
}

// RevokeToken makes Token answered 401 from now on, as when its user
// deletes it.
func (g *Gitea) RevokeToken() { g.revoked.Store(true) }

// URL is the instance's root URL (the API is under /api/v1).
func (g *Gitea) URL() string { return g.srv.URL }

// Client returns an HTTP client for the emulator.
func (g *Gitea) Client() *http.Client { return g.srv.Client() }

// stamp is the time now, to the second as Gitea keeps it, never before
// one handed out already.
func (g *Gitea) stamp() time.Time {
	now := g.clock().UTC().Truncate(time.Second)
	if now.Before(g.last) {
		now = g.last
	}
	g.last = now
	return now
}

func (g *Gitea) id() int64 { g.nextID++; return g.nextID }

// AddRepo creates the repository "owner/name" (with a main branch).
func (g *Gitea) AddRepo(full string) {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	g.repoLocked(full)
}

func (g *Gitea) repoLocked(full string) *gtRepo {
	key := strings.ToLower(full)
	if r := g.repos[key]; r != nil {
		return r
	}
	if err := g.declare(full); err != nil {
		g.t.Fatalf("forgetest: %v", err)
	}
	r := &gtRepo{id: g.id(), full: full, items: map[int]*gtItem{}, next: 1, perms: map[string]string{}, defBranch: "main"}
	r.perms[strings.ToLower(g.BotUsername)] = "admin"
	g.repos[key] = r
	return r
}

// label is repo's label name, made when missing.
func (g *Gitea) label(r *gtRepo, name string) *gtLabel {
	for _, l := range r.labels {
		if l.name == name {
			return l
		}
	}
	l := &gtLabel{id: g.id(), name: name, color: "ededed"}
	r.labels = append(r.labels, l)
	return l
}

// AddIssue creates an issue and returns its number; its labels are added
// by s.LabeledBy (the repository's owner when "").
func (g *Gitea) AddIssue(repo string, s IssueSeed) int {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	return g.addItemLocked(repo, s, nil).number
}

// AddPull creates a pull request and returns its number. Its head branch
// is made in git (from main, with one commit) when it does not exist.
func (g *Gitea) AddPull(repo string, s PullSeed) int {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	return g.addItemLocked(repo, s.IssueSeed, &s).number
}

func (g *Gitea) addItemLocked(repo string, s IssueSeed, p *PullSeed) *gtItem {
	r := g.repoLocked(repo)
	now := g.stamp()
	it := &gtItem{id: g.id(), number: r.next, title: s.Title, body: s.Body, author: cmp.Or(s.Author, "octocat"),
		state: "open", assignees: s.Assignees, created: now, updated: now}
	if s.State == "closed" {
		it.state = "closed"
	}
	r.next++
	if p != nil {
		it.pull, it.head, it.base = true, cmp.Or(p.Head, "feature"), cmp.Or(p.Base, "main")
		headRepo := repo
		if p.HeadRepo != "" && !strings.EqualFold(p.HeadRepo, repo) {
			it.headRepo, headRepo = p.HeadRepo, p.HeadRepo
			g.repoLocked(p.HeadRepo)
		}
		if err := g.declare(headRepo, it.head); err != nil {
			g.t.Fatalf("forgetest: %v", err)
		}
		if it.headRepo != "" {
			g.declarePull(repo, "refs/pull/"+strconv.Itoa(it.number)+"/head", it.headRepo, it.head)
		}
		if p.Draft && !strings.HasPrefix(it.title, "WIP:") {
			it.title = "WIP: " + it.title
		}
	}
	r.items[it.number] = it
	by := cmp.Or(s.LabeledBy, strings.SplitN(repo, "/", 2)[0])
	for _, l := range s.Labels {
		g.relabel(r, it, g.label(r, l), true, by)
	}
	return it
}

// relabel adds (add) or removes l, with its timeline event when that
// changed anything.
func (g *Gitea) relabel(r *gtRepo, it *gtItem, l *gtLabel, add bool, user string) bool {
	has := slices.Contains(it.labels, l.id)
	if has == add {
		return false
	}
	if add {
		it.labels = append(it.labels, l.id)
	} else {
		it.labels = slices.DeleteFunc(it.labels, func(id int64) bool { return id == l.id })
	}
	now := g.stamp()
	it.events = append(it.events, gtEvent{id: g.id(), user: user, label: l, add: add, created: now})
	it.updated = now
	return true
}

// AddLabelBy adds label to repo#number as user.
func (g *Gitea) AddLabelBy(repo string, number int, label, user string) {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	r, it := g.mustItem(repo, number)
	g.relabel(r, it, g.label(r, label), true, user)
}

// RemoveLabelBy removes label from repo#number as user.
func (g *Gitea) RemoveLabelBy(repo string, number int, label, user string) {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	r, it := g.mustItem(repo, number)
	g.relabel(r, it, g.label(r, label), false, user)
}

// AddComment adds a comment by author and returns its id.
func (g *Gitea) AddComment(repo string, number int, author, body string) int64 {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	_, it := g.mustItem(repo, number)
	return g.addComment(it, author, body).id
}

func (g *Gitea) addComment(it *gtItem, author, body string) *gtComment {
	now := g.stamp()
	c := &gtComment{id: g.id(), author: author, body: body, created: now, updated: now}
	it.comments = append(it.comments, c)
	it.updated = now
	return c
}

// SetPermission gives user perm ("read", "write", "admin" or "none") on
// repo; the repository's owner is its owner whatever this says.
func (g *Gitea) SetPermission(repo, user, perm string) {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	g.repoLocked(repo).perms[strings.ToLower(user)] = perm
}

func (g *Gitea) mustItem(repo string, number int) (*gtRepo, *gtItem) {
	g.t.Helper()
	r := g.repos[strings.ToLower(repo)]
	if r == nil || r.items[number] == nil {
		g.t.Fatalf("forgetest: %s#%d does not exist", repo, number)
	}
	return r, r.items[number]
}

// Labels are repo#number's labels' names, sorted.
func (g *Gitea) Labels(repo string, number int) []string {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	r, it := g.mustItem(repo, number)
	var out []string
	for _, id := range it.labels {
		for _, l := range r.labels {
			if l.id == id {
				out = append(out, l.name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// LabelColor is the colour of repo's label name ("" for none), as Gitea
// keeps it: six hex digits.
func (g *Gitea) LabelColor(repo, name string) string {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	if r := g.repos[strings.ToLower(repo)]; r != nil {
		for _, l := range r.labels {
			if l.name == name {
				return l.color
			}
		}
	}
	return ""
}

// Comments are repo#number's comments, oldest first.
func (g *Gitea) Comments(repo string, number int) []Comment {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	_, it := g.mustItem(repo, number)
	out := make([]Comment, 0, len(it.comments))
	for _, c := range it.comments {
		out = append(out, Comment{ID: c.id, Author: c.author, Body: c.body, CreatedAt: c.created, UpdatedAt: c.updated})
	}
	return out
}

// Reactions are the reactions on repo#number (comment 0) or on one of its
// comments, "user:content" each.
func (g *Gitea) Reactions(repo string, number int, comment int64) []string {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	_, it := g.mustItem(repo, number)
	rs := it.reactions
	for _, c := range it.comments {
		if c.id == comment {
			rs = c.reactions
		}
	}
	var out []string
	for _, x := range rs {
		out = append(out, x.user+":"+x.content)
	}
	return out
}

// GiteaPull is a pull request as Pulls lists it.
type GiteaPull struct {
	Number     int
	Title      string
	Body       string
	Head, Base string
	State      string
}

// Pulls are repo's pull requests, by number.
func (g *Gitea) Pulls(repo string) []GiteaPull {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	r := g.repos[strings.ToLower(repo)]
	if r == nil {
		return nil
	}
	var out []GiteaPull
	for _, it := range r.items {
		if it.pull {
			out = append(out, GiteaPull{Number: it.number, Title: it.title, Body: it.body, Head: it.head, Base: it.base, State: it.state})
		}
	}
	slices.SortFunc(out, func(a, b GiteaPull) int { return a.Number - b.Number })
	return out
}

// giteaDelivery signs body with secret and sets Gitea's delivery headers
// (and Forgejo's, which Forgejo sends beside them).
func giteaDelivery(event, eventType string, body []byte, secret string) Delivery {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "Go-http-client/1.1")
	id := newUUID()
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	sig := hex.EncodeToString(m.Sum(nil))
	for _, p := range []string{"X-Gitea-", "X-Forgejo-", "X-Gogs-", "X-GitHub-"} {
		h.Set(p+"Delivery", id)
		h.Set(p+"Event", event)
		h.Set(p+"Event-Type", eventType)
		if p != "X-GitHub-" {
			h.Set(p+"Signature", sig)
		}
	}
	h.Set("X-Hub-Signature-256", "sha256="+sig)
	return Delivery{Header: h, Body: body}
}

// LabelHook adds label to repo#number as actor and returns the delivery
// Gitea then makes: an issues (or pull_request) event with action
// label_updated and the item's labels as they are now (Gitea does not
// say which label changed), signed with secret.
func (g *Gitea) LabelHook(repo string, number int, label, actor, secret string) Delivery {
	g.AddLabelBy(repo, number, label, actor)
	return g.itemHook(repo, number, "label_updated", actor, secret)
}

// UnlabelHook removes label and returns the delivery that follows.
func (g *Gitea) UnlabelHook(repo string, number int, label, actor, secret string) Delivery {
	g.RemoveLabelBy(repo, number, label, actor)
	return g.itemHook(repo, number, "label_updated", actor, secret)
}

func (g *Gitea) itemHook(repo string, number int, action, actor, secret string) Delivery {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	r, it := g.mustItem(repo, number)
	u := urls{api: g.srv.URL + "/api/v1", html: g.srv.URL}
	payload := map[string]any{"action": action, "number": it.number, "repository": g.repoJSON(u, r),
		"sender": g.userJSON(u, actor)}
	event, eventType := "issues", "issue_label"
	if it.pull {
		event, eventType = "pull_request", "pull_request_label"
		payload["pull_request"] = g.pullJSON(u, r, it)
	} else {
		payload["issue"] = g.issueJSON(u, r, it)
	}
	body, _ := json.Marshal(payload)
	return giteaDelivery(event, eventType, body, secret)
}

// CommentHook adds a comment by author and returns the issue_comment
// delivery Gitea then makes, signed with secret.
func (g *Gitea) CommentHook(repo string, number int, author, body, secret string) Delivery {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	r, it := g.mustItem(repo, number)
	c := g.addComment(it, author, body)
	u := urls{api: g.srv.URL + "/api/v1", html: g.srv.URL}
	eventType := "issue_comment"
	if it.pull {
		eventType = "pull_request_comment"
	}
	b, _ := json.Marshal(map[string]any{"action": "created", "issue": g.issueJSON(u, r, it), "comment": g.commentJSON(u, r, it, c),
		"repository": g.repoJSON(u, r), "sender": g.userJSON(u, author), "is_pull": it.pull})
	return giteaDelivery("issue_comment", eventType, b, secret)
}
