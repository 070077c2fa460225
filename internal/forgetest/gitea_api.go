package forgetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// urls are the emulator's API and web roots, as its JSON names them.
type urls struct{ api, html string }

func (g *Gitea) urls() urls { return urls{api: g.srv.URL + "/api/v1", html: g.srv.URL} }

// gtErrBody is Gitea's error body for a fault.
func gtErrBody(status int) string {
	b, _ := json.Marshal(map[string]any{"message": http.StatusText(status), "url": "https://docs.gitea.com/api"})
	return string(b)
}

func (g *Gitea) routes() http.Handler {
	m := http.NewServeMux()
	const rp = "/api/v1/repos/{owner}/{repo}"
	for pattern, h := range map[string]http.HandlerFunc{
		"GET /api/v1/user":                        g.getUser,
		"GET /api/v1/repos/issues/search":         g.searchIssues,
		"GET " + rp:                               g.getRepo,
		"GET " + rp + "/labels":                   g.listLabels,
		"POST " + rp + "/labels":                  g.createLabel,
		"GET " + rp + "/issues":                   g.listIssues,
		"GET " + rp + "/issues/{index}":           g.getIssue,
		"GET " + rp + "/issues/{index}/comments":  g.listComments,
		"POST " + rp + "/issues/{index}/comments": g.createComment,
		"PATCH " + rp + "/issues/comments/{id}":   g.editComment,
		// Both DELETE .../issues/comments/{id} and .../issues/{index}/reactions.
		"DELETE " + rp + "/issues/{index}/{id}":          g.deleteIn,
		"POST " + rp + "/issues/comments/{id}/reactions": g.reactComment,
		"GET " + rp + "/issues/{index}/reactions":        g.listReactions,
		"POST " + rp + "/issues/{index}/reactions":       g.react,
		"GET " + rp + "/issues/{index}/timeline":         g.timeline,
		"POST " + rp + "/issues/{index}/labels":          g.addLabels,
		"DELETE " + rp + "/issues/{index}/labels/{id}":   g.removeLabel,
		"GET " + rp + "/collaborators/{user}/permission": g.permission,
		"GET " + rp + "/pulls":                           g.listPulls,
		"GET " + rp + "/pulls/{index}":                   g.getPull,
		"POST " + rp + "/pulls":                          g.createPull,
		"PATCH " + rp + "/pulls/{index}":                 g.editPull,
	} {
		m.HandleFunc(pattern, g.authed(h))
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { g.fail(w, http.StatusNotFound, "not found") })
	return m
}

// authed answers 401 unless the request carries Token.
func (g *Gitea) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		tok, ok := strings.CutPrefix(a, "token ")
		if !ok {
			tok, _ = strings.CutPrefix(a, "Bearer ")
		}
		if g.revoked.Load() || tok != g.Token {
			g.fail(w, http.StatusUnauthorized, "user does not exist [uid: 0, name: ]")
			return
		}
		g.dmu.Lock()
		defer g.dmu.Unlock()
		h(w, r)
	}
}

func (g *Gitea) fail(w http.ResponseWriter, status int, msg string) {
	g.reply(w, status, map[string]any{"message": msg, "url": g.srv.URL + "/api/swagger"})
}

func (g *Gitea) reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	if v != nil {
		_ = json.NewEncoder(w).Encode(v)
	}
}

// page answers one page of all, with Gitea's Link and X-Total-Count.
func (g *Gitea) page(w http.ResponseWriter, r *http.Request, all []any) {
	q := r.URL.Query()
	p, _ := strconv.Atoi(q.Get("page"))
	limit, _ := strconv.Atoi(q.Get("limit"))
	p, limit = max(p, 1), min(max(limit, 0), 50)
	if limit == 0 {
		limit = 30
	}
	from, to := min((p-1)*limit, len(all)), min(p*limit, len(all))
	w.Header().Set("X-Total-Count", strconv.Itoa(len(all)))
	if to < len(all) {
		next := *r.URL
		nq := next.Query()
		nq.Set("page", strconv.Itoa(p+1))
		nq.Set("limit", strconv.Itoa(limit))
		next.RawQuery = nq.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, g.srv.URL, next.RequestURI()))
	}
	g.reply(w, http.StatusOK, append([]any{}, all[from:to]...))
}

