package forgetest

import (
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

func (g *GitHub) getUser(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	g.reply(w, r, http.StatusOK, g.privateUserJSON(ghURLsFor(r), g.BotLogin))
}

// lookupRepo finds the request's repository or answers 404. Callers hold g.st.
func (g *GitHub) lookupRepo(w http.ResponseWriter, r *http.Request) *ghRepo {
	repo := g.findRepoLocked(r.PathValue("owner"), r.PathValue("repo"))
	if repo == nil {
		g.failDoc(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/repos/repos#get-a-repository")
	}
	return repo
}

// lookupItem finds the request's issue or pull request or answers 404.
// Callers hold g.st.
func (g *GitHub) lookupItem(w http.ResponseWriter, r *http.Request) (*ghRepo, *ghItem) {
	repo := g.lookupRepo(w, r)
	if repo == nil {
		return nil, nil
	}
	n, err := strconv.Atoi(r.PathValue("number"))
	if err != nil || n < 1 || n > len(repo.items) {
		g.failDoc(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/issues/issues#get-an-issue")
		return nil, nil
	}
	return repo, repo.items[n-1]
}

// lookupComment finds the issue or pull request comment the request's
// comment_id names in the request's repository, or answers 404 linking doc,
// the endpoint's documentation. Callers hold g.st.
func (g *GitHub) lookupComment(w http.ResponseWriter, r *http.Request, doc string) (*ghRepo, *ghItem, *ghComment) {
	repo := g.lookupRepo(w, r)
	if repo == nil {
		return nil, nil, nil
	}
	id, err := strconv.ParseInt(r.PathValue("comment_id"), 10, 64)
	var it *ghItem
	var c *ghComment
	if err == nil {
		it, c = g.findCommentLocked(repo, id)
	}
	if c == nil {
		g.failDoc(w, http.StatusNotFound, "Not Found", doc)
		return nil, nil, nil
	}
	return repo, it, c
}

func (g *GitHub) listIssues(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	repo := g.lookupRepo(w, r)
	if repo == nil {
		return
	}
	q := r.URL.Query()
	var since time.Time
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			g.validationFailed(w, "Issue", "since", "since must be an ISO 8601 timestamp")
			return
		}
		since = t
	}
	var items []*ghItem
	for _, it := range repo.items {
		if ghIssueMatches(it, q.Get("state"), q.Get("labels"), q.Get("creator"), q.Get("assignee"), since) {
			items = append(items, it)
		}
	}
	ghSortItems(items, q.Get("sort"), q.Get("direction"))
	u := ghURLsFor(r)
	out := []any{}
	for _, it := range ghPage(w, r, items, 0) {
		out = append(out, g.issueJSON(u, repo, it))
	}
	g.reply(w, r, http.StatusOK, out)
}

func ghIssueMatches(it *ghItem, state, labels, creator, assignee string, since time.Time) bool {
	switch state {
	case "", "open":
		if it.state != "open" {
			return false
		}
	case "closed":
		if it.state != "closed" {
			return false
		}
	}
	if labels != "" {
		for want := range strings.SplitSeq(labels, ",") {
			if !slices.ContainsFunc(it.labels, func(l *ghLabel) bool { return strings.EqualFold(l.name, strings.TrimSpace(want)) }) {
				return false
			}
		}
	}
	if creator != "" && !strings.EqualFold(creator, it.author) {
		return false
	}
	switch assignee {
	case "":
	case "none":
		if len(it.assignees) > 0 {
			return false
		}
	case "*":
		if len(it.assignees) == 0 {
			return false
		}
	default:
		if !slices.ContainsFunc(it.assignees, func(a string) bool { return strings.EqualFold(a, assignee) }) {
			return false
		}
	}
	return since.IsZero() || !it.updated.Before(since)
}

// ghSortItems orders items like GitHub: by created (default), updated or
// comments, descending unless direction is "asc"; ties by number.
func ghSortItems(items []*ghItem, sort, direction string) {
	key := func(it *ghItem) time.Time { return it.created }
	if sort == "updated" {
		key = func(it *ghItem) time.Time { return it.updated }
	}
	slices.SortStableFunc(items, func(a, b *ghItem) int {
		c := key(a).Compare(key(b))
		if sort == "comments" {
			c = cmp.Compare(len(a.comments), len(b.comments))
		}
		if c == 0 {
			c = cmp.Compare(a.id, b.id)
		}
		if direction != "asc" {
			c = -c
		}
		return c
	})
}

func (g *GitHub) getIssue(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	repo, it := g.lookupItem(w, r)
	if it == nil {
		return
	}
	g.reply(w, r, http.StatusOK, g.issueJSON(ghURLsFor(r), repo, it))
}

func (g *GitHub) getPull(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	repo, it := g.lookupItem(w, r)
	if it == nil {
		return
	}
	if it.pull == nil {
		g.failDoc(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/pulls/pulls#get-a-pull-request")
		return
	}
	g.reply(w, r, http.StatusOK, g.pullJSON(ghURLsFor(r), repo, it))
}

func (g *GitHub) listComments(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	repo, it := g.lookupItem(w, r)
	if it == nil {
		return
	}
	var since time.Time
	if s := r.URL.Query().Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			g.validationFailed(w, "IssueComment", "since", "since must be an ISO 8601 timestamp")
			return
		}
		since = t
	}
	var cs []*ghComment
	for _, c := range it.comments {
		if since.IsZero() || !c.updated.Before(since) {
			cs = append(cs, c)
		}
	}
	u := ghURLsFor(r)
	out := []any{}
	for _, c := range ghPage(w, r, cs, 0) {
		out = append(out, g.commentJSON(u, repo, it, c))
	}
	g.reply(w, r, http.StatusOK, out)
}

