package forgetest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

// The endpoints delivery uses: the repository, and opening, finding and
// editing pull requests. A pull request made here has a real head branch:
// the emulator's git says whether the branches exist and how far head is
// ahead of base.

const (
	ghDocsCreatePull = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"
	ghDocsListPulls  = "https://docs.github.com/rest/pulls/pulls#list-pull-requests"
	ghDocsUpdatePull = "https://docs.github.com/rest/pulls/pulls#update-a-pull-request"
)

// Pull is a pull request as the emulator holds it.
type Pull struct {
	Number   int
	Title    string
	Body     string
	Author   string
	State    string // "open" or "closed"
	Draft    bool
	Head     string // the head branch
	HeadRepo string // "owner/name" of the repository head is in
	Base     string
}

// Pulls returns the pull requests of repo, by number.
func (g *GitHub) Pulls(repo string) []Pull {
	g.st.Lock()
	defer g.st.Unlock()
	r := g.repos[strings.ToLower(repo)]
	if r == nil {
		return nil
	}
	var out []Pull
	for _, it := range r.items {
		if p := it.pull; p != nil {
			out = append(out, Pull{Number: it.number, Title: it.title, Body: it.body, Author: it.author, State: it.state,
				Draft: p.draft, Head: p.head, HeadRepo: p.headRepo.fullName(), Base: p.base})
		}
	}
	return out
}

// getRepo answers GET /repos/{owner}/{repo}.
func (g *GitHub) getRepo(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	repo := g.lookupRepo(w, r)
	if repo == nil {
		return
	}
	g.reply(w, r, http.StatusOK, g.fullRepoJSON(ghURLsFor(r), repo))
}

// ghInvalid writes GitHub's 422 "Validation Failed" with its errors.
func ghInvalid(w http.ResponseWriter, doc string, errs ...map[string]any) {
	b, _ := json.Marshal(map[string]any{
		"message": "Validation Failed", "errors": errs, "documentation_url": doc, "status": "422",
	})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusUnprocessableEntity)
	_, _ = w.Write(b)
}

func ghMissing(resource, field string) map[string]any {
	return map[string]any{"resource": resource, "code": "missing_field", "field": field}
}

func ghInvalidField(resource, field string) map[string]any {
	return map[string]any{"resource": resource, "code": "invalid", "field": field}
}

func ghCustom(resource, message string) map[string]any {
	return map[string]any{"resource": resource, "code": "custom", "message": message}
}

// createPull answers POST /repos/{owner}/{repo}/pulls as the token's user.
// GitHub's 422s: a field missing; a base or head branch that does not
// exist (head is "branch", or "owner:branch" for a fork, whose repository
// is head_repo or owner's repository of the same name); an open pull
// request from the same head into the same base; no commit between them.
func (g *GitHub) createPull(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Title    *string `json:"title"`
		Body     *string `json:"body"`
		Head     string  `json:"head"`
		HeadRepo string  `json:"head_repo"`
		Base     string  `json:"base"`
		Draft    bool    `json:"draft"`
	}
	raw, _ := io.ReadAll(r.Body)
	g.st.Lock()
	defer g.st.Unlock()
	repo := g.lookupRepo(w, r)
	if repo == nil {
		return
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		g.failDoc(w, http.StatusBadRequest, "Problems parsing JSON", ghDocsCreatePull)
		return
	}
	var missing []map[string]any
	if in.Head == "" {
		missing = append(missing, ghMissing("PullRequest", "head"))
	}
	if in.Base == "" {
		missing = append(missing, ghMissing("PullRequest", "base"))
	}
	if in.Title == nil || *in.Title == "" {
		missing = append(missing, ghMissing("Issue", "title"))
	}
	if len(missing) > 0 {
		ghInvalid(w, ghDocsCreatePull, missing...)
		return
	}
	headRepo, branch := g.headRepoLocked(repo, in.Head, in.HeadRepo)
	if headRepo == nil {
		ghInvalid(w, ghDocsCreatePull, ghInvalidField("PullRequest", "head"))
		return
	}
	ahead, baseOK, headOK, err := g.compare(repo.fullName(), in.Base, headRepo.fullName(), branch)
	switch {
	case err != nil:
		g.fail(w, http.StatusInternalServerError, "comparing branches: "+err.Error())
		return
	case !baseOK:
		ghInvalid(w, ghDocsCreatePull, ghInvalidField("PullRequest", "base"))
		return
	case !headOK:
		ghInvalid(w, ghDocsCreatePull, ghInvalidField("PullRequest", "head"))
		return
	}
	for _, it := range repo.items {
		if p := it.pull; p != nil && it.state == "open" && p.headRepo == headRepo && p.head == branch && p.base == in.Base {
			ghInvalid(w, ghDocsCreatePull, ghCustom("PullRequest", "A pull request already exists for "+headRepo.owner+":"+branch+"."))
			return
		}
	}
	if ahead == 0 {
		ghInvalid(w, ghDocsCreatePull, ghCustom("PullRequest", "No commits between "+in.Base+" and "+in.Head))
		return
	}
	body := ""
	if in.Body != nil {
		body = *in.Body
	}
	it := g.addItemLocked(repo.fullName(), IssueSeed{Title: *in.Title, Body: body, Author: g.BotLogin},
		&ghPull{head: branch, base: in.Base, headRepo: headRepo, draft: in.Draft})
	v := g.pullJSON(ghURLsFor(r), repo, it)
	w.Header().Set("Location", v["url"].(string))
	g.reply(w, r, http.StatusCreated, v)
}