func (g *Gitea) repoOf(w http.ResponseWriter, r *http.Request) *gtRepo {
	rp := g.repos[strings.ToLower(r.PathValue("owner")+"/"+r.PathValue("repo"))]
	if rp == nil {
		g.fail(w, http.StatusNotFound, "The target couldn't be found.")
	}
	return rp
}

func (g *Gitea) itemOf(w http.ResponseWriter, r *http.Request) (*gtRepo, *gtItem) {
	rp := g.repoOf(w, r)
	if rp == nil {
		return nil, nil
	}
	n, _ := strconv.Atoi(r.PathValue("index"))
	it := rp.items[n]
	if it == nil {
		g.fail(w, http.StatusNotFound, "issue does not exist [id: 0, repo_id: "+strconv.FormatInt(rp.id, 10)+", index: "+strconv.Itoa(n)+"]")
	}
	return rp, it
}

func (g *Gitea) commentOf(w http.ResponseWriter, r *http.Request) (*gtRepo, *gtItem, *gtComment) {
	rp := g.repoOf(w, r)
	if rp == nil {
		return nil, nil, nil
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	for _, it := range rp.items {
		for _, c := range it.comments {
			if c.id == id {
				return rp, it, c
			}
		}
	}
	g.fail(w, http.StatusNotFound, "comment does not exist [id: "+r.PathValue("id")+"]")
	return nil, nil, nil
}

func decode(w http.ResponseWriter, r *http.Request, g *Gitea, v any) bool {
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, v); err != nil {
		g.fail(w, http.StatusUnprocessableEntity, "invalid JSON: "+err.Error())
		return false
	}
	return true
}

func (g *Gitea) getUser(w http.ResponseWriter, _ *http.Request) {
	g.reply(w, http.StatusOK, g.userJSON(g.urls(), g.BotUsername))
}

func (g *Gitea) getRepo(w http.ResponseWriter, r *http.Request) {
	if rp := g.repoOf(w, r); rp != nil {
		g.reply(w, http.StatusOK, g.repoJSON(g.urls(), rp))
	}
}

func (g *Gitea) listLabels(w http.ResponseWriter, r *http.Request) {
	rp := g.repoOf(w, r)
	if rp == nil {
		return
	}
	var all []any
	for _, l := range rp.labels {
		all = append(all, g.labelJSON(rp, l))
	}
	g.page(w, r, all)
}

func (g *Gitea) createLabel(w http.ResponseWriter, r *http.Request) {
	rp := g.repoOf(w, r)
	var in struct{ Name, Color string }
	if rp == nil || !decode(w, r, g, &in) {
		return
	}
	c := strings.TrimPrefix(in.Color, "#")
	if strings.TrimSpace(in.Name) == "" || len(c) != 6 {
		g.fail(w, http.StatusUnprocessableEntity, "[Name]: Required; [Color]: invalid color")
		return
	}
	l := &gtLabel{id: g.id(), name: in.Name, color: c}
	rp.labels = append(rp.labels, l)
	g.reply(w, http.StatusCreated, g.labelJSON(rp, l))
}

// matches reports whether it passes an issue list's filters: state,
// type, labels (names, comma-separated, every one carried).
func (g *Gitea) matches(rp *gtRepo, it *gtItem, q url.Values) bool {
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	if state != "all" && it.state != state {
		return false
	}
	switch q.Get("type") {
	case "issues":
		if it.pull {
			return false
		}
	case "pulls":
		if !it.pull {
			return false
		}
	}
	for _, name := range strings.Split(q.Get("labels"), ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if !slices.ContainsFunc(rp.labels, func(l *gtLabel) bool { return l.name == name && slices.Contains(it.labels, l.id) }) {
			return false
		}
	}
	return true
}

// sorted are rp's items newest first, as Gitea lists them.
func sorted(rp *gtRepo) []*gtItem {
	var out []*gtItem
	for _, it := range rp.items {
		out = append(out, it)
	}
	slices.SortFunc(out, func(a, b *gtItem) int { return b.number - a.number })
	return out
}

func (g *Gitea) listIssues(w http.ResponseWriter, r *http.Request) {
	rp := g.repoOf(w, r)
	if rp == nil {
		return
	}
	var all []any
	for _, it := range sorted(rp) {
		if g.matches(rp, it, r.URL.Query()) {
			all = append(all, g.issueJSON(g.urls(), rp, it))
		}
	}
	g.page(w, r, all)
}