func (g *GitHub) createComment(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Body *string `json:"body"`
	}
	raw, _ := io.ReadAll(r.Body)
	g.st.Lock()
	defer g.st.Unlock()
	repo, it := g.lookupItem(w, r)
	if it == nil {
		return
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		g.failDoc(w, http.StatusBadRequest, "Problems parsing JSON", "https://docs.github.com/rest/issues/comments#create-an-issue-comment")
		return
	}
	if in.Body == nil || *in.Body == "" {
		g.validationFailed(w, "IssueComment", "body", "body wasn't supplied.")
		return
	}
	c := g.commentLocked(it, g.BotLogin, *in.Body)
	v := g.commentJSON(ghURLsFor(r), repo, it, c)
	w.Header().Set("Location", v["url"].(string))
	g.reply(w, r, http.StatusCreated, v)
}

// ghDocsEditComment is the documentation link of PATCH .../issues/comments/{id}.
const ghDocsEditComment = "https://docs.github.com/rest/issues/comments#update-an-issue-comment"

// editComment replaces the body of an issue or pull request comment. Only
// the comment's author may edit it here: the token's user is taken to lack
// the repository write access that would let it edit other people's.
func (g *GitHub) editComment(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Body *string `json:"body"`
	}
	raw, _ := io.ReadAll(r.Body)
	g.st.Lock()
	defer g.st.Unlock()
	repo, it, c := g.lookupComment(w, r, ghDocsEditComment)
	if c == nil {
		return
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		g.failDoc(w, http.StatusBadRequest, "Problems parsing JSON", ghDocsEditComment)
		return
	}
	if !strings.EqualFold(c.author, g.BotLogin) {
		g.failDoc(w, http.StatusForbidden, "You do not have permission to edit this comment.", ghDocsEditComment)
		return
	}
	if in.Body == nil || *in.Body == "" {
		g.validationFailed(w, "IssueComment", "body", "body wasn't supplied.")
		return
	}
	g.editCommentLocked(c, *in.Body)
	g.reply(w, r, http.StatusOK, g.commentJSON(ghURLsFor(r), repo, it, c))
}

