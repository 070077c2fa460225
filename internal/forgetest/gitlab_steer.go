package forgetest

import (
	"cmp"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"
)

// Who may steer a task, and how a note is acknowledged: project members
// (inherited from ancestor groups included) and award emoji on notes.

// glAccessLevels are the access levels GitLab knows: Minimal, Guest,
// Planner, Reporter, Developer, Maintainer, Owner.
var glAccessLevels = []int{5, 10, 15, 20, 30, 40, 50}

// glEmojiNames are the award emoji names the emulator accepts. GitLab
// accepts every name of its emoji index; a short list of common ones is
// enough to tell a valid name from a misspelt one.
var glEmojiNames = []string{
	"eyes", "thumbsup", "thumbsdown", "+1", "-1", "heart", "tada", "rocket", "smile",
	"laughing", "confused", "white_check_mark", "hourglass", "ok_hand", "clap", "fire", "star", "lock",
}

type glMember struct {
	username string
	level    int
	since    time.Time
}

type glAward struct {
	id      int64
	name    string
	user    string
	created time.Time
}

// AddMember makes username a direct member of an existing project with
// accessLevel (10 Guest, 20 Reporter, 30 Developer, 40 Maintainer, 50
// Owner; 5 Minimal and 15 Planner too). Adding a member again changes the
// level.
func (g *GitLab) AddMember(project, username string, accessLevel int) {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	p := g.mustProject(project)
	p.members = g.addMember(p.members, username, accessLevel)
}

// AddGroupMember makes username a member of a group (created by AddProject
// for every namespace of a project's path) with accessLevel, as AddMember
// does. Group membership is inherited: it shows in the members/all list of
// every project below the group.
func (g *GitLab) AddGroupMember(group, username string, accessLevel int) {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	gr := g.groups[strings.ToLower(group)]
	if gr == nil {
		g.t.Fatalf("forgetest: gitlab group %q not added (add a project in it first)", group)
	}
	gr.members = g.addMember(gr.members, username, accessLevel)
}

// Awards returns the names of the award emoji on a note of an issue or
// merge request (kind KindIssue or KindMergeRequest), by anyone, in the
// order they were awarded; nil if the item has no such note.
func (g *GitLab) Awards(project, kind string, iid int, noteID int64) []string {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	n := g.mustItem(project, kind, iid).note(noteID)
	if n == nil {
		return nil
	}
	out := make([]string, 0, len(n.awards))
	for _, a := range n.awards {
		out = append(out, a.name)
	}
	return out
}

func (g *GitLab) addMember(members map[string]*glMember, username string, level int) map[string]*glMember {
	g.t.Helper()
	if !slices.Contains(glAccessLevels, level) {
		g.t.Fatalf("forgetest: gitlab access level %d: want one of %v", level, glAccessLevels)
	}
	if username == "" {
		g.t.Fatalf("forgetest: gitlab member without a username")
	}
	if members == nil {
		members = map[string]*glMember{}
	}
	g.userID(username) // ids in the order members were added: a stable listing order
	members[strings.ToLower(username)] = &glMember{username: username, level: level, since: g.stamp()}
	return members
}

// allMembers is a project's members/all answer: the owner of its top-level
// namespace (Owner), its direct members and those of every ancestor group,
// each user once at the highest level.
func (g *GitLab) allMembers(p *glProject) []*glMember {
	best := map[string]*glMember{}
	add := func(ms map[string]*glMember) {
		for key, m := range ms {
			if b := best[key]; b == nil || m.level > b.level {
				best[key] = m
			}
		}
	}
	owner := p.owner()
	add(map[string]*glMember{strings.ToLower(owner): {username: owner, level: 50, since: p.created}})
	add(p.members)
	for gp := p.group.path; gp != "."; gp = path.Dir(gp) {
		if gr := g.groups[strings.ToLower(gp)]; gr != nil {
			add(gr.members)
		}
	}
	out := make([]*glMember, 0, len(best))
	for _, m := range best {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *glMember) int { return cmp.Compare(g.userID(a.username), g.userID(b.username)) })
	return out
}

// listAllMembers answers GET /projects/:id/members/all. query keeps the
// members whose username or name contains it, ignoring case, as GitLab's
// fuzzy filter does.
func (g *GitLab) listAllMembers(w http.ResponseWriter, r *http.Request, args []string) {
	p := g.project(args[0])
	if p == nil {
		g.reply(w, r, http.StatusNotFound, glObj{"message": "404 Project Not Found"})
		return
	}
	query := strings.ToLower(r.URL.Query().Get("query"))
	out := []glObj{}
	for _, m := range g.allMembers(p) {
		if strings.Contains(strings.ToLower(m.username), query) {
			out = append(out, g.memberJSON(m))
		}
	}
	g.paginate(w, r, out)
}

func (g *GitLab) memberJSON(m *glMember) glObj {
	o := g.userJSON(m.username)
	o["access_level"] = m.level
	o["created_at"] = glTime(m.since)
	o["created_by"] = nil
	o["expires_at"] = nil
	o["membership_state"] = "active"
	return o
}

// awardNote awards an emoji to a note as the token's user. GitLab refuses
// a second award of the same name by the same user, an unknown name and an
// award on a system note with a 404 whose message says why (newer GitLab
// versions put the reasons in brackets).
func awardNote(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		_, n := g.findNote(w, r, kind, args)
		if n == nil {
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
		case n.system:
			refuse("Awardable cannot be awarded emoji")
		case !slices.Contains(glEmojiNames, name):
			refuse("Name is not a valid emoji name")
		case slices.ContainsFunc(n.awards, func(a *glAward) bool { return a.name == name && strings.EqualFold(a.user, g.BotUsername) }):
			refuse("Name has already been taken")
		default:
			g.nextID++
			a := &glAward{id: g.nextID, name: name, user: g.BotUsername, created: g.stamp()}
			n.awards = append(n.awards, a)
			g.reply(w, r, http.StatusCreated, g.awardJSON(n, a))
		}
	}
}

// listNoteAwards answers the award emoji of a note, oldest first.
func listNoteAwards(kind string) glHandler {
	return func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
		_, n := g.findNote(w, r, kind, args)
		if n == nil {
			return
		}
		out := make([]glObj, 0, len(n.awards))
		for _, a := range n.awards {
			out = append(out, g.awardJSON(n, a))
		}
		g.paginate(w, r, out)
	}
}

func (g *GitLab) awardJSON(n *glNote, a *glAward) glObj {
	return glObj{
		"id": a.id, "name": a.name, "user": g.userJSON(a.user),
		"created_at": glTime(a.created), "updated_at": glTime(a.created),
		"awardable_id": n.id, "awardable_type": "Note", "url": nil,
	}
}
