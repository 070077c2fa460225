package forgetest

import (
	"cmp"
	"hash/crc32"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

type glHandler = func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string)

func (g *GitLab) getUser(w http.ResponseWriter, r *http.Request, _ []string) {
	u := g.userJSON(g.BotUsername)
	for _, k := range []string{"bio", "public_email", "location", "organization", "job_title", "linkedin", "twitter", "skype", "website_url"} {
		u[k] = ""
	}
	u["bot"] = false
	u["followers"], u["following"] = 0, 0
	u["created_at"] = glTime(g.born)
	g.reply(w, r, http.StatusOK, u)
}

func (g *GitLab) getProject(w http.ResponseWriter, r *http.Request, args []string) {
	p := g.project(args[0])
	if p == nil {
		g.reply(w, r, http.StatusNotFound, glObj{"message": "404 Project Not Found"})
		return
	}
	g.reply(w, r, http.StatusOK, g.projectJSON(p))
}

func listProjectItems(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		p := g.project(args[0])
		if p == nil {
			g.reply(w, r, http.StatusNotFound, glObj{"message": "404 Project Not Found"})
			return
		}
		g.listItems(w, r, kind, []*glProject{p})
	}
}

// listGroupItems lists the items of every project in the group and its
// subgroups, as GitLab does.
func listGroupItems(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		gr := g.group(args[0])
		if gr == nil {
			g.reply(w, r, http.StatusNotFound, glObj{"message": "404 Group Not Found"})
			return
		}
		var ps []*glProject
		prefix := strings.ToLower(gr.path) + "/"
		for key, p := range g.projects {
			if strings.HasPrefix(key, prefix) {
				ps = append(ps, p)
			}
		}
		g.listItems(w, r, kind, ps)
	}
}

func (g *GitLab) listItems(w http.ResponseWriter, r *http.Request, kind string, ps []*glProject) {
	q := r.URL.Query()
	states := []string{"opened", "closed", "all"}
	if kind == KindMergeRequest {
		states = append(states, "merged", "locked")
	}
	state := cmp.Or(q.Get("state"), "all")
	orderBy := cmp.Or(q.Get("order_by"), "created_at")
	sortDir := cmp.Or(q.Get("sort"), "desc")
	switch {
	case !slices.Contains(states, state):
		g.reply(w, r, http.StatusBadRequest, glObj{"error": "state does not have a valid value"})
		return
	case orderBy != "created_at" && orderBy != "updated_at":
		g.reply(w, r, http.StatusBadRequest, glObj{"error": "order_by does not have a valid value"})
		return
	case sortDir != "asc" && sortDir != "desc":
		g.reply(w, r, http.StatusBadRequest, glObj{"error": "sort does not have a valid value"})
		return
	}
	want := glSplitLabels(q.Get("labels"))
	var items []*glItem
	for _, p := range ps {
		all := p.issues
		if kind == KindMergeRequest {
			all = p.mrs
		}
		for _, it := range all {
			if (state == "all" || it.state == state) && glLabelsMatch(it.labels, want) && glBranchesMatch(it, q) {
				items = append(items, it)
			}
		}
	}
	slices.SortFunc(items, func(a, b *glItem) int {
		return glOrder(orderBy, sortDir, a.created, a.updated, a.id, b.created, b.updated, b.id)
	})
	out := make([]glObj, 0, len(items))
	for _, it := range items {
		out = append(out, g.itemJSON(it, false))
	}
	g.paginate(w, r, out)
}

// glBranchesMatch applies the source_branch and target_branch filters of
// a merge request list.
func glBranchesMatch(it *glItem, q url.Values) bool {
	if it.kind != KindMergeRequest {
		return true
	}
	if b := q.Get("source_branch"); b != "" && it.source != b {
		return false
	}
	b := q.Get("target_branch")
	return b == "" || it.target == b
}

