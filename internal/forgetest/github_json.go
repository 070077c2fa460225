package forgetest

import (
	"crypto/sha1"
	"encoding/hex"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The payload builders below follow the schemas of GitHub's OpenAPI
// description (simple-user, private-user, label, issue, issue-comment,
// pull-request, repository, issue-search-result-item); a test validates
// them against it.

func ghTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func ghTimeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return ghTime(t)
}

func ghNodeID(prefix string, id int64) string { return prefix + "_kwDO" + strconv.FormatInt(id, 36) }

func (g *GitHub) userJSON(u ghURLs, login string) map[string]any {
	usr := g.userLocked(login)
	api := u.api + "/users/" + usr.login
	return map[string]any{
		"login": usr.login, "id": usr.id, "node_id": ghNodeID("U", usr.id),
		"avatar_url":          "https://avatars.githubusercontent.com/u/" + strconv.FormatInt(usr.id, 10) + "?v=4",
		"gravatar_id":         "",
		"url":                 api,
		"html_url":            u.html + "/" + usr.login,
		"followers_url":       api + "/followers",
		"following_url":       api + "/following{/other_user}",
		"gists_url":           api + "/gists{/gist_id}",
		"starred_url":         api + "/starred{/owner}{/repo}",
		"subscriptions_url":   api + "/subscriptions",
		"organizations_url":   api + "/orgs",
		"repos_url":           api + "/repos",
		"events_url":          api + "/events{/privacy}",
		"received_events_url": api + "/received_events",
		"type":                "User",
		"user_view_type":      "public",
		"site_admin":          false,
	}
}

// privateUserJSON is GET /user: the token's own user with private details.
func (g *GitHub) privateUserJSON(u ghURLs, login string) map[string]any {
	v := g.userJSON(u, login)
	usr := g.userLocked(login)
	v["user_view_type"] = "private"
	for k, x := range map[string]any{
		"name": nil, "company": nil, "blog": "", "location": nil, "email": nil, "notification_email": nil,
		"hireable": nil, "bio": nil, "twitter_username": nil, "public_repos": 0, "public_gists": 0,
		"followers": 0, "following": 0, "created_at": ghTime(usr.created), "updated_at": ghTime(usr.created),
		"private_gists": 0, "total_private_repos": 0, "owned_private_repos": 0, "disk_usage": 0,
		"collaborators": 0, "two_factor_authentication": true,
	} {
		v[k] = x
	}
	return v
}

func ghRepoAPI(u ghURLs, r *ghRepo) string { return u.api + "/repos/" + r.owner + "/" + r.name }

func ghLabelJSON(u ghURLs, r *ghRepo, l *ghLabel) map[string]any {
	return map[string]any{
		"id": l.id, "node_id": ghNodeID("LA", l.id),
		"url":  ghRepoAPI(u, r) + "/labels/" + url.PathEscape(l.name),
		"name": l.name, "color": l.color, "default": false, "description": nil,
	}
}

func ghAssociation(r *ghRepo, login string) string {
	if strings.EqualFold(r.owner, login) {
		return "OWNER"
	}
	return "NONE"
}

func (g *GitHub) issueJSON(u ghURLs, r *ghRepo, it *ghItem) map[string]any {
	api := ghRepoAPI(u, r) + "/issues/" + strconv.Itoa(it.number)
	html := u.html + "/" + r.owner + "/" + r.name + "/issues/" + strconv.Itoa(it.number)
	labels := make([]any, 0, len(it.labels))
	for _, l := range it.labels {
		labels = append(labels, ghLabelJSON(u, r, l))
	}
	assignees := make([]any, 0, len(it.assignees))
	for _, a := range it.assignees {
		assignees = append(assignees, g.userJSON(u, a))
	}
	var assignee any
	if len(assignees) > 0 {
		assignee = assignees[0]
	}
	var body, stateReason any
	if it.body != "" {
		body = it.body
	}
	if it.state == "closed" {
		stateReason = "completed"
	}
	v := map[string]any{
		"id": it.id, "node_id": ghNodeID("I", it.id), "url": api,
		"repository_url": ghRepoAPI(u, r), "labels_url": api + "/labels{/name}",
		"comments_url": api + "/comments", "events_url": api + "/events", "timeline_url": api + "/timeline",
		"html_url": html, "number": it.number, "state": it.state, "state_reason": stateReason,
		"title": it.title, "body": body, "user": g.userJSON(u, it.author), "labels": labels,
		"assignee": assignee, "assignees": assignees, "milestone": nil, "locked": false,
		"active_lock_reason": nil, "comments": len(it.comments), "closed_at": ghTimeOrNil(it.closed),
		"created_at": ghTime(it.created), "updated_at": ghTime(it.updated),
		"author_association": ghAssociation(r, it.author), "performed_via_github_app": nil,
	}
	if it.pull != nil {
		pulls := ghRepoAPI(u, r) + "/pulls/" + strconv.Itoa(it.number)
		prHTML := u.html + "/" + r.owner + "/" + r.name + "/pull/" + strconv.Itoa(it.number)
		v["html_url"] = prHTML
		v["node_id"] = ghNodeID("PR", it.id)
		v["draft"] = it.pull.draft
		v["pull_request"] = map[string]any{
			"url": pulls, "html_url": prHTML, "diff_url": prHTML + ".diff", "patch_url": prHTML + ".patch", "merged_at": nil,
		}
	}
	return v
}

