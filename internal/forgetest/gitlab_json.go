package forgetest

import (
	"path"
	"strconv"
	"strings"
)

// The renderers below follow the payloads GitLab documents (and the GitLab
// Go client's testdata): field names, nulls and nesting as the real API.

func (g *GitLab) userID(name string) int64 {
	id, ok := g.users[name]
	if !ok {
		id = int64(len(g.users) + 1)
		g.users[name] = id
	}
	return id
}

func (g *GitLab) userJSON(name string) glObj {
	return glObj{
		"id":         g.userID(name),
		"username":   name,
		"name":       name,
		"state":      "active",
		"locked":     false,
		"avatar_url": "https://secure.gravatar.com/avatar/" + strconv.FormatInt(g.userID(name), 16) + "?s=80&d=identicon",
		"web_url":    g.srv.URL + "/" + name,
	}
}

func (g *GitLab) projectJSON(p *glProject) glObj {
	name := path.Base(p.path)
	ns := glObj{
		"id": p.group.id, "name": path.Base(p.group.path), "path": path.Base(p.group.path),
		"kind": "group", "full_path": p.group.path, "parent_id": nil,
		"avatar_url": nil, "web_url": g.srv.URL + "/groups/" + p.group.path,
	}
	if parent := path.Dir(p.group.path); parent != "." {
		ns["parent_id"] = g.groups[strings.ToLower(parent)].id
	}
	return glObj{
		"id":                     p.id,
		"description":            "",
		"name":                   name,
		"name_with_namespace":    strings.ReplaceAll(p.path, "/", " / "),
		"path":                   name,
		"path_with_namespace":    p.path,
		"created_at":             glTime(p.created),
		"default_branch":         "main",
		"tag_list":               []string{},
		"topics":                 []string{},
		"ssh_url_to_repo":        "git@" + strings.TrimPrefix(g.srv.URL, "http://") + ":" + p.path + ".git",
		"http_url_to_repo":       g.srv.URL + "/" + p.path + ".git",
		"web_url":                g.srv.URL + "/" + p.path,
		"readme_url":             g.srv.URL + "/" + p.path + "/-/blob/main/README.md",
		"avatar_url":             nil,
		"forks_count":            0,
		"star_count":             0,
		"last_activity_at":       glTime(p.created),
		"namespace":              ns,
		"visibility":             "private",
		"archived":               false,
		"issues_enabled":         true,
		"merge_requests_enabled": true,
		"open_issues_count":      len(p.issues),
	}
}

// itemJSON renders an issue or merge request; full adds the fields GitLab
// only sends for a single merge request.
func (g *GitLab) itemJSON(it *glItem, full bool) glObj {
	p := it.project
	sep, seg := "#", "issues"
	if it.kind == KindMergeRequest {
		sep, seg = "!", "merge_requests"
	}
	assignees := make([]glObj, 0, len(it.assignees))
	for _, a := range it.assignees {
		assignees = append(assignees, g.userJSON(a))
	}
	var assignee any
	if len(assignees) > 0 {
		assignee = assignees[0]
	}
	labels := append([]string{}, it.labels...)
	webURL := g.srv.URL + "/" + p.path + "/-/" + seg + "/" + strconv.Itoa(it.iid)
	o := glObj{
		"id":                it.id,
		"iid":               it.iid,
		"project_id":        p.id,
		"title":             it.title,
		"description":       it.body,
		"state":             it.state,
		"created_at":        glTime(it.created),
		"updated_at":        glTime(it.updated),
		"closed_at":         nil,
		"closed_by":         nil,
		"labels":            labels,
		"milestone":         nil,
		"author":            g.userJSON(it.author),
		"assignees":         assignees,
		"assignee":          assignee,
		"user_notes_count":  g.userNotes(it),
		"upvotes":           0,
		"downvotes":         0,
		"discussion_locked": nil,
		"web_url":           webURL,
		"references": glObj{
			"short":    sep + strconv.Itoa(it.iid),
			"relative": sep + strconv.Itoa(it.iid),
			"full":     p.path + sep + strconv.Itoa(it.iid),
		},
		"time_stats": glObj{
			"time_estimate": 0, "total_time_spent": 0,
			"human_time_estimate": nil, "human_total_time_spent": nil,
		},
		"task_completion_status": glObj{"count": 0, "completed_count": 0},
	}
	if it.state != "opened" {
		o["closed_at"] = glTime(it.closed)
		o["closed_by"] = g.userJSON(it.author)
	}
	if it.kind == KindIssue {
		g.issueFields(o, it)
	} else {
		g.mrFields(o, it, full)
	}
	return o
}

