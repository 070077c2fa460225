package forgetest

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// GitHub emulates the parts of the GitHub REST API the agent uses, at the
// server root and under /api/v3 (GitHub Enterprise style), and serves each
// repository over git's smart HTTP at /{owner}/{repo}.git (its clone_url;
// see GitRepos for the credentials git must send). Seed it with AddRepo,
// AddIssue, AddPull, AddComment and SetPermission, and its repositories
// with the GitRepos helpers (CommitFile, CommitRandom); inspect it with
// Labels, Comments, Reactions, Requests and Count, and its repositories
// with GitDir, Branches, FileAt and Log; move its clock with SetClock;
// break it with Inject (git requests too).
//
// Token and BotLogin may be changed right after NewGitHub, before the first
// request.
type GitHub struct {
	base
	*GitRepos

	// Token is the only token accepted, as "Authorization: Bearer <token>"
	// or "Authorization: token <token>".
	Token string
	// BotLogin is the login of the token's user (GET /user); comments posted
	// through the API are authored by it.
	BotLogin string

	srv *httptest.Server

	st     sync.Mutex // guards the fields below
	repos  map[string]*ghRepo
	users  map[string]*ghUser
	rates  map[string]*ghRate
	nextID int64
	app    *ghApp // the GitHub App installed, if any (InstallApp)
	// tokenRevoked: Token is answered 401 (RevokeToken).
	tokenRevoked bool
}

// PullSeed describes a pull request to add. Pull requests share the issue
// number space, as on GitHub.
type PullSeed struct {
	IssueSeed
	Head  string // head branch; "" means "feature"
	Base  string // base branch; "" means "main"
	Draft bool
	// HeadRepo is the repository ("owner/name") the head branch is in,
	// for a pull request from a fork; "" means the pull request's own
	// repository. A missing one is created as a fork of it.
	HeadRepo string
}

