package forgetest

import (
	"cmp"
	"crypto/subtle"
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

// GitLab emulates the GitLab REST API v4 (https://gitlab.com/api/v4) for
// tests: projects in nested groups, issues and merge requests with their own
// iid spaces, notes, labels and the current user, answered with GitLab's JSON
// shapes, offset pagination headers, ETags and rate-limit headers. Each
// project is served over git's smart HTTP at /{namespace/path}.git (its
// http_url_to_repo; see GitRepos for the credentials git must send). Seed it
// with AddProject, AddIssue, AddMR, AddNote, AddMember and AddGroupMember,
// and its repositories with the GitRepos helpers (CommitFile,
// CommitRandom); inspect it with Labels, Notes, Awards, Requests and Count,
// and its repositories with GitDir, Branches, FileAt and Log; move its
// clock with SetClock; break it with Inject (git requests too).
type GitLab struct {
	base
	*GitRepos

	// Token is the personal access token the emulator accepts, sent as
	// PRIVATE-TOKEN or as "Authorization: Bearer". Set it before the first
	// request if the default does not suit.
	Token string
	// BotUsername is the user the token belongs to (GET /user).
	BotUsername string

	t   testing.TB
	srv *httptest.Server

	dmu       sync.Mutex // guards everything below
	groups    map[string]*glGroup
	projects  map[string]*glProject // by lowercased path
	users     map[string]int64
	nextID    int64 // global ids of issues, merge requests, notes and awards
	nextProj  int
	nextGroup int
	last      time.Time // last timestamp handed out, to keep them increasing
	born      time.Time
	rlWindow  time.Time
	rlCount   int
	// revoked: Token is answered 401 (RevokeToken), on the API and by git.
	revoked atomic.Bool
}

// IssueSeed describes an issue to add (GitLab.AddIssue, GitHub.AddIssue). It
// is shared by both emulators; each reads State in its own words: "opened"
// on GitLab, "open" on GitHub, either accepted by both, or "closed" (a GitLab
// merge request may also be "merged").
type IssueSeed struct {
	Title     string
	Body      string
	Author    string // username; "" means "octocat"
	Labels    []string
	State     string // "" means open
	Assignees []string
	// LabeledBy is who added Labels: "" is the repository's owner on
	// GitHub, the project's top-level namespace (its owner) on GitLab.
	LabeledBy string
}

// MRSeed describes a merge request to add with AddMR.
type MRSeed struct {
	IssueSeed
	SourceBranch string // "feature" when empty
	TargetBranch string // "main" when empty
	// SourceProject is the project ("grp/app") the source branch is in,
	// for a merge request from a fork; "" means the merge request's own
	// project. A missing one is added.
	SourceProject string
}

// Note is a note on an issue or merge request, as the emulator holds it.
// UpdatedAt moves when the note is edited.
type Note struct {
	ID        int64
	Author    string
	Body      string
	CreatedAt time.Time
	UpdatedAt time.Time
	System    bool
}

// Kinds of noteable items, as AddNote, Labels and Notes take them.
const (
	KindIssue        = "issue"
	KindMergeRequest = "merge_request"
)

const glRateLimit = 2000 // requests per minute, as on gitlab.com

type glGroup struct {
	id      int
	path    string               // full path, "grp/sub"
	members map[string]*glMember // by lowercased username
}

type glProject struct {
	id      int
	path    string // path_with_namespace as added
	group   *glGroup
	created time.Time
	issues  map[int]*glItem
	mrs     map[int]*glItem
	members map[string]*glMember // direct members, by lowercased username
	labels  map[string]string    // created through the API: name → color
}

type glItem struct {
	id        int64
	iid       int
	kind      string
	project   *glProject
	title     string
	body      string
	author    string
	labels    []string // sorted, as GitLab lists them
	state     string
	assignees []string
	source    string
	target    string
	sourceP   *glProject // the project source is in; nil means project
	created   time.Time
	updated   time.Time
	closed    time.Time
	notes     []*glNote
	events    []*glLabelEvent
	awards    []*glAward // award emoji on the item itself
}

// glLabelEvent is a resource label event: a label added or removed.
type glLabelEvent struct {
	id      int64
	action  string // "add" or "remove"
	user    string
	label   string
	created time.Time
}

type glNote struct {
	id      int64
	author  string
	body    string
	system  bool
	created time.Time
	updated time.Time
	awards  []*glAward
}

// NewGitLab starts an emulated GitLab; it is closed when the test ends.
func NewGitLab(t testing.TB) *GitLab {
	t.Helper()
	g := &GitLab{
		Token:       "glpat-forgetest-token",
		BotUsername: "coding-agent-bot",
		t:           t,
		groups:      map[string]*glGroup{},
		projects:    map[string]*glProject{},
		users:       map[string]int64{},
		nextID:      1000,
		nextProj:    100,
		nextGroup:   10,
	}
	// Not a stamp: a clock set right after NewGitLab may start anywhere.
	g.born = g.clock().UTC().Truncate(time.Millisecond)
	g.GitRepos = newGitRepos(t, "GitLab", func(tok string) bool {
		return !g.revoked.Load() && subtle.ConstantTimeCompare([]byte(tok), []byte(g.Token)) == 1
	})
	api := g.wrap(http.HandlerFunc(g.serve), glErrBody)
	git := g.wrap(g.GitRepos, gitErrBody)
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// git at /{namespace/path}.git/..., beside the web pages.
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

// URL returns the API base, ending in /api/v4.
func (g *GitLab) URL() string { return g.srv.URL + "/api/v4" }

// Client returns an HTTP client for the emulator.
func (g *GitLab) Client() *http.Client { return g.srv.Client() }

// AddProject adds a project such as "acme/app" or "grp/sub/app" and the
// groups it sits in, and returns its numeric id. Adding it again returns the
// same id.
func (g *GitLab) AddProject(path string) int {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	return g.addProject(path).id
}

func (g *GitLab) addProject(path string) *glProject {
	g.t.Helper()
	if p := g.projects[strings.ToLower(path)]; p != nil {
		return p
	}
	parts := strings.Split(path, "/")
	if len(parts) < 2 || slices.Contains(parts, "") {
		g.t.Fatalf("forgetest: gitlab project path %q: want group/project", path)
	}
	var grp *glGroup
	for i := 1; i < len(parts); i++ {
		gp := strings.Join(parts[:i], "/")
		grp = g.groups[strings.ToLower(gp)]
		if grp == nil {
			g.nextGroup++
			grp = &glGroup{id: g.nextGroup, path: gp}
			g.groups[strings.ToLower(gp)] = grp
		}
	}
	g.nextProj++
	p := &glProject{
		id: g.nextProj, path: path, group: grp, created: g.stamp(),
		issues: map[int]*glItem{}, mrs: map[int]*glItem{},
	}
	g.projects[strings.ToLower(path)] = p
	g.userID(p.owner()) // listed first among the members
	if err := g.declare(path); err != nil {
		g.t.Fatalf("forgetest: %v", err)
	}
	return p
}

// AddIssue adds an issue to an existing project and returns its iid.
func (g *GitLab) AddIssue(project string, s IssueSeed) int {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	p := g.mustProject(project)
	it := g.newItem(p, KindIssue, s)
	it.iid = len(p.issues) + 1
	p.issues[it.iid] = it
	return it.iid
}

// AddMR adds a merge request to an existing project and returns its iid.
// Its source branch is made in git (from main, with one commit) when it
// does not exist.
func (g *GitLab) AddMR(project string, s MRSeed) int {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	p := g.mustProject(project)
	it := g.newItem(p, KindMergeRequest, s.IssueSeed)
	it.source, it.target = cmp.Or(s.SourceBranch, "feature"), cmp.Or(s.TargetBranch, "main")
	src := p
	if s.SourceProject != "" && !strings.EqualFold(s.SourceProject, p.path) {
		src = g.addProject(s.SourceProject)
		it.sourceP = src
	}
	it.iid = len(p.mrs) + 1
	p.mrs[it.iid] = it
	if err := g.declare(src.path, it.source); err != nil {
		g.t.Fatalf("forgetest: %v", err)
	}
	if src != p {
		g.declarePull(p.path, "refs/merge-requests/"+strconv.Itoa(it.iid)+"/head", src.path, it.source)
	}
	return it.iid
}

// AddNote adds a note to an issue or merge request (kind KindIssue or
// KindMergeRequest) and returns its id. A system note is what GitLab writes
// itself, such as "changed the description".
func (g *GitLab) AddNote(project, kind string, iid int, author, body string, system bool) int64 {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	it := g.mustItem(project, kind, iid)
	return g.addNote(it, author, body, system).id
}

// Labels returns the labels of an issue or merge request, sorted.
func (g *GitLab) Labels(project, kind string, iid int) []string {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	return slices.Clone(g.mustItem(project, kind, iid).labels)
}

// Notes returns the notes of an issue or merge request, oldest first.
func (g *GitLab) Notes(project, kind string, iid int) []Note {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	it := g.mustItem(project, kind, iid)
	out := make([]Note, 0, len(it.notes))
	for _, n := range it.notes {
		out = append(out, Note{ID: n.id, Author: n.author, Body: n.body, CreatedAt: n.created, UpdatedAt: n.updated, System: n.system})
	}
	return out
}

func (g *GitLab) mustProject(project string) *glProject {
	g.t.Helper()
	p := g.project(project)
	if p == nil {
		g.t.Fatalf("forgetest: gitlab project %q not added", project)
	}
	return p
}

func (g *GitLab) mustItem(project, kind string, iid int) *glItem {
	g.t.Helper()
	p := g.mustProject(project)
	var it *glItem
	switch kind {
	case KindIssue:
		it = p.issues[iid]
	case KindMergeRequest:
		it = p.mrs[iid]
	default:
		g.t.Fatalf("forgetest: gitlab kind %q: want %q or %q", kind, KindIssue, KindMergeRequest)
	}
	if it == nil {
		g.t.Fatalf("forgetest: gitlab %s %d not found in %s", kind, iid, project)
	}
	return it
}

// project finds a project by numeric id or path.
func (g *GitLab) project(id string) *glProject {
	if n, err := strconv.Atoi(id); err == nil {
		for _, p := range g.projects {
			if p.id == n {
				return p
			}
		}
		return nil
	}
	return g.projects[strings.ToLower(id)]
}

// group finds a group by numeric id or full path.
func (g *GitLab) group(id string) *glGroup {
	if n, err := strconv.Atoi(id); err == nil {
		for _, gr := range g.groups {
			if gr.id == n {
				return gr
			}
		}
		return nil
	}
	return g.groups[strings.ToLower(id)]
}

func (g *GitLab) newItem(p *glProject, kind string, s IssueSeed) *glItem {
	g.nextID++
	now := g.stamp()
	it := &glItem{
		id: g.nextID, kind: kind, project: p, title: s.Title, body: s.Body,
		author: s.Author, state: s.State, assignees: slices.Clone(s.Assignees),
		created: now, updated: now,
	}
	if it.author == "" {
		it.author = "octocat"
	}
	if it.state == "" || it.state == "open" {
		it.state = "opened"
	}
	if it.state != "opened" {
		it.closed = it.updated
	}
	g.relabel(it, s.Labels, cmp.Or(s.LabeledBy, p.owner()))
	return it
}

// owner is the user that owns the project's top-level namespace: the
// emulator treats it as a member with the Owner role, as GitLab lists a
// personal namespace's owner.
func (p *glProject) owner() string { return strings.SplitN(p.path, "/", 2)[0] }

// AddLabelBy adds a label to an issue or merge request as user would in
// the web UI ("" is the project's owner): a resource label event records
// who added it.
func (g *GitLab) AddLabelBy(project, kind string, iid int, label, user string) {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	it := g.mustItem(project, kind, iid)
	g.relabel(it, append(slices.Clone(it.labels), label), cmp.Or(user, it.project.owner()))
	it.updated = g.stamp()
}

// relabel sets an item's labels as user, recording an event for each label
// added or removed.
func (g *GitLab) relabel(it *glItem, labels []string, user string) {
	before := it.labels
	it.setLabels(labels)
	event := func(action, label string) {
		g.nextID++
		it.events = append(it.events, &glLabelEvent{id: g.nextID, action: action, user: user, label: label, created: g.stamp()})
	}
	for _, l := range before {
		if !slices.Contains(it.labels, l) {
			event("remove", l)
		}
	}
	for _, l := range it.labels {
		if !slices.Contains(before, l) {
			event("add", l)
		}
	}
}

func (g *GitLab) addNote(it *glItem, author, body string, system bool) *glNote {
	g.nextID++
	now := g.stamp()
	n := &glNote{id: g.nextID, author: author, body: body, system: system, created: now, updated: now}
	it.notes = append(it.notes, n)
	it.updated = now
	return n
}

// stamp returns the current time at GitLab's millisecond precision, always
// later than the one before, so creation order is time order.
func (g *GitLab) stamp() time.Time {
	t := g.clock().UTC().Truncate(time.Millisecond)
	if !t.After(g.last) {
		t = g.last.Add(time.Millisecond)
	}
	g.last = t
	return t
}

// note returns the item's note with that id, or nil.
func (it *glItem) note(id int64) *glNote {
	i := slices.IndexFunc(it.notes, func(n *glNote) bool { return n.id == id })
	if i < 0 {
		return nil
	}
	return it.notes[i]
}

func (it *glItem) setLabels(labels []string) {
	var out []string
	for _, l := range labels {
		l = strings.TrimSpace(l)
		if l != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	it.labels = out
}