func (g *Gitea) searchIssues(w http.ResponseWriter, r *http.Request) {
	owner := r.URL.Query().Get("owner")
	var keys []string
	for k, rp := range g.repos {
		if owner == "" || strings.EqualFold(strings.SplitN(rp.full, "/", 2)[0], owner) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var all []any
	for _, k := range keys {
		rp := g.repos[k]
		for _, it := range sorted(rp) {
			if g.matches(rp, it, r.URL.Query()) {
				all = append(all, g.issueJSON(g.urls(), rp, it))
			}
		}
	}
	g.page(w, r, all)
}

func (g *Gitea) getIssue(w http.ResponseWriter, r *http.Request) {
	if rp, it := g.itemOf(w, r); it != nil {
		g.reply(w, http.StatusOK, g.issueJSON(g.urls(), rp, it))
	}
}

func (g *Gitea) listComments(w http.ResponseWriter, r *http.Request) {
	rp, it := g.itemOf(w, r)
	if it == nil {
		return
	}
	var since time.Time
	if s := r.URL.Query().Get("since"); s != "" {
		var err error
		if since, err = time.Parse(time.RFC3339, s); err != nil {
			g.fail(w, http.StatusUnprocessableEntity, "since: "+err.Error())
			return
		}
	}
	var all []any
	for _, c := range it.comments {
		if !c.updated.Before(since.Truncate(time.Second)) {
			all = append(all, g.commentJSON(g.urls(), rp, it, c))
		}
	}
	// Gitea lists an issue's comments whole, unpaged, unless asked.
	if r.URL.Query().Get("page") == "" {
		g.reply(w, http.StatusOK, append([]any{}, all...))
		return
	}
	g.page(w, r, all)
}

func (g *Gitea) createComment(w http.ResponseWriter, r *http.Request) {
	rp, it := g.itemOf(w, r)
	var in struct{ Body string }
	if it == nil || !decode(w, r, g, &in) {
		return
	}
	if strings.TrimSpace(in.Body) == "" {
		g.fail(w, http.StatusUnprocessableEntity, "[Body]: Required")
		return
	}
	c := g.addComment(it, g.BotUsername, in.Body)
	g.reply(w, http.StatusCreated, g.commentJSON(g.urls(), rp, it, c))
}

func (g *Gitea) editComment(w http.ResponseWriter, r *http.Request) {
	rp, it, c := g.commentOf(w, r)
	var in struct{ Body string }
	if c == nil || !decode(w, r, g, &in) {
		return
	}
	if !strings.EqualFold(c.author, g.BotUsername) {
		g.fail(w, http.StatusForbidden, "")
		return
	}
	c.body, c.updated = in.Body, g.stamp()
	g.reply(w, http.StatusOK, g.commentJSON(g.urls(), rp, it, c))
}

// deleteIn serves the two DELETEs of one shape: a comment, a reaction.
func (g *Gitea) deleteIn(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.PathValue("index") == "comments":
		g.deleteComment(w, r)
	case r.PathValue("id") == "reactions":
		g.unreact(w, r)
	default:
		g.fail(w, http.StatusNotFound, "not found")
	}
}

func (g *Gitea) deleteComment(w http.ResponseWriter, r *http.Request) {
	_, it, c := g.commentOf(w, r)
	if c == nil {
		return
	}
	if !strings.EqualFold(c.author, g.BotUsername) {
		g.fail(w, http.StatusForbidden, "")
		return
	}
	it.comments = slices.DeleteFunc(it.comments, func(x *gtComment) bool { return x == c })
	w.WriteHeader(http.StatusNoContent)
}

// reactIn adds the bot's reaction content to rs: 201 when new, 200 when
// the bot had it (Gitea's unique index: one of a kind per user).
func (g *Gitea) reactIn(w http.ResponseWriter, r *http.Request, rs *[]gtReaction) {
	var in struct {
		Content string `json:"content"`
	}
	if !decode(w, r, g, &in) {
		return
	}
	if !slices.Contains([]string{"+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes"}, in.Content) {
		g.fail(w, http.StatusForbidden, fmt.Sprintf("'%s' is not an allowed reaction", in.Content))
		return
	}
	for _, x := range *rs {
		if x.content == in.Content && strings.EqualFold(x.user, g.BotUsername) {
			g.reply(w, http.StatusOK, g.reactionJSON(x))
			return
		}
	}
	x := gtReaction{user: g.BotUsername, content: in.Content, created: g.stamp()}
	*rs = append(*rs, x)
	g.reply(w, http.StatusCreated, g.reactionJSON(x))
}