func (g *GitHub) commentJSON(u ghURLs, r *ghRepo, it *ghItem, c *ghComment) map[string]any {
	issueHTML := u.html + "/" + r.owner + "/" + r.name + "/issues/" + strconv.Itoa(it.number)
	if it.pull != nil {
		issueHTML = u.html + "/" + r.owner + "/" + r.name + "/pull/" + strconv.Itoa(it.number)
	}
	return map[string]any{
		"id": c.id, "node_id": ghNodeID("IC", c.id),
		"url":                      ghRepoAPI(u, r) + "/issues/comments/" + strconv.FormatInt(c.id, 10),
		"html_url":                 issueHTML + "#issuecomment-" + strconv.FormatInt(c.id, 10),
		"issue_url":                ghRepoAPI(u, r) + "/issues/" + strconv.Itoa(it.number),
		"body":                     c.body,
		"user":                     g.userJSON(u, c.author),
		"created_at":               ghTime(c.created),
		"updated_at":               ghTime(c.updated),
		"author_association":       ghAssociation(r, c.author),
		"performed_via_github_app": nil,
	}
}

func (g *GitHub) repoJSON(u ghURLs, r *ghRepo) map[string]any {
	api := ghRepoAPI(u, r)
	html := u.html + "/" + r.owner + "/" + r.name
	v := map[string]any{
		"id": r.id, "node_id": ghNodeID("R", r.id), "name": r.name, "full_name": r.owner + "/" + r.name,
		"owner": g.userJSON(u, r.owner), "private": false, "html_url": html, "description": nil,
		"fork": r.parent != nil, "url": api, "homepage": nil, "language": nil, "mirror_url": nil, "license": nil,
		"clone_url": html + ".git", "git_url": strings.Replace(html, "http://", "git://", 1) + ".git",
		"ssh_url": "git@" + strings.TrimPrefix(u.html, "http://") + ":" + r.owner + "/" + r.name + ".git",
		"svn_url": html, "default_branch": "main", "size": 0, "archived": false, "disabled": false,
		"forks": 0, "forks_count": 0, "watchers": 0, "watchers_count": 0, "stargazers_count": 0,
		"open_issues": 0, "open_issues_count": 0, "has_issues": true, "has_projects": true,
		"has_wiki": true, "has_pages": false, "has_downloads": true,
		"created_at": ghTime(r.created), "updated_at": ghTime(r.created), "pushed_at": ghTime(r.created),
	}
	for k, suffix := range map[string]string{
		"archive_url": "/{archive_format}{/ref}", "assignees_url": "/assignees{/user}",
		"blobs_url": "/git/blobs{/sha}", "branches_url": "/branches{/branch}",
		"collaborators_url": "/collaborators{/collaborator}", "comments_url": "/comments{/number}",
		"commits_url": "/commits{/sha}", "compare_url": "/compare/{base}...{head}",
		"contents_url": "/contents/{+path}", "contributors_url": "/contributors",
		"deployments_url": "/deployments", "downloads_url": "/downloads", "events_url": "/events",
		"forks_url": "/forks", "git_commits_url": "/git/commits{/sha}", "git_refs_url": "/git/refs{/sha}",
		"git_tags_url": "/git/tags{/sha}", "hooks_url": "/hooks",
		"issue_comment_url": "/issues/comments{/number}", "issue_events_url": "/issues/events{/number}",
		"issues_url": "/issues{/number}", "keys_url": "/keys{/key_id}", "labels_url": "/labels{/name}",
		"languages_url": "/languages", "merges_url": "/merges", "milestones_url": "/milestones{/number}",
		"notifications_url": "/notifications{?since,all,participating}", "pulls_url": "/pulls{/number}",
		"releases_url": "/releases{/id}", "stargazers_url": "/stargazers", "statuses_url": "/statuses/{sha}",
		"subscribers_url": "/subscribers", "subscription_url": "/subscription", "tags_url": "/tags",
		"teams_url": "/teams", "trees_url": "/git/trees{/sha}",
	} {
		v[k] = api + suffix
	}
	return v
}