// headRepoLocked resolves a pull request's head ("branch" or
// "owner:branch") and head_repo to the repository holding the branch and
// the branch's name; nil when no such repository is known.
func (g *GitHub) headRepoLocked(repo *ghRepo, head, headRepo string) (*ghRepo, string) {
	owner, branch, forked := strings.Cut(head, ":")
	if !forked {
		return repo, head
	}
	if headRepo != "" {
		o, n, _ := strings.Cut(headRepo, "/")
		if !strings.EqualFold(o, owner) {
			return nil, ""
		}
		return g.findRepoLocked(o, n), branch
	}
	if strings.EqualFold(owner, repo.owner) {
		return repo, branch
	}
	return g.findRepoLocked(owner, repo.name), branch
}

// listPulls answers GET /repos/{owner}/{repo}/pulls: state (open, closed,
// all; open by default), head ("owner:branch"; a head without an owner is
// ignored, as GitHub ignores it), base, sort and direction, paginated.
func (g *GitHub) listPulls(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	repo := g.lookupRepo(w, r)
	if repo == nil {
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	switch state {
	case "", "open", "closed", "all":
	default:
		ghInvalid(w, ghDocsListPulls, ghInvalidField("PullRequest", "state"))
		return
	}
	headOwner, headBranch, byHead := strings.Cut(q.Get("head"), ":")
	var items []*ghItem
	for _, it := range repo.items {
		p := it.pull
		switch {
		case p == nil || !ghIssueMatches(it, state, "", "", "", time.Time{}):
		case byHead && (!strings.EqualFold(p.headRepo.owner, headOwner) || p.head != headBranch):
		case q.Get("base") != "" && p.base != q.Get("base"):
		default:
			items = append(items, it)
		}
	}
	sort, direction := q.Get("sort"), q.Get("direction")
	if direction == "" && sort != "" && sort != "created" {
		direction = "asc"
	}
	switch sort {
	case "popularity":
		sort = "comments"
	case "long-running":
		sort = "created"
	}
	ghSortItems(items, sort, direction)
	u := ghURLsFor(r)
	out := []any{}
	for _, it := range ghPage(w, r, items, 0) {
		v := g.pullJSON(u, repo, it)
		// pull-request-simple's labels have a description that is a
		// string, never null.
		for _, l := range v["labels"].([]any) {
			if l := l.(map[string]any); l["description"] == nil {
				l["description"] = ""
			}
		}
		out = append(out, v)
	}
	g.reply(w, r, http.StatusOK, out)
}

// updatePull answers PATCH /repos/{owner}/{repo}/pulls/{number}: title,
// body and state.
func (g *GitHub) updatePull(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
		State *string `json:"state"`
	}
	raw, _ := io.ReadAll(r.Body)
	g.st.Lock()
	defer g.st.Unlock()
	repo, it := g.lookupItem(w, r)
	if it == nil {
		return
	}
	if it.pull == nil {
		g.failDoc(w, http.StatusNotFound, "Not Found", ghDocsUpdatePull)
		return
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		g.failDoc(w, http.StatusBadRequest, "Problems parsing JSON", ghDocsUpdatePull)
		return
	}
	if in.State != nil && *in.State != "open" && *in.State != "closed" {
		ghInvalid(w, ghDocsUpdatePull, ghInvalidField("PullRequest", "state"))
		return
	}
	if in.Title != nil {
		it.title = *in.Title
	}
	if in.Body != nil {
		it.body = *in.Body
	}
	it.updated = g.nowLocked()
	if in.State != nil && *in.State != it.state {
		it.state = *in.State
		it.closed = time.Time{}
		if it.state == "closed" {
			it.closed = it.updated
		}
	}
	g.reply(w, r, http.StatusOK, g.pullJSON(ghURLsFor(r), repo, it))
}