// glLabelsMatch applies a labels filter: every label named, or "None" (no
// label at all) or "Any" (at least one).
func glLabelsMatch(have, want []string) bool {
	if len(want) == 1 && want[0] == "None" {
		return len(have) == 0
	}
	if len(want) == 1 && want[0] == "Any" {
		return len(have) > 0
	}
	for _, l := range want {
		if !slices.Contains(have, l) {
			return false
		}
	}
	return true
}

// findItem resolves the project and iid of a route, answering 404 itself
// when either is missing.
func (g *GitLab) findItem(w http.ResponseWriter, r *http.Request, kind string, args []string) *glItem {
	p := g.project(args[0])
	if p == nil {
		g.reply(w, r, http.StatusNotFound, glObj{"message": "404 Project Not Found"})
		return nil
	}
	iid, _ := strconv.Atoi(args[1])
	it := p.issues[iid]
	if kind == KindMergeRequest {
		it = p.mrs[iid]
	}
	if it == nil {
		g.reply(w, r, http.StatusNotFound, glObj{"message": "404 Not found"})
	}
	return it
}

// findNote resolves the project, iid and note id of a note route to the
// item and its note, answering 404 itself when any of them is missing.
func (g *GitLab) findNote(w http.ResponseWriter, r *http.Request, kind string, args []string) (*glItem, *glNote) {
	it := g.findItem(w, r, kind, args)
	if it == nil {
		return nil, nil
	}
	id, err := strconv.ParseInt(args[2], 10, 64)
	var n *glNote
	if err == nil {
		n = it.note(id)
	}
	if n == nil {
		g.reply(w, r, http.StatusNotFound, glObj{"message": "404 Not found"})
		return nil, nil
	}
	return it, n
}

func getItem(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		if it := g.findItem(w, r, kind, args); it != nil {
			g.reply(w, r, http.StatusOK, g.itemJSON(it, true))
		}
	}
}

// updateItem edits an issue or merge request: labels (replacing the set),
// add_labels and remove_labels (touching only those named), state_event,
// title and description.
func updateItem(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		it := g.findItem(w, r, kind, args)
		if it == nil {
			return
		}
		ps, ok := g.params(w, r)
		if !ok {
			return
		}
		labels := it.labels
		if v, ok := ps["labels"]; ok {
			labels = glSplitLabels(v)
		}
		labels = append(slices.Clone(labels), glSplitLabels(ps["add_labels"])...)
		remove := glSplitLabels(ps["remove_labels"])
		labels = slices.DeleteFunc(labels, func(l string) bool { return slices.Contains(remove, l) })
		g.relabel(it, labels, g.BotUsername)
		if v, ok := ps["title"]; ok {
			it.title = v
		}
		if v, ok := ps["description"]; ok {
			it.body = v
		}
		now := g.stamp()
		switch ps["state_event"] {
		case "close":
			if it.state == "opened" {
				it.state, it.closed = "closed", now
			}
		case "reopen":
			if it.state == "closed" {
				it.state, it.closed = "opened", now
			}
		}
		it.updated = now
		g.reply(w, r, http.StatusOK, g.itemJSON(it, true))
	}
}

func listNotes(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		it := g.findItem(w, r, kind, args)
		if it == nil {
			return
		}
		q := r.URL.Query()
		orderBy := cmp.Or(q.Get("order_by"), "created_at")
		sortDir := cmp.Or(q.Get("sort"), "desc")
		if orderBy != "created_at" && orderBy != "updated_at" {
			g.reply(w, r, http.StatusBadRequest, glObj{"error": "order_by does not have a valid value"})
			return
		}
		if sortDir != "asc" && sortDir != "desc" {
			g.reply(w, r, http.StatusBadRequest, glObj{"error": "sort does not have a valid value"})
			return
		}
		notes := slices.Clone(it.notes)
		slices.SortFunc(notes, func(a, b *glNote) int {
			return glOrder(orderBy, sortDir, a.created, a.updated, a.id, b.created, b.updated, b.id)
		})
		out := make([]glObj, 0, len(notes))
		for _, n := range notes {
			out = append(out, g.noteJSON(it, n))
		}
		g.paginate(w, r, out)
	}
}