// Comment is an issue comment as stored by the emulator. UpdatedAt moves
// when the comment is edited.
type Comment struct {
	ID        int64
	Author    string
	Body      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

type ghUser struct {
	id      int64
	login   string
	created time.Time
}

type ghLabel struct {
	id    int64
	name  string
	color string
}

type ghRepo struct {
	id      int64
	owner   string
	name    string
	parent  *ghRepo // the repository it is a fork of; nil for none
	created time.Time
	labels  []*ghLabel
	items   []*ghItem         // index number-1
	perms   map[string]string // lowercased login → role set with SetPermission
}

type ghItem struct {
	id        int64
	number    int
	title     string
	body      string
	author    string
	state     string
	labels    []*ghLabel
	assignees []string
	pull      *ghPull
	created   time.Time
	updated   time.Time
	closed    time.Time
	comments  []*ghComment
	events    []*ghEvent
}

// ghEvent is an issue event: a label added or removed, by whom.
type ghEvent struct {
	id      int64
	event   string // "labeled" or "unlabeled"
	actor   string
	label   *ghLabel
	created time.Time
}

type ghPull struct {
	head, base string
	headRepo   *ghRepo // where head is; the pull request's own repository unless a fork's
	draft      bool
}

type ghComment struct {
	id        int64
	author    string
	body      string
	created   time.Time
	updated   time.Time
	reactions []*ghReaction
}

type ghRate struct {
	limit  int
	used   int
	window time.Duration
	reset  time.Time
}

// NewGitHub starts an emulator and closes it when the test ends.
func NewGitHub(t testing.TB) *GitHub {
	t.Helper()
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	g := &GitHub{
		Token:    "ghp_test" + hex.EncodeToString(raw[:]),
		BotLogin: "coding-agent-bot",
		repos:    map[string]*ghRepo{},
		users:    map[string]*ghUser{},
		rates: map[string]*ghRate{
			"core":   {limit: 5000, window: time.Hour},
			"search": {limit: 30, window: time.Minute},
		},
	}
	g.GitRepos = newGitRepos(t, "GitHub", g.accepts)
	g.srv = httptest.NewServer(g.handler())
	g.GitRepos.url = g.srv.URL
	t.Cleanup(g.srv.Close)
	return g
}

// URL is the REST root, like https://api.github.com. The same API answers
// under URL()+"/api/v3".
func (g *GitHub) URL() string { return g.srv.URL }

// Client returns an HTTP client for the emulator's server.
func (g *GitHub) Client() *http.Client { return g.srv.Client() }

// SetRateLimit sets the request budget of a rate-limit resource ("core" or
// "search") and forgets what was used.
func (g *GitHub) SetRateLimit(resource string, limit int) {
	g.st.Lock()
	defer g.st.Unlock()
	g.rateLocked(resource).limit = limit
	g.rateLocked(resource).used = 0
}

// RateRemaining returns what is left of a rate-limit resource's budget.
func (g *GitHub) RateRemaining(resource string) int {
	g.st.Lock()
	defer g.st.Unlock()
	r := g.rateLocked(resource)
	return r.limit - r.used
}

// AddUser makes a user known. Users are also created on first mention.
func (g *GitHub) AddUser(login string) {
	g.st.Lock()
	defer g.st.Unlock()
	g.userLocked(login)
}

// AddRepo creates "owner/name". Adding an existing repository does nothing.
func (g *GitHub) AddRepo(fullName string) {
	g.st.Lock()
	defer g.st.Unlock()
	g.repoLocked(fullName)
}

// AddIssue creates an issue (creating the repository if needed) and returns
// its number.
func (g *GitHub) AddIssue(repo string, s IssueSeed) int {
	g.st.Lock()
	defer g.st.Unlock()
	return g.addItemLocked(repo, s, nil).number
}

// AddPull creates a pull request and returns its number. Its head branch is
// made in git (from main, with one commit) when it does not exist.
func (g *GitHub) AddPull(repo string, s PullSeed) int {
	g.st.Lock()
	defer g.st.Unlock()
	p := &ghPull{head: cmp.Or(s.Head, "feature"), base: cmp.Or(s.Base, "main"), draft: s.Draft}
	p.headRepo = g.repoLocked(repo)
	if s.HeadRepo != "" && !strings.EqualFold(s.HeadRepo, repo) {
		p.headRepo = g.repoLocked(s.HeadRepo)
		if p.headRepo.parent == nil {
			p.headRepo.parent = g.repoLocked(repo)
		}
	}
	it := g.addItemLocked(repo, s.IssueSeed, p)
	if err := g.declare(p.headRepo.fullName(), p.head); err != nil {
		panic("forgetest: " + err.Error())
	}
	if p.headRepo.fullName() != g.repoLocked(repo).fullName() {
		g.declarePull(repo, "refs/pull/"+strconv.Itoa(it.number)+"/head", p.headRepo.fullName(), p.head)
	}
	return it.number
}

// AddComment adds a comment by author to an issue or pull request and
// returns its id. It panics if the item does not exist.
func (g *GitHub) AddComment(repo string, number int, author, body string) int64 {
	g.st.Lock()
	defer g.st.Unlock()
	it := g.mustItemLocked(repo, number)
	return g.commentLocked(it, author, body).id
}

// SetState opens or closes an issue or pull request.
func (g *GitHub) SetState(repo string, number int, state string) {
	g.st.Lock()
	defer g.st.Unlock()
	it := g.mustItemLocked(repo, number)
	it.state = state
	it.updated = g.nowLocked()
	it.closed = time.Time{}
	if state == "closed" {
		it.closed = it.updated
	}
}

// SetCreatedAt backdates an issue or pull request (its updated_at too).
func (g *GitHub) SetCreatedAt(repo string, number int, t time.Time) {
	g.st.Lock()
	defer g.st.Unlock()
	it := g.mustItemLocked(repo, number)
	it.created = t.UTC().Truncate(time.Second)
	it.updated = it.created
	if it.state == "closed" {
		it.closed = it.created
	}
}

// AddLabelDirect adds a label the way the repository's owner in the web UI
// would, without going through the API (no request is logged).
func (g *GitHub) AddLabelDirect(repo string, number int, label string) {
	g.AddLabelBy(repo, number, label, "")
}

// AddLabelBy adds a label as actor would in the web UI ("" is the
// repository's owner): the issue's events record who added it.
func (g *GitHub) AddLabelBy(repo string, number int, label, actor string) {
	g.st.Lock()
	defer g.st.Unlock()
	r := g.repoLocked(repo)
	it := g.mustItemLocked(repo, number)
	g.attachLabelLocked(r, it, label, cmp.Or(actor, r.owner))
}

// RemoveLabelDirect removes a label as the repository's owner in the web
// UI would (an unlabeled event records it); an absent label is no change.
func (g *GitHub) RemoveLabelDirect(repo string, number int, label string) {
	g.st.Lock()
	defer g.st.Unlock()
	r := g.repoLocked(repo)
	g.detachLabelLocked(g.mustItemLocked(repo, number), label, r.owner)
}

// Labels returns the names of the labels on an issue or pull request, in
// the order they were added; nil if the item does not exist.
func (g *GitHub) Labels(repo string, number int) []string {
	g.st.Lock()
	defer g.st.Unlock()
	it := g.itemLocked(repo, number)
	if it == nil {
		return nil
	}
	out := make([]string, 0, len(it.labels))
	for _, l := range it.labels {
		out = append(out, l.name)
	}
	return out
}

// Comments returns the comments of an issue or pull request, oldest first.
func (g *GitHub) Comments(repo string, number int) []Comment {
	g.st.Lock()
	defer g.st.Unlock()
	it := g.itemLocked(repo, number)
	if it == nil {
		return nil
	}
	out := make([]Comment, 0, len(it.comments))
	for _, c := range it.comments {
		out = append(out, Comment{ID: c.id, Author: c.author, Body: c.body, CreatedAt: c.created, UpdatedAt: c.updated})
	}
	return out
}

func (g *GitHub) nowLocked() time.Time { return g.clock().UTC().Truncate(time.Second) }

func (g *GitHub) idLocked() int64 {
	g.nextID++
	return 1000 + g.nextID
}

func (g *GitHub) rateLocked(resource string) *ghRate {
	r, ok := g.rates[resource]
	if !ok {
		r = &ghRate{limit: 5000, window: time.Hour}
		g.rates[resource] = r
	}
	return r
}

func (g *GitHub) userLocked(login string) *ghUser {
	key := strings.ToLower(login)
	u, ok := g.users[key]
	if !ok {
		u = &ghUser{id: g.idLocked(), login: login, created: g.nowLocked()}
		g.users[key] = u
	}
	return u
}

func (g *GitHub) repoLocked(fullName string) *ghRepo {
	key := strings.ToLower(fullName)
	if r, ok := g.repos[key]; ok {
		return r
	}
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		panic("forgetest: repository must be owner/name, got " + fullName)
	}
	g.userLocked(owner)
	r := &ghRepo{id: g.idLocked(), owner: owner, name: name, created: g.nowLocked()}
	g.repos[key] = r
	if err := g.declare(fullName); err != nil {
		panic("forgetest: " + err.Error())
	}
	return r
}