func (g *GitHub) labelsJSON(r *http.Request, repo *ghRepo, ls []*ghLabel) []any {
	u := ghURLsFor(r)
	out := []any{}
	for _, l := range ls {
		out = append(out, ghLabelJSON(u, repo, l))
	}
	return out
}

func (g *GitHub) listLabels(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	repo, it := g.lookupItem(w, r)
	if it == nil {
		return
	}
	g.reply(w, r, http.StatusOK, g.labelsJSON(r, repo, ghPage(w, r, it.labels, 0)))
}

// ghLabelNames reads the body of POST .../labels in any of the forms GitHub
// accepts: {"labels":["a"]}, ["a"], {"labels":[{"name":"a"}]}.
func ghLabelNames(raw []byte) ([]string, bool) {
	var wrapped struct {
		Labels json.RawMessage `json:"labels"`
	}
	list := json.RawMessage(raw)
	if json.Unmarshal(raw, &wrapped) == nil && wrapped.Labels != nil {
		list = wrapped.Labels
	}
	var names []string
	if json.Unmarshal(list, &names) == nil {
		return names, true
	}
	var objs []struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(list, &objs) != nil {
		return nil, false
	}
	for _, o := range objs {
		names = append(names, o.Name)
	}
	return names, true
}

func (g *GitHub) addLabels(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	g.st.Lock()
	defer g.st.Unlock()
	repo, it := g.lookupItem(w, r)
	if it == nil {
		return
	}
	names, ok := ghLabelNames(raw)
	if !ok || len(names) == 0 || slices.Contains(names, "") {
		g.validationFailed(w, "Label", "labels", "Invalid request: labels must be a non-empty list of names.")
		return
	}
	for _, n := range names {
		g.attachLabelLocked(repo, it, n, g.BotLogin)
	}
	g.reply(w, r, http.StatusOK, g.labelsJSON(r, repo, it.labels))
}

func (g *GitHub) removeLabel(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	repo, it := g.lookupItem(w, r)
	if it == nil {
		return
	}
	if !g.detachLabelLocked(it, r.PathValue("name"), g.BotLogin) {
		g.failDoc(w, http.StatusNotFound, "Label does not exist", "https://docs.github.com/rest/issues/labels#remove-a-label-from-an-issue")
		return
	}
	g.reply(w, r, http.StatusOK, g.labelsJSON(r, repo, it.labels))
}

// listEvents answers GET .../issues/{number}/events: the item's label
// events, oldest first, paginated.
func (g *GitHub) listEvents(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	repo, it := g.lookupItem(w, r)
	if it == nil {
		return
	}
	u := ghURLsFor(r)
	out := []any{}
	for _, e := range ghPage(w, r, it.events, 0) {
		out = append(out, map[string]any{
			"id": e.id, "node_id": ghNodeID("LE", e.id),
			"url":   ghRepoAPI(u, repo) + "/issues/events/" + strconv.FormatInt(e.id, 10),
			"actor": g.userJSON(u, e.actor), "event": e.event, "commit_id": nil, "commit_url": nil,
			"created_at": ghTime(e.created), "performed_via_github_app": nil,
			"label": map[string]any{"name": e.label.name, "color": e.label.color},
		})
	}
	g.reply(w, r, http.StatusOK, out)
}

const ghDocsDeleteComment = "https://docs.github.com/rest/issues/comments#delete-an-issue-comment"

// deleteComment answers DELETE .../issues/comments/{comment_id}: 204, or
// 404 for a comment that is not there (deleted already); the token's user
// may delete only its own here (a collaborator could delete others').
func (g *GitHub) deleteComment(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	_, it, c := g.lookupComment(w, r, ghDocsDeleteComment)
	if c == nil {
		return
	}
	if !strings.EqualFold(c.author, g.BotLogin) {
		g.failDoc(w, http.StatusForbidden, "You do not have permission to delete this comment.", ghDocsDeleteComment)
		return
	}
	it.comments = slices.DeleteFunc(it.comments, func(o *ghComment) bool { return o == c })
	it.updated = g.nowLocked()
	w.WriteHeader(http.StatusNoContent)
}