func (g *Gitea) reactComment(w http.ResponseWriter, r *http.Request) {
	if _, _, c := g.commentOf(w, r); c != nil {
		g.reactIn(w, r, &c.reactions)
	}
}

func (g *Gitea) react(w http.ResponseWriter, r *http.Request) {
	if _, it := g.itemOf(w, r); it != nil {
		g.reactIn(w, r, &it.reactions)
	}
}

func (g *Gitea) unreact(w http.ResponseWriter, r *http.Request) {
	_, it := g.itemOf(w, r)
	var in struct {
		Content string `json:"content"`
	}
	if it == nil || !decode(w, r, g, &in) {
		return
	}
	it.reactions = slices.DeleteFunc(it.reactions, func(x gtReaction) bool {
		return x.content == in.Content && strings.EqualFold(x.user, g.BotUsername)
	})
	w.WriteHeader(http.StatusNoContent)
}

func (g *Gitea) listReactions(w http.ResponseWriter, r *http.Request) {
	_, it := g.itemOf(w, r)
	if it == nil {
		return
	}
	var all []any
	for _, x := range it.reactions {
		all = append(all, g.reactionJSON(x))
	}
	g.reply(w, http.StatusOK, append([]any{}, all...))
}

func (g *Gitea) timeline(w http.ResponseWriter, r *http.Request) {
	rp, it := g.itemOf(w, r)
	if it == nil {
		return
	}
	var all []any
	for _, e := range it.events {
		body := ""
		if e.add {
			body = "1"
		}
		all = append(all, map[string]any{"id": e.id, "type": "label", "user": g.userJSON(g.urls(), e.user), "body": body,
			"label": g.labelJSON(rp, e.label), "created_at": e.created, "updated_at": e.created})
	}
	for _, c := range it.comments {
		all = append(all, map[string]any{"id": c.id, "type": "comment", "user": g.userJSON(g.urls(), c.author), "body": c.body,
			"label": nil, "created_at": c.created, "updated_at": c.updated})
	}
	slices.SortStableFunc(all, func(a, b any) int {
		return a.(map[string]any)["created_at"].(time.Time).Compare(b.(map[string]any)["created_at"].(time.Time))
	})
	g.page(w, r, all)
}

func (g *Gitea) addLabels(w http.ResponseWriter, r *http.Request) {
	rp, it := g.itemOf(w, r)
	var in struct {
		Labels []int64 `json:"labels"`
	}
	if it == nil || !decode(w, r, g, &in) {
		return
	}
	for _, id := range in.Labels {
		i := slices.IndexFunc(rp.labels, func(l *gtLabel) bool { return l.id == id })
		if i < 0 {
			g.fail(w, http.StatusUnprocessableEntity, fmt.Sprintf("label does not exist [label_id: %d]", id))
			return
		}
		g.relabel(rp, it, rp.labels[i], true, g.BotUsername)
	}
	var out []any
	for _, l := range rp.labels {
		if slices.Contains(it.labels, l.id) {
			out = append(out, g.labelJSON(rp, l))
		}
	}
	g.reply(w, http.StatusOK, append([]any{}, out...))
}

