package forgetest

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Who may steer a task, and how a comment is acknowledged: the collaborator
// permission endpoint and issue comment reactions.

// GitHub's documentation links for the endpoints below.
const (
	ghDocsPermission = "https://docs.github.com/rest/collaborators/collaborators#get-repository-permissions-for-a-user"
	ghDocsReaction   = "https://docs.github.com/rest/reactions/reactions#create-reaction-for-an-issue-comment"
)

// ghRoles are the repository roles SetPermission takes, each with the legacy
// base permission GitHub reports beside it (maintain shows as write, triage
// as read) and the permission flags of the collaborator object.
var ghRoles = map[string]struct {
	base  string
	flags map[string]bool
}{
	"admin":    {"admin", map[string]bool{"pull": true, "triage": true, "push": true, "maintain": true, "admin": true}},
	"maintain": {"write", map[string]bool{"pull": true, "triage": true, "push": true, "maintain": true, "admin": false}},
	"write":    {"write", map[string]bool{"pull": true, "triage": true, "push": true, "maintain": false, "admin": false}},
	"triage":   {"read", map[string]bool{"pull": true, "triage": true, "push": false, "maintain": false, "admin": false}},
	"read":     {"read", map[string]bool{"pull": true, "triage": false, "push": false, "maintain": false, "admin": false}},
}

// ghReactionContents are the reactions GitHub accepts.
var ghReactionContents = []string{"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}

type ghReaction struct {
	id      int64
	user    string
	content string
	created time.Time
}

// SetPermission makes login a collaborator of repo (created if needed) with
// role "admin", "maintain", "write", "triage" or "read". It panics on any
// other role.
//
// GET /repos/{owner}/{repo}/collaborators/{username}/permission answers:
//   - a login given a role here: that role (role_name) and its base
//     permission (maintain reads as write, triage as read);
//   - the repository owner without a role set here: admin;
//   - any other login the emulator knows (an author, an assignee, AddUser):
//     read, as GitHub answers for a public repository, which the emulator's
//     repositories are;
//   - a login it does not know: 404, as for a user that does not exist.
func (g *GitHub) SetPermission(repo, login, role string) {
	if _, ok := ghRoles[role]; !ok {
		panic("forgetest: unknown github repository role " + strconv.Quote(role))
	}
	g.st.Lock()
	defer g.st.Unlock()
	r := g.repoLocked(repo)
	g.userLocked(login)
	if r.perms == nil {
		r.perms = map[string]string{}
	}
	r.perms[strings.ToLower(login)] = role
}

// Reactions returns the contents of the reactions on a comment of repo
// ("eyes", "+1"), by anyone, in the order they were added; nil if the
// comment does not exist.
func (g *GitHub) Reactions(repo string, commentID int64) []string {
	g.st.Lock()
	defer g.st.Unlock()
	r := g.repos[strings.ToLower(repo)]
	if r == nil {
		return nil
	}
	_, c := g.findCommentLocked(r, commentID)
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.reactions))
	for _, x := range c.reactions {
		out = append(out, x.content)
	}
	return out
}

// roleLocked is the role login holds on r, or "" when GitHub would answer
// 404 for it (see SetPermission).
func (g *GitHub) roleLocked(r *ghRepo, login string) string {
	key := strings.ToLower(login)
	if role, ok := r.perms[key]; ok {
		return role
	}
	if strings.EqualFold(r.owner, login) {
		return "admin"
	}
	if _, known := g.users[key]; known {
		return "read"
	}
	return ""
}

func (g *GitHub) getPermission(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	repo := g.lookupRepo(w, r)
	if repo == nil {
		return
	}
	login := r.PathValue("username")
	role := g.roleLocked(repo, login)
	if role == "" {
		g.failDoc(w, http.StatusNotFound, "Not Found", ghDocsPermission)
		return
	}
	u := g.userJSON(ghURLsFor(r), login)
	u["permissions"] = ghRoles[role].flags
	u["role_name"] = role
	g.reply(w, r, http.StatusOK, map[string]any{"permission": ghRoles[role].base, "role_name": role, "user": u})
}

// createReaction adds the token user's reaction to an issue or pull request
// comment: 201 with the new reaction, or 200 with the one that exists when
// the user already reacted so.
func (g *GitHub) createReaction(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Content *string `json:"content"`
	}
	raw, _ := io.ReadAll(r.Body)
	g.st.Lock()
	defer g.st.Unlock()
	_, _, c := g.lookupComment(w, r, ghDocsReaction)
	if c == nil {
		return
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		g.failDoc(w, http.StatusBadRequest, "Problems parsing JSON", ghDocsReaction)
		return
	}
	if in.Content == nil || !slices.Contains(ghReactionContents, *in.Content) {
		g.validationFailed(w, "Reaction", "content", "content is not included in the list")
		return
	}
	u := ghURLsFor(r)
	for _, x := range c.reactions {
		if x.content == *in.Content && strings.EqualFold(x.user, g.BotLogin) {
			g.reply(w, r, http.StatusOK, g.reactionJSON(u, x))
			return
		}
	}
	x := &ghReaction{id: g.idLocked(), user: g.BotLogin, content: *in.Content, created: g.nowLocked()}
	g.userLocked(x.user)
	c.reactions = append(c.reactions, x)
	g.reply(w, r, http.StatusCreated, g.reactionJSON(u, x))
}

func (g *GitHub) reactionJSON(u ghURLs, x *ghReaction) map[string]any {
	return map[string]any{
		"id": x.id, "node_id": ghNodeID("REA", x.id), "user": g.userJSON(u, x.user),
		"content": x.content, "created_at": ghTime(x.created),
	}
}
