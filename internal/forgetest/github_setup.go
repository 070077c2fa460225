package forgetest

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
)

// listRepoLabels answers GET /repos/{owner}/{repo}/labels: the labels the
// repository defines (those put on an item are defined on the way, as on
// GitHub).
func (g *GitHub) listRepoLabels(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	repo := g.lookupRepo(w, r)
	if repo == nil {
		return
	}
	g.reply(w, r, http.StatusOK, g.labelsJSON(r, repo, ghPage(w, r, repo.labels, 0)))
}

var ghColor = regexp.MustCompile(`^[0-9a-fA-F]{6}$`)

// createRepoLabel answers POST /repos/{owner}/{repo}/labels.
func (g *GitHub) createRepoLabel(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name  string `json:"name"`
		Color string `json:"color"`
	}
	b, _ := io.ReadAll(r.Body)
	if json.Unmarshal(b, &in) != nil || strings.TrimSpace(in.Name) == "" {
		ghInvalid(w, "https://docs.github.com/rest/issues/labels#create-a-label",
			map[string]any{"resource": "Label", "code": "missing_field", "field": "name"})
		return
	}
	if in.Color != "" && !ghColor.MatchString(in.Color) {
		ghInvalid(w, "https://docs.github.com/rest/issues/labels#create-a-label",
			map[string]any{"resource": "Label", "code": "invalid", "field": "color"})
		return
	}
	g.st.Lock()
	defer g.st.Unlock()
	repo := g.lookupRepo(w, r)
	if repo == nil {
		return
	}
	if g.repoLabelLocked(repo, in.Name, false) != nil {
		ghInvalid(w, "https://docs.github.com/rest/issues/labels#create-a-label",
			map[string]any{"resource": "Label", "code": "already_exists", "field": "name"})
		return
	}
	l := g.repoLabelLocked(repo, in.Name, true)
	if in.Color != "" {
		l.color = strings.ToLower(in.Color)
	}
	g.reply(w, r, http.StatusCreated, ghLabelJSON(ghURLsFor(r), repo, l))
}

// RepoLabelColor is the color of a label repo defines, "" when it defines
// none by that name.
func (g *GitHub) RepoLabelColor(repo, name string) string {
	g.st.Lock()
	defer g.st.Unlock()
	if l := g.repoLabelLocked(g.repoLocked(repo), name, false); l != nil {
		return l.color
	}
	return ""
}

// botPermissions are the token user's permissions on a repository as GET
// /repos/{owner}/{repo} tells them: from the role SetPermission gave
// BotLogin, else write. Callers hold g.st.
func (g *GitHub) botPermissionsLocked(r *ghRepo) map[string]any {
	role, ok := r.perms[strings.ToLower(g.BotLogin)]
	if !ok {
		role = "write"
	}
	rank := map[string]int{"read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}[role]
	return map[string]any{"admin": rank >= 5, "maintain": rank >= 4, "push": rank >= 3, "triage": rank >= 2, "pull": rank >= 1}
}
