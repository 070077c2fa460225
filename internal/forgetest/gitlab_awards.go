package forgetest

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Award emoji on an issue or merge request itself (not on a note): GitLab
// refuses a second award of one name by one user on one item with a 404,
// as on notes. The emulator handles one request at a time, so of two
// concurrent awards exactly one is created (on GitLab the uniqueness is a
// Rails validation, which two requests within milliseconds can both pass;
// the adapter guards against that, see forge/gitlab TakeLabel).

// ItemAwards returns the names of the award emoji on an issue or merge
// request, as "user:name", oldest first.
func (g *GitLab) ItemAwards(project, kind string, iid int) []string {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	it := g.mustItem(project, kind, iid)
	out := make([]string, 0, len(it.awards))
	for _, a := range it.awards {
		out = append(out, a.user+":"+a.name)
	}
	return out
}

// AwardItemBy awards an emoji to an issue or merge request as user, as
// the web UI would, created at the emulator's clock.
func (g *GitLab) AwardItemBy(project, kind string, iid int, name, user string) {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	it := g.mustItem(project, kind, iid)
	g.nextID++
	it.awards = append(it.awards, &glAward{id: g.nextID, name: name, user: user, created: g.stamp()})
}

func awardItem(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		it := g.findItem(w, r, kind, args)
		if it == nil {
			return
		}
		ps, ok := g.params(w, r)
		if !ok {
			return
		}
		name, ok := ps["name"]
		refuse := func(why string) {
			g.reply(w, r, http.StatusNotFound, glObj{"message": "404 Award Emoji " + why + " Not Found"})
		}
		switch {
		case !ok:
			g.reply(w, r, http.StatusBadRequest, glObj{"error": "name is missing"})
		case !slices.Contains(glEmojiNames, name):
			refuse("Name is not a valid emoji name")
		case slices.ContainsFunc(it.awards, func(a *glAward) bool { return a.name == name && strings.EqualFold(a.user, g.BotUsername) }):
			refuse("Name has already been taken")
		default:
			g.nextID++
			a := &glAward{id: g.nextID, name: name, user: g.BotUsername, created: g.stamp()}
			it.awards = append(it.awards, a)
			g.reply(w, r, http.StatusCreated, g.itemAwardJSON(it, a))
		}
	}
}

func listItemAwards(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		it := g.findItem(w, r, kind, args)
		if it == nil {
			return
		}
		out := make([]glObj, 0, len(it.awards))
		for _, a := range it.awards {
			out = append(out, g.itemAwardJSON(it, a))
		}
		g.paginate(w, r, out)
	}
}

// deleteItemAward removes an award; only its user may (GitLab answers 404
// for someone else's, as for a missing one), and the answer is 204.
func deleteItemAward(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		it := g.findItem(w, r, kind, args)
		if it == nil {
			return
		}
		id, _ := strconv.ParseInt(args[2], 10, 64)
		i := slices.IndexFunc(it.awards, func(a *glAward) bool { return a.id == id && strings.EqualFold(a.user, g.BotUsername) })
		if i < 0 {
			g.reply(w, r, http.StatusNotFound, glObj{"message": "404 Award Emoji Not Found"})
			return
		}
		it.awards = slices.Delete(it.awards, i, i+1)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (g *GitLab) itemAwardJSON(it *glItem, a *glAward) glObj {
	typ := "Issue"
	if it.kind == KindMergeRequest {
		typ = "MergeRequest"
	}
	return glObj{
		"id": a.id, "name": a.name, "user": g.userJSON(a.user),
		"created_at": glTime(a.created), "updated_at": glTime(a.created),
		"awardable_id": it.id, "awardable_type": typ, "url": nil,
	}
}