// removeLabel answers 204 whether or not the label was on the item, as
// Gitea does.
func (g *Gitea) removeLabel(w http.ResponseWriter, r *http.Request) {
	rp, it := g.itemOf(w, r)
	if it == nil {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	i := slices.IndexFunc(rp.labels, func(l *gtLabel) bool { return l.id == id })
	if i < 0 {
		g.fail(w, http.StatusUnprocessableEntity, fmt.Sprintf("label does not exist [label_id: %d]", id))
		return
	}
	g.relabel(rp, it, rp.labels[i], false, g.BotUsername)
	w.WriteHeader(http.StatusNoContent)
}

// perm is user's permission on rp: owner for its owner.
func (g *Gitea) perm(rp *gtRepo, user string) string {
	if strings.EqualFold(strings.SplitN(rp.full, "/", 2)[0], user) {
		return "owner"
	}
	return cmp.Or(rp.perms[strings.ToLower(user)], "read")
}

// permission shows a user's permission to the repository's
// administrators, and to the user itself, as Gitea does.
func (g *Gitea) permission(w http.ResponseWriter, r *http.Request) {
	rp := g.repoOf(w, r)
	if rp == nil {
		return
	}
	user := r.PathValue("user")
	if p := g.perm(rp, g.BotUsername); p != "admin" && p != "owner" && !strings.EqualFold(user, g.BotUsername) {
		g.fail(w, http.StatusForbidden, "Only admins can query all permissions, repo admins can query all repo permissions, collaborators can query only their own")
		return
	}
	p := g.perm(rp, user)
	if p == "owner" {
		p = "admin"
	}
	g.reply(w, http.StatusOK, map[string]any{"permission": p, "role_name": p, "user": g.userJSON(g.urls(), user)})
}

func (g *Gitea) listPulls(w http.ResponseWriter, r *http.Request) {
	rp := g.repoOf(w, r)
	if rp == nil {
		return
	}
	q := r.URL.Query()
	q.Set("type", "pulls")
	var all []any
	for _, it := range sorted(rp) {
		if g.matches(rp, it, q) {
			all = append(all, g.pullJSON(g.urls(), rp, it))
		}
	}
	g.page(w, r, all)
}

func (g *Gitea) getPull(w http.ResponseWriter, r *http.Request) {
	rp, it := g.itemOf(w, r)
	if it == nil {
		return
	}
	if !it.pull {
		g.fail(w, http.StatusNotFound, "pull request does not exist")
		return
	}
	g.reply(w, http.StatusOK, g.pullJSON(g.urls(), rp, it))
}

// createPull opens a pull request from a branch of the repository: 422
// without changes or branches, 409 when one from head into base is open.
func (g *Gitea) createPull(w http.ResponseWriter, r *http.Request) {
	rp := g.repoOf(w, r)
	var in struct{ Head, Base, Title, Body string }
	if rp == nil || !decode(w, r, g, &in) {
		return
	}
	for _, it := range rp.items {
		if it.pull && it.state == "open" && it.head == in.Head && it.base == in.Base && it.headRepo == "" {
			g.fail(w, http.StatusConflict, fmt.Sprintf("pull request already exists for these targets [id: %d, issue_id: %d, head_repo_id: %d, base_repo_id: %d, head_branch: %s, base_branch: %s]",
				it.id, it.number, rp.id, rp.id, it.head, it.base))
			return
		}
	}
	g.dmu.Unlock()
	ahead, baseOK, headOK, err := g.compare(rp.full, in.Base, rp.full, in.Head)
	g.dmu.Lock()
	switch {
	case err != nil:
		g.fail(w, http.StatusInternalServerError, err.Error())
		return
	case !baseOK || !headOK:
		g.fail(w, http.StatusNotFound, "branch does not exist")
		return
	case ahead == 0:
		g.fail(w, http.StatusUnprocessableEntity, "Invalid PullRequest: There are no changes between the head and the base")
		return
	case strings.TrimSpace(in.Title) == "":
		g.fail(w, http.StatusUnprocessableEntity, "[Title]: Required")
		return
	}
	now := g.stamp()
	it := &gtItem{id: g.id(), number: rp.next, pull: true, title: in.Title, body: in.Body, author: g.BotUsername, state: "open",
		head: in.Head, base: in.Base, created: now, updated: now}
	rp.next++
	rp.items[it.number] = it
	g.reply(w, http.StatusCreated, g.pullJSON(g.urls(), rp, it))
}

func (g *Gitea) editPull(w http.ResponseWriter, r *http.Request) {
	rp, it := g.itemOf(w, r)
	var in struct {
		Title string  `json:"title"`
		Body  *string `json:"body"`
	}
	if it == nil || !decode(w, r, g, &in) {
		return
	}
	if in.Title != "" {
		it.title = in.Title
	}
	if in.Body != nil {
		it.body = *in.Body
	}
	it.updated = g.stamp()
	g.reply(w, http.StatusCreated, g.pullJSON(g.urls(), rp, it))
}