// fullRepoJSON is GET /repos/{owner}/{repo}: the repository with the
// fields only that answer carries, and for a fork its parent and source.
func (g *GitHub) fullRepoJSON(u ghURLs, r *ghRepo) map[string]any {
	v := g.repoJSON(u, r)
	open := 0
	for _, it := range r.items {
		if it.state == "open" {
			open++
		}
	}
	for k, x := range map[string]any{
		"open_issues": open, "open_issues_count": open, "has_discussions": false,
		"network_count": 0, "subscribers_count": 0, "visibility": "public", "topics": []any{},
		"is_template": false, "allow_forking": true, "web_commit_signoff_required": false,
		"temp_clone_token": nil,
		"permissions":      g.botPermissionsLocked(r),
	} {
		v[k] = x
	}
	if r.parent != nil {
		root := r.parent
		for root.parent != nil {
			root = root.parent
		}
		v["parent"], v["source"] = g.repoJSON(u, r.parent), g.repoJSON(u, root)
	}
	return v
}

func ghSHA(parts ...string) string {
	s := sha1.Sum([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(s[:])
}

func (g *GitHub) pullJSON(u ghURLs, r *ghRepo, it *ghItem) map[string]any {
	iss := g.issueJSON(u, r, it)
	n := strconv.Itoa(it.number)
	api := ghRepoAPI(u, r) + "/pulls/" + n
	html := iss["html_url"].(string)
	branch := func(in *ghRepo, ref string) map[string]any {
		return map[string]any{
			"label": in.owner + ":" + ref, "ref": ref, "sha": ghSHA(in.owner, in.name, ref, n),
			"user": g.userJSON(u, in.owner), "repo": g.repoJSON(u, in),
		}
	}
	href := func(s string) map[string]any { return map[string]any{"href": s} }
	v := map[string]any{
		"url": api, "id": it.id, "node_id": iss["node_id"], "html_url": html,
		"diff_url": html + ".diff", "patch_url": html + ".patch", "issue_url": iss["url"],
		"commits_url": api + "/commits", "review_comments_url": api + "/comments",
		"review_comment_url": ghRepoAPI(u, r) + "/pulls/comments{/number}",
		"comments_url":       iss["comments_url"], "statuses_url": ghRepoAPI(u, r) + "/statuses/" + ghSHA(r.owner, r.name, it.pull.head, n),
		"number": it.number, "state": it.state, "locked": false, "title": it.title, "user": iss["user"],
		"body": iss["body"], "labels": iss["labels"], "milestone": nil, "active_lock_reason": nil,
		"created_at": iss["created_at"], "updated_at": iss["updated_at"], "closed_at": iss["closed_at"],
		"merged_at": nil, "merge_commit_sha": nil, "assignee": iss["assignee"], "assignees": iss["assignees"],
		"requested_reviewers": []any{}, "requested_teams": []any{},
		"head": branch(it.pull.headRepo, it.pull.head), "base": branch(r, it.pull.base),
		"_links": map[string]any{
			"self": href(api), "html": href(html), "issue": href(iss["url"].(string)),
			"comments": href(iss["comments_url"].(string)), "review_comments": href(api + "/comments"),
			"review_comment": href(ghRepoAPI(u, r) + "/pulls/comments{/number}"), "commits": href(api + "/commits"),
			"statuses": href(ghRepoAPI(u, r) + "/statuses/" + ghSHA(r.owner, r.name, it.pull.head, n)),
		},
		"author_association": iss["author_association"], "auto_merge": nil, "draft": it.pull.draft,
		"merged": false, "mergeable": true, "rebaseable": true, "mergeable_state": "clean",
		"merged_by": nil, "comments": len(it.comments), "review_comments": 0,
		"maintainer_can_modify": false, "commits": 1, "additions": 0, "deletions": 0, "changed_files": 0,
	}
	return v
}
