package forgetest

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// projectLabels are the labels project p defines: those created (with their
// color) and, as GitLab creates a label that an issue or merge request is
// given, those on its items (color "#6699cc", GitLab's default). Sorted by
// name. The caller holds g.dmu.
func (g *GitLab) projectLabels(p *glProject) map[string]string {
	out := map[string]string{}
	for _, items := range []map[int]*glItem{p.issues, p.mrs} {
		for _, it := range items {
			for _, l := range it.labels {
				out[l] = "#6699cc"
			}
		}
	}
	for name, color := range p.labels {
		out[name] = color
	}
	return out
}

func listProjectLabels(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
	p := g.project(args[0])
	if p == nil {
		g.reply(w, r, http.StatusNotFound, glObj{"message": "404 Project Not Found"})
		return
	}
	defined := g.projectLabels(p)
	names := make([]string, 0, len(defined))
	for n := range defined {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]glObj, 0, len(names))
	for i, n := range names {
		out = append(out, glObj{"id": i + 1, "name": n, "color": defined[n], "text_color": "#FFFFFF",
			"description": nil, "open_issues_count": 0, "closed_issues_count": 0, "open_merge_requests_count": 0,
			"subscribed": false, "priority": nil, "is_project_label": true})
	}
	g.paginate(w, r, out)
}

var glColor = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

func createProjectLabel(g *GitLab, w http.ResponseWriter, r *http.Request, args []string) {
	p := g.project(args[0])
	if p == nil {
		g.reply(w, r, http.StatusNotFound, glObj{"message": "404 Project Not Found"})
		return
	}
	ps, ok := g.params(w, r)
	if !ok {
		return
	}
	name, color := strings.TrimSpace(ps["name"]), ps["color"]
	switch {
	case name == "" || color == "":
		g.reply(w, r, http.StatusBadRequest, glObj{"error": "name is missing, color is missing"})
		return
	case !glColor.MatchString(color):
		g.reply(w, r, http.StatusBadRequest, glObj{"message": glObj{"color": []string{"must be a valid color code"}}})
		return
	}
	if _, exists := g.projectLabels(p)[name]; exists {
		g.reply(w, r, http.StatusConflict, glObj{"message": "Label already exists"})
		return
	}
	if p.labels == nil {
		p.labels = map[string]string{}
	}
	p.labels[name] = strings.ToLower(color)
	g.reply(w, r, http.StatusCreated, glObj{"id": len(p.labels), "name": name, "color": p.labels[name], "text_color": "#FFFFFF",
		"description": nil, "is_project_label": true})
}

// ProjectLabelColor is the color of a label project defines, "" when it
// defines none by that name.
func (g *GitLab) ProjectLabelColor(project, name string) string {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	return g.projectLabels(g.project(project))[name]
}