func (g *GitLab) issueFields(o glObj, it *glItem) {
	api := g.URL() + "/projects/" + strconv.Itoa(it.project.id)
	o["type"] = "ISSUE"
	o["issue_type"] = "issue"
	o["confidential"] = false
	o["due_date"] = nil
	o["merge_requests_count"] = 0
	o["has_tasks"] = false
	o["moved_to_id"] = nil
	o["service_desk_reply_to"] = nil
	o["severity"] = "UNKNOWN"
	o["_links"] = glObj{
		"self":        api + "/issues/" + strconv.Itoa(it.iid),
		"notes":       api + "/issues/" + strconv.Itoa(it.iid) + "/notes",
		"award_emoji": api + "/issues/" + strconv.Itoa(it.iid) + "/award_emoji",
		"project":     api,
	}
}

func (g *GitLab) mrFields(o glObj, it *glItem, full bool) {
	p := it.project
	o["target_branch"] = it.target
	o["source_branch"] = it.source
	o["source_project_id"] = p.id
	if it.sourceP != nil {
		o["source_project_id"] = it.sourceP.id
	}
	o["target_project_id"] = p.id
	o["reviewers"] = []glObj{}
	o["draft"] = glDraft(it.title)
	o["work_in_progress"] = o["draft"]
	o["merge_when_pipeline_succeeds"] = false
	o["merge_status"] = "can_be_merged"
	o["detailed_merge_status"] = "mergeable"
	o["merged_by"] = nil
	o["merge_user"] = nil
	o["merged_at"] = nil
	o["sha"] = "8e0b45049b6253b8984cde9241830d2851168142"
	o["merge_commit_sha"] = nil
	o["squash_commit_sha"] = nil
	o["should_remove_source_branch"] = nil
	o["force_remove_source_branch"] = true
	o["reference"] = "!" + strconv.Itoa(it.iid)
	o["squash"] = false
	o["squash_on_merge"] = false
	o["has_conflicts"] = false
	o["blocking_discussions_resolved"] = true
	o["imported"] = false
	o["imported_from"] = "none"
	o["approvals_before_merge"] = nil
	if it.state == "merged" {
		o["merged_at"] = glTime(it.closed)
		o["merge_user"] = g.userJSON(it.author)
		o["merged_by"] = g.userJSON(it.author)
		o["closed_at"], o["closed_by"] = nil, nil
	}
	if !full {
		return
	}
	o["subscribed"] = true
	o["changes_count"] = "1"
	o["user"] = glObj{"can_merge": true}
	o["latest_build_started_at"] = nil
	o["latest_build_finished_at"] = nil
	o["first_deployed_to_production_at"] = nil
	o["pipeline"] = nil
	o["head_pipeline"] = nil
	o["diff_refs"] = glObj{
		"base_sha":  "c380d3acebd181f13629a25d2e2acca46ffe1e00",
		"head_sha":  "8e0b45049b6253b8984cde9241830d2851168142",
		"start_sha": "c380d3acebd181f13629a25d2e2acca46ffe1e00",
	}
	o["merge_error"] = nil
	o["first_contribution"] = false
	o["rebase_in_progress"] = false
	o["diverged_commits_count"] = 0
}

func (g *GitLab) userNotes(it *glItem) int {
	n := 0
	for _, nt := range it.notes {
		if !nt.system {
			n++
		}
	}
	return n
}

func (g *GitLab) noteJSON(it *glItem, n *glNote) glObj {
	typ := "Issue"
	if it.kind == KindMergeRequest {
		typ = "MergeRequest"
	}
	return glObj{
		"id":               n.id,
		"type":             nil,
		"body":             n.body,
		"attachment":       nil,
		"author":           g.userJSON(n.author),
		"created_at":       glTime(n.created),
		"updated_at":       glTime(n.updated),
		"system":           n.system,
		"noteable_id":      it.id,
		"noteable_type":    typ,
		"project_id":       it.project.id,
		"noteable_iid":     it.iid,
		"resolvable":       false,
		"confidential":     false,
		"internal":         false,
		"imported":         false,
		"imported_from":    "none",
		"commands_changes": glObj{},
	}
}
