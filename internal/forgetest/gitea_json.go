package forgetest

import (
	"strconv"
	"strings"
	"time"
)

// The JSON of Gitea's objects, as Gitea 1.26 writes them (the fields the
// swagger description lists; those the daemon never reads are kept to a
// plausible few).

func (g *Gitea) userJSON(u urls, login string) map[string]any {
	if login == "" {
		login = "ghost"
	}
	return map[string]any{"id": userID(login), "login": login, "username": login, "login_name": "", "full_name": "",
		"email": login + "@noreply.localhost", "avatar_url": u.html + "/avatars/" + login, "html_url": u.html + "/" + login,
		"language": "", "is_admin": false, "last_login": time.Time{}, "created": time.Time{}, "restricted": false,
		"active": true, "prohibit_login": false, "location": "", "website": "", "description": "", "visibility": "public",
		"followers_count": 0, "following_count": 0, "starred_repos_count": 0, "source_id": 0}
}

// userID is a stable id for a login.
func userID(login string) int64 {
	var h int64 = 7
	for _, c := range strings.ToLower(login) {
		h = h*31 + int64(c)
	}
	return h&0xffffff + 1
}

func (g *Gitea) repoJSON(u urls, rp *gtRepo) map[string]any {
	owner, name, _ := strings.Cut(rp.full, "/")
	p := g.perm(rp, g.BotUsername)
	admin := p == "admin" || p == "owner"
	return map[string]any{"id": rp.id, "owner": g.userJSON(u, owner), "name": name, "full_name": rp.full,
		"description": "", "empty": false, "private": false, "fork": false, "template": false, "mirror": false,
		"size": 1, "html_url": u.html + "/" + rp.full, "url": u.api + "/repos/" + rp.full,
		"clone_url": g.RepoURL(rp.full), "ssh_url": "", "default_branch": rp.defBranch, "archived": false,
		"has_issues": true, "has_pull_requests": true, "created_at": time.Time{}, "updated_at": time.Time{},
		"permissions": map[string]bool{"admin": admin, "push": admin || p == "write", "pull": p != "none"}}
}

func (g *Gitea) labelJSON(rp *gtRepo, l *gtLabel) map[string]any {
	return map[string]any{"id": l.id, "name": l.name, "exclusive": false, "is_archived": false, "color": l.color,
		"description": "", "url": g.urls().api + "/repos/" + rp.full + "/labels/" + strconv.FormatInt(l.id, 10)}
}

func (g *Gitea) labelsJSON(rp *gtRepo, it *gtItem) []any {
	out := []any{}
	for _, l := range rp.labels {
		for _, id := range it.labels {
			if l.id == id {
				out = append(out, g.labelJSON(rp, l))
			}
		}
	}
	return out
}

func (g *Gitea) usersJSON(u urls, logins []string) []any {
	out := []any{}
	for _, l := range logins {
		out = append(out, g.userJSON(u, l))
	}
	return out
}

func (g *Gitea) issueJSON(u urls, rp *gtRepo, it *gtItem) map[string]any {
	owner, name, _ := strings.Cut(rp.full, "/")
	kind := "issues"
	var pull any
	if it.pull {
		kind = "pulls"
		pull = map[string]any{"merged": false, "merged_at": nil, "draft": strings.HasPrefix(it.title, "WIP:"),
			"html_url": u.html + "/" + rp.full + "/pulls/" + strconv.Itoa(it.number)}
	}
	var closed any
	if it.state == "closed" {
		closed = it.updated
	}
	return map[string]any{"id": it.id, "url": u.api + "/repos/" + rp.full + "/issues/" + strconv.Itoa(it.number),
		"html_url": u.html + "/" + rp.full + "/" + kind + "/" + strconv.Itoa(it.number), "number": it.number,
		"user": g.userJSON(u, it.author), "original_author": "", "original_author_id": 0, "title": it.title, "body": it.body,
		"ref": "", "assets": []any{}, "labels": g.labelsJSON(rp, it), "milestone": nil, "assignee": nil,
		"assignees": g.usersJSON(u, it.assignees), "state": it.state, "is_locked": false, "comments": len(it.comments),
		"created_at": it.created, "updated_at": it.updated, "closed_at": closed, "due_date": nil, "pull_request": pull,
		"repository": map[string]any{"id": rp.id, "name": name, "owner": owner, "full_name": rp.full}, "pin_order": 0}
}

func (g *Gitea) branchJSON(u urls, rp *gtRepo, repo, branch string) map[string]any {
	sha := ""
	if gr, err := g.ensure(repo); err == nil && gr != nil {
		sha, _, _ = g.head(gr, branch)
	}
	r := g.repos[strings.ToLower(repo)]
	if r == nil {
		r = rp
	}
	return map[string]any{"label": branch, "ref": branch, "sha": sha, "repo_id": r.id, "repo": g.repoJSON(u, r)}
}

func (g *Gitea) pullJSON(u urls, rp *gtRepo, it *gtItem) map[string]any {
	is := g.issueJSON(u, rp, it)
	headRepo := rp.full
	if it.headRepo != "" {
		headRepo = it.headRepo
	}
	return map[string]any{"id": it.id, "url": is["html_url"], "number": it.number, "user": is["user"], "title": it.title,
		"body": it.body, "labels": is["labels"], "milestone": nil, "assignee": nil, "assignees": is["assignees"],
		"state": it.state, "is_locked": false, "comments": len(it.comments), "html_url": is["html_url"],
		"diff_url": is["html_url"].(string) + ".diff", "patch_url": is["html_url"].(string) + ".patch",
		"mergeable": true, "merged": false, "merged_at": nil, "merge_commit_sha": nil, "merged_by": nil,
		"draft": strings.HasPrefix(it.title, "WIP:"), "allow_maintainer_edit": false,
		"base": g.branchJSON(u, rp, rp.full, it.base), "head": g.branchJSON(u, rp, headRepo, it.head),
		"merge_base": "", "due_date": nil, "created_at": it.created, "updated_at": it.updated, "closed_at": is["closed_at"]}
}

func (g *Gitea) commentJSON(u urls, rp *gtRepo, it *gtItem, c *gtComment) map[string]any {
	issueURL := u.html + "/" + rp.full + "/issues/" + strconv.Itoa(it.number)
	pullURL := ""
	if it.pull {
		pullURL = u.html + "/" + rp.full + "/pulls/" + strconv.Itoa(it.number)
	}
	return map[string]any{"id": c.id, "html_url": issueURL + "#issuecomment-" + strconv.FormatInt(c.id, 10),
		"pull_request_url": pullURL, "issue_url": issueURL, "user": g.userJSON(u, c.author), "original_author": "",
		"original_author_id": 0, "body": c.body, "assets": []any{}, "created_at": c.created, "updated_at": c.updated}
}

func (g *Gitea) reactionJSON(x gtReaction) map[string]any {
	return map[string]any{"user": g.userJSON(g.urls(), x.user), "content": x.content, "created_at": x.created}
}