// createNote posts a note as the token's user.
func createNote(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		it := g.findItem(w, r, kind, args)
		if it == nil {
			return
		}
		ps, ok := g.params(w, r)
		if !ok {
			return
		}
		if strings.TrimSpace(ps["body"]) == "" {
			g.reply(w, r, http.StatusBadRequest, glObj{"error": "body is missing"})
			return
		}
		n := g.addNote(it, g.BotUsername, ps["body"], false)
		g.reply(w, r, http.StatusCreated, g.noteJSON(it, n))
	}
}

// updateNote replaces the body of a note. Only its author may edit it, and
// nobody may edit a system note.
func updateNote(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		it, n := g.findNote(w, r, kind, args)
		if n == nil {
			return
		}
		ps, ok := g.params(w, r)
		if !ok {
			return
		}
		if n.system || !strings.EqualFold(n.author, g.BotUsername) {
			g.reply(w, r, http.StatusForbidden, glObj{"message": "403 Forbidden"})
			return
		}
		body, ok := ps["body"]
		switch {
		case !ok:
			g.reply(w, r, http.StatusBadRequest, glObj{"error": "body is missing"})
			return
		case strings.TrimSpace(body) == "":
			g.reply(w, r, http.StatusBadRequest, glObj{"error": "body is empty"})
			return
		}
		n.body = body
		n.updated = g.stamp()
		g.reply(w, r, http.StatusOK, g.noteJSON(it, n))
	}
}

// glOrder compares two items or notes as GitLab's order_by (created_at or
// updated_at) and sort (asc or desc) parameters say, ties broken by id.
func glOrder(orderBy, sortDir string, aCreated, aUpdated time.Time, aID int64, bCreated, bUpdated time.Time, bID int64) int {
	c := aCreated.Compare(bCreated)
	if orderBy == "updated_at" {
		c = aUpdated.Compare(bUpdated)
	}
	c = cmp.Or(c, cmp.Compare(aID, bID))
	if sortDir == "desc" {
		return -c
	}
	return c
}

// listLabelEvents answers GET .../resource_label_events: the item's label
// events, oldest first, paginated.
func listLabelEvents(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		it := g.findItem(w, r, kind, args)
		if it == nil {
			return
		}
		resource := map[string]string{KindIssue: "Issue", KindMergeRequest: "MergeRequest"}[kind]
		out := []glObj{}
		for _, e := range it.events {
			out = append(out, glObj{
				"id": e.id, "user": g.userJSON(e.user), "created_at": glTime(e.created),
				"resource_type": resource, "resource_id": it.id, "action": e.action,
				"label": glObj{"id": glLabelID(e.label), "name": e.label, "color": "#428BCA", "text_color": "#FFFFFF", "description": nil},
			})
		}
		g.paginate(w, r, out)
	}
}

// glLabelID is a label's id: the same for the same name, as a project
// label's id is.
func glLabelID(name string) int64 { return int64(crc32.ChecksumIEEE([]byte(name))) }

// deleteNote answers DELETE .../notes/:note_id: 204, or 404 for a note that
// is not there (deleted already); a system note, or someone else's, is 403.
func deleteNote(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		it, n := g.findNote(w, r, kind, args)
		if n == nil {
			return
		}
		if n.system || !strings.EqualFold(n.author, g.BotUsername) {
			g.reply(w, r, http.StatusForbidden, glObj{"message": "403 Forbidden"})
			return
		}
		it.notes = slices.DeleteFunc(it.notes, func(o *glNote) bool { return o == n })
		it.updated = g.stamp()
		w.WriteHeader(http.StatusNoContent)
	}
}
