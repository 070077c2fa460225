package forgetest

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// glDraftTitle is how GitLab tells a draft merge request: a title that
// begins with "Draft:", "[Draft]" or "(Draft)", in any case. The API has no
// draft parameter when creating one; its answers carry draft (and the older
// work_in_progress).
var glDraftTitle = regexp.MustCompile(`(?i)^\s*(\[draft\]|\(draft\)|draft:)`)

func glDraft(title string) bool { return glDraftTitle.MatchString(title) }

// MR is a merge request as the emulator holds it.
type MR struct {
	IID           int
	Title         string
	Description   string
	Author        string
	State         string // "opened", "closed" or "merged"
	Draft         bool   // from the title, as GitLab tells
	SourceBranch  string
	SourceProject string // path of the project SourceBranch is in
	TargetBranch  string
}

// MRs returns the merge requests of project, by iid.
func (g *GitLab) MRs(project string) []MR {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	p := g.mustProject(project)
	out := make([]MR, 0, len(p.mrs))
	for iid := 1; iid <= len(p.mrs); iid++ {
		it := p.mrs[iid]
		out = append(out, MR{IID: iid, Title: it.title, Description: it.body, Author: it.author, State: it.state,
			Draft: glDraft(it.title), SourceBranch: it.source, SourceProject: it.sourceProject().path, TargetBranch: it.target})
	}
	return out
}

// createMR answers POST /projects/:id/merge_requests as the token's user:
// title, source_branch and target_branch (400 when missing), description,
// labels, and target_project_id when :id is a fork proposing to another
// project. GitLab's refusals: the same branch of the same project as source
// and target (422); an open merge request from the same source branch into
// the same target branch (409, "Another open merge request already exists
// for this source branch: !N"); a branch that does not exist in git (422).
// Unlike GitHub, GitLab opens a merge request that carries no commit.
func createMR(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
	src := g.project(args[0])
	if src == nil {
		g.reply(w, r, http.StatusNotFound, glObj{"message": "404 Project Not Found"})
		return
	}
	ps, ok := g.params(w, r)
	if !ok {
		return
	}
	var missing []string
	for _, k := range []string{"title", "source_branch", "target_branch"} {
		if strings.TrimSpace(ps[k]) == "" {
			missing = append(missing, k+" is missing")
		}
	}
	if len(missing) > 0 {
		g.reply(w, r, http.StatusBadRequest, glObj{"error": strings.Join(missing, ", ")})
		return
	}
	target := src
	if id, ok := ps["target_project_id"]; ok {
		if target = g.project(id); target == nil {
			g.reply(w, r, http.StatusNotFound, glObj{"message": "404 Project Not Found"})
			return
		}
	}
	source, targetBranch := ps["source_branch"], ps["target_branch"]
	if target == src && source == targetBranch {
		g.reply(w, r, http.StatusUnprocessableEntity, glObj{"message": []string{"You can't use same project/branch for source and target"}})
		return
	}
	for _, it := range target.mrs {
		if it.state == "opened" && it.sourceProject() == src && it.source == source && it.target == targetBranch {
			g.reply(w, r, http.StatusConflict, glObj{"message": []string{
				"Another open merge request already exists for this source branch: !" + strconv.Itoa(it.iid)}})
			return
		}
	}
	_, targetOK, sourceOK, err := g.compare(target.path, targetBranch, src.path, source)
	switch {
	case err != nil:
		g.reply(w, r, http.StatusInternalServerError, glObj{"message": "500 Internal Server Error: " + err.Error()})
		return
	case !sourceOK:
		g.reply(w, r, http.StatusUnprocessableEntity, glObj{"message": []string{`Source branch "` + source + `" does not exist`}})
		return
	case !targetOK:
		g.reply(w, r, http.StatusUnprocessableEntity, glObj{"message": []string{`Target branch "` + targetBranch + `" does not exist`}})
		return
	}
	it := g.newItem(target, KindMergeRequest, IssueSeed{
		Title: ps["title"], Body: ps["description"], Author: g.BotUsername,
		Labels: glSplitLabels(ps["labels"]), LabeledBy: g.BotUsername,
	})
	it.source, it.target = source, targetBranch
	if src != target {
		it.sourceP = src
	}
	it.iid = len(target.mrs) + 1
	target.mrs[it.iid] = it
	g.reply(w, r, http.StatusCreated, g.itemJSON(it, true))
}

// sourceProject is the project a merge request's source branch is in.
func (it *glItem) sourceProject() *glProject {
	if it.sourceP != nil {
		return it.sourceP
	}
	return it.project
}