func (r *ghRepo) fullName() string { return r.owner + "/" + r.name }

// findRepoLocked returns the repository or nil; it never creates one.
func (g *GitHub) findRepoLocked(owner, name string) *ghRepo {
	return g.repos[strings.ToLower(owner+"/"+name)]
}

func (g *GitHub) itemLocked(repo string, number int) *ghItem {
	r := g.repos[strings.ToLower(repo)]
	if r == nil || number < 1 || number > len(r.items) {
		return nil
	}
	return r.items[number-1]
}

func (g *GitHub) mustItemLocked(repo string, number int) *ghItem {
	it := g.itemLocked(repo, number)
	if it == nil {
		panic("forgetest: no issue or pull request " + repo + "#" + strconv.Itoa(number))
	}
	return it
}

func (g *GitHub) addItemLocked(repo string, s IssueSeed, p *ghPull) *ghItem {
	r := g.repoLocked(repo)
	it := &ghItem{
		id: g.idLocked(), number: len(r.items) + 1, title: s.Title, body: s.Body,
		author: s.Author, state: s.State, assignees: slices.Clone(s.Assignees), pull: p,
	}
	if it.author == "" {
		it.author = "octocat"
	}
	g.userLocked(it.author)
	if it.state == "" || it.state == "opened" {
		it.state = "open"
	}
	it.created = g.nowLocked()
	it.updated = it.created
	if it.state == "closed" {
		it.closed = it.created
	}
	for _, a := range it.assignees {
		g.userLocked(a)
	}
	for _, l := range s.Labels {
		g.attachLabelLocked(r, it, l, cmp.Or(s.LabeledBy, r.owner))
	}
	r.items = append(r.items, it)
	return it
}

func (g *GitHub) commentLocked(it *ghItem, author, body string) *ghComment {
	g.userLocked(author)
	now := g.nowLocked()
	c := &ghComment{id: g.idLocked(), author: author, body: body, created: now, updated: now}
	it.comments = append(it.comments, c)
	it.updated = now
	return c
}

// findCommentLocked finds a comment by id among the issues and pull
// requests of r; nil when r holds none with that id.
func (g *GitHub) findCommentLocked(r *ghRepo, id int64) (*ghItem, *ghComment) {
	for _, it := range r.items {
		for _, c := range it.comments {
			if c.id == id {
				return it, c
			}
		}
	}
	return nil, nil
}

// editCommentLocked replaces a comment's body. GitHub's timestamps have
// one-second resolution; an edit within the second of the previous change
// is stamped one second later, so that updated_at always shows the edit.
func (g *GitHub) editCommentLocked(c *ghComment, body string) {
	now := g.nowLocked()
	if !now.After(c.updated) {
		now = c.updated.Add(time.Second)
	}
	c.body = body
	c.updated = now
}

// repoLabelLocked finds a repository label by name (case-insensitive, as on
// GitHub), creating it when create is set.
func (g *GitHub) repoLabelLocked(r *ghRepo, name string, create bool) *ghLabel {
	for _, l := range r.labels {
		if strings.EqualFold(l.name, name) {
			return l
		}
	}
	if !create {
		return nil
	}
	l := &ghLabel{id: g.idLocked(), name: name, color: "ededed"}
	r.labels = append(r.labels, l)
	return l
}

// attachLabelLocked puts a label on an item as actor, with a labeled event;
// it reports whether it was absent before.
func (g *GitHub) attachLabelLocked(r *ghRepo, it *ghItem, name, actor string) bool {
	l := g.repoLabelLocked(r, name, true)
	if slices.Contains(it.labels, l) {
		return false
	}
	it.labels = append(it.labels, l)
	it.updated = g.nowLocked()
	g.eventLocked(it, "labeled", actor, l)
	return true
}

// detachLabelLocked takes a label off an item as actor, with an unlabeled
// event; it reports whether the label was there.
func (g *GitHub) detachLabelLocked(it *ghItem, name, actor string) bool {
	i := slices.IndexFunc(it.labels, func(l *ghLabel) bool { return strings.EqualFold(l.name, name) })
	if i < 0 {
		return false
	}
	l := it.labels[i]
	it.labels = slices.Delete(it.labels, i, i+1)
	it.updated = g.nowLocked()
	g.eventLocked(it, "unlabeled", actor, l)
	return true
}

// eventLocked records an issue event.
func (g *GitHub) eventLocked(it *ghItem, event, actor string, l *ghLabel) {
	g.userLocked(actor)
	it.events = append(it.events, &ghEvent{id: g.idLocked(), event: event, actor: actor, label: l, created: g.nowLocked()})
}
