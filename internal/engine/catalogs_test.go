package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/toolhost"
	"github.com/coding-agent/coding-agent/internal/workspace/builtin"
)

// Catalogs for the tests of a catalog offered in part: MCP servers served
// in process, beside the built-in workspace server as the daemon runs it
// (in process, one instance per task).

// toolSpec is one tool of a test server.
type toolSpec struct {
	name, desc string
	schema     json.RawMessage
}

// mcpServer is a test server: its name and its tools.
type mcpServer struct {
	name  string
	tools []toolSpec
}

// catalogHost starts a host with the workspace server first, then servers.
// Each test tool answers "<name> says <text>".
func catalogHost(t *testing.T, servers ...mcpServer) *toolhost.Host {
	t.Helper()
	byName := map[string]*mcp.Server{}
	cfgs := []toolhost.ServerConfig{{Name: "workspace", Scope: toolhost.ScopeTask,
		SystemPrompt: "The task's repository is checked out in the directory the workspace tools work in.",
		InProcess: func(vars toolhost.TaskVars) (*mcp.Server, error) {
			return builtin.NewServer(builtin.Options{Dir: vars.Workspace})
		}}}
	for _, srv := range servers {
		s := mcp.NewServer(&mcp.Implementation{Name: srv.name, Version: "1"}, nil)
		for _, spec := range srv.tools {
			name := spec.name
			s.AddTool(&mcp.Tool{Name: name, Description: spec.desc, InputSchema: spec.schema},
				func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					var args struct {
						Text string `json:"text"`
					}
					_ = json.Unmarshal(req.Params.Arguments, &args)
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " says " + args.Text}}}, nil
				})
		}
		byName[srv.name] = s
		cfgs = append(cfgs, toolhost.ServerConfig{Name: srv.name})
	}
	h, err := toolhost.Start(t.Context(), toolhost.Options{Servers: cfgs,
		Connect: func(ctx context.Context, cfg toolhost.ServerConfig) (mcp.Transport, error) {
			st, ct := mcp.NewInMemoryTransports()
			ss, err := byName[cfg.Name].Connect(ctx, st, nil)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { _ = ss.Close() })
			return ct, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// widgets are n tools, tool_001 … tool_n, each saying which it is, with a
// schema of about 1 KB.
func widgets(n int) mcpServer {
	s := mcpServer{name: "many"}
	for i := 1; i <= n; i++ {
		s.tools = append(s.tools, toolSpec{name: fmt.Sprintf("tool_%03d", i),
			desc:   fmt.Sprintf("Answers as tool number %d of the many server, which files reports about widgets of kind %d.", i, i),
			schema: widgetSchema})
	}
	return s
}

var widgetSchema = compact(`{"type":"object","properties":{
	"text":{"type":"string","description":"What the report says, in plain words; markdown is kept as written."},
	"owner":{"type":"string","description":"The login of the person who owns the report; when left out, the author of the task owns it."},
	"size":{"type":"integer","minimum":1,"maximum":1000,"description":"How many widgets the report covers, between one and a thousand."},
	"labels":{"type":"array","items":{"type":"string"},"description":"Labels to put on the report, as the widget tracker names them; a label it does not know is created."},
	"state":{"type":"string","enum":["draft","open","closed"],"default":"open","description":"The state the report is filed in: a draft is seen by its owner only."},
	"due":{"type":"string","format":"date","description":"The day the report is due, as YYYY-MM-DD; none when left out."},
	"notify":{"type":"boolean","default":false,"description":"Whether the owner and the watchers of the widget hear of the report by mail."}
},"required":["text"]}`)

func compact(s string) json.RawMessage {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// gitlab is a server of 118 tools named and described as a GitLab MCP
// server's are: what can be done with each kind of thing GitLab keeps,
// with schemas of 500 B to 1.5 KB.
func gitlab() mcpServer {
	type kind struct {
		one, many, id string
		tools         []string
	}
	kinds := []kind{
		{"project", "projects", "project_id", []string{"list_projects", "get_project", "create_project", "update_project", "delete_project", "fork_project"}},
		{"file", "files", "file_path", []string{"get_file_contents", "create_or_update_file", "delete_file", "push_files", "get_repository_tree"}},
		{"branch", "branches", "branch", []string{"list_branches", "get_branch", "create_branch", "delete_branch", "protect_branch", "unprotect_branch", "compare_branches"}},
		{"commit", "commits", "sha", []string{"list_commits", "get_commit", "get_commit_diff", "cherry_pick_commit", "revert_commit", "get_commit_statuses"}},
		{"issue", "issues", "issue_iid", []string{"list_issues", "get_issue", "create_issue", "update_issue", "delete_issue", "move_issue", "list_issue_participants"}},
		{"issue note", "issue notes", "note_id", []string{"list_issue_notes", "create_issue_note", "update_issue_note", "delete_issue_note"}},
		{"issue link", "issue links", "issue_link_id", []string{"list_issue_links", "create_issue_link", "delete_issue_link"}},
		{"merge request", "merge requests", "merge_request_iid", []string{"list_merge_requests", "get_merge_request", "create_merge_request",
			"update_merge_request", "merge_merge_request", "rebase_merge_request", "approve_merge_request", "unapprove_merge_request",
			"get_merge_request_diffs", "list_merge_request_commits", "list_merge_request_pipelines"}},
		{"merge request thread", "merge request threads", "discussion_id", []string{"list_merge_request_discussions",
			"create_merge_request_thread", "create_merge_request_note", "update_merge_request_note", "resolve_merge_request_thread"}},
		{"draft note", "draft notes", "draft_note_id", []string{"list_draft_notes", "create_draft_note", "update_draft_note", "delete_draft_note", "publish_draft_notes"}},
		{"label", "labels", "label_id", []string{"list_labels", "get_label", "create_label", "update_label", "delete_label"}},
		{"milestone", "milestones", "milestone_id", []string{"list_milestones", "get_milestone", "create_milestone", "update_milestone",
			"delete_milestone", "list_milestone_issues", "list_milestone_merge_requests"}},
		{"pipeline", "pipelines", "pipeline_id", []string{"list_pipelines", "get_pipeline", "create_pipeline", "retry_pipeline",
			"cancel_pipeline", "delete_pipeline", "list_pipeline_jobs", "get_pipeline_variables"}},
		{"job", "jobs", "job_id", []string{"get_job", "get_job_log", "retry_job", "cancel_job", "play_job", "list_job_artifacts", "download_job_artifacts"}},
		{"release", "releases", "tag_name", []string{"list_releases", "get_release", "create_release", "update_release", "delete_release"}},
		{"tag", "tags", "tag_name", []string{"list_tags", "get_tag", "create_tag", "delete_tag"}},
		{"wiki page", "wiki pages", "slug", []string{"list_wiki_pages", "get_wiki_page", "create_wiki_page", "update_wiki_page", "delete_wiki_page"}},
		{"namespace", "namespaces", "namespace_id", []string{"list_namespaces", "get_namespace", "list_group_projects", "list_group_members", "get_users", "list_project_members"}},
		{"environment", "environments", "environment_id", []string{"list_environments", "get_environment", "stop_environment", "list_deployments", "get_deployment"}},
		{"CI/CD variable", "CI/CD variables", "key", []string{"list_project_variables", "create_project_variable", "update_project_variable", "delete_project_variable"}},
		{"webhook", "webhooks", "hook_id", []string{"list_project_hooks", "create_project_hook", "delete_project_hook"}},
	}
	own := map[string]string{
		"fork_project":                  "Fork a project into a namespace the user can write to.",
		"get_file_contents":             "Get the contents of a file, or the listing of a directory, of a project's repository at a ref.",
		"create_or_update_file":         "Create a file in a project's repository, or replace its contents, in one commit on a branch.",
		"push_files":                    "Push several files to a branch in one commit.",
		"get_repository_tree":           "List the files and directories of a project's repository at a path and ref.",
		"protect_branch":                "Protect a branch: only the roles allowed may push to it or merge into it.",
		"unprotect_branch":              "Remove the protection of a branch.",
		"compare_branches":              "Compare two branches, tags or commits: the commits and the diffs between them.",
		"get_commit_diff":               "Get the diff of a commit, file by file.",
		"cherry_pick_commit":            "Cherry-pick a commit onto a branch.",
		"revert_commit":                 "Revert a commit on a branch with a new commit.",
		"get_commit_statuses":           "Get the statuses external services reported for a commit.",
		"move_issue":                    "Move an issue to another project.",
		"list_issue_participants":       "List the people who took part in an issue.",
		"merge_merge_request":           "Merge a merge request into its target branch once it can be merged.",
		"rebase_merge_request":          "Rebase the source branch of a merge request on its target branch.",
		"approve_merge_request":         "Approve a merge request as the current user.",
		"unapprove_merge_request":       "Withdraw the current user's approval of a merge request.",
		"get_merge_request_diffs":       "Get the changes of a merge request, file by file.",
		"list_merge_request_commits":    "List the commits of a merge request.",
		"list_merge_request_pipelines":  "List the pipelines that ran for a merge request, newest first.",
		"resolve_merge_request_thread":  "Resolve or reopen a thread of a merge request.",
		"publish_draft_notes":           "Publish every draft note of the current user on a merge request at once.",
		"list_milestone_issues":         "List the issues of a milestone.",
		"list_milestone_merge_requests": "List the merge requests of a milestone.",
		"create_pipeline":               "Run a new pipeline for a branch or a tag.",
		"retry_pipeline":                "Retry the failed or cancelled jobs of a pipeline.",
		"cancel_pipeline":               "Cancel the running jobs of a pipeline.",
		"list_pipeline_jobs":            "List the jobs of a pipeline with their stage, status and duration.",
		"get_pipeline_variables":        "Get the variables a pipeline ran with.",
		"get_job_log":                   "Get the log of a job; a long log is cut to its last lines.",
		"play_job":                      "Start a manual job.",
		"list_job_artifacts":            "List the artifacts a job kept.",
		"download_job_artifacts":        "Download an artifact file of a job.",
		"list_group_projects":           "List the projects of a group and of its subgroups.",
		"list_group_members":            "List the members of a group with their access level.",
		"get_users":                     "Get users by their usernames.",
		"list_project_members":          "List the members of a project with their access level.",
		"stop_environment":              "Stop an environment: its on_stop job runs.",
		"list_deployments":              "List the deployments of a project, newest first.",
		"get_deployment":                "Get one deployment with its environment and the job that made it.",
	}
	s := mcpServer{name: "gitlab"}
	n := 0
	for _, k := range kinds {
		for _, name := range k.tools {
			desc := own[name]
			verb, _, _ := strings.Cut(name, "_")
			if desc == "" {
				desc = map[string]string{
					"list":   fmt.Sprintf("List the %s of a project, a page at a time, filtered by the fields given and sorted as asked.", k.many),
					"get":    fmt.Sprintf("Get one %s by its %s, with all its fields.", k.one, k.id),
					"create": fmt.Sprintf("Create a %s and return it with its new %s.", k.one, k.id),
					"update": fmt.Sprintf("Change the fields of a %s; the fields left out keep their values.", k.one),
					"delete": fmt.Sprintf("Delete a %s for good: this cannot be undone.", k.one),
				}[verb]
			}
			s.tools = append(s.tools, toolSpec{name: name, desc: desc, schema: gitlabSchema(verb, k.one, k.id, 500+(n*389)%1000)})
			n++
		}
	}
	return s
}

// gitlabSchema is the input schema of a tool that does verb to a thing
// known by id, filled with the optional fields such tools have to at least
// size bytes.
func gitlabSchema(verb, one, id string, size int) json.RawMessage {
	props := map[string]any{
		"project_id": map[string]any{"type": "string", "description": "The ID or URL-encoded path of the project"},
		"text":       map[string]any{"type": "string", "description": "A note to keep with the request, shown in the audit log"},
	}
	required := []string{"project_id"}
	if verb != "list" {
		props[id] = map[string]any{"type": "string", "description": fmt.Sprintf("The %s of the %s", strings.ReplaceAll(id, "_", " "), one)}
		required = append(required, id)
	}
	pool := []struct {
		name string
		def  map[string]any
	}{
		{"page", map[string]any{"type": "integer", "minimum": 1, "description": "The page of results to return, from 1"}},
		{"per_page", map[string]any{"type": "integer", "minimum": 1, "maximum": 100, "description": "How many results a page holds, at most 100"}},
		{"order_by", map[string]any{"type": "string", "enum": []string{"created_at", "updated_at", "id"}, "description": "The field results are ordered by"}},
		{"sort", map[string]any{"type": "string", "enum": []string{"asc", "desc"}, "default": "desc", "description": "Ascending or descending order"}},
		{"created_after", map[string]any{"type": "string", "format": "date-time", "description": "Only those created after this time (ISO 8601)"}},
		{"created_before", map[string]any{"type": "string", "format": "date-time", "description": "Only those created before this time (ISO 8601)"}},
		{"updated_after", map[string]any{"type": "string", "format": "date-time", "description": "Only those updated after this time (ISO 8601)"}},
		{"author_username", map[string]any{"type": "string", "description": "Only those written by the user with this username"}},
		{"assignee_ids", map[string]any{"type": "array", "items": map[string]any{"type": "integer"}, "description": "The IDs of the users to assign"}},
		{"labels", map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Label names; a label the project lacks is created"}},
		{"ref", map[string]any{"type": "string", "description": "The branch, tag or commit SHA to work on; the default branch when left out"}},
		{"visibility", map[string]any{"type": "string", "enum": []string{"private", "internal", "public"}, "description": "Who may see it"}},
		{"confidential", map[string]any{"type": "boolean", "default": false, "description": "Whether only members with at least the Reporter role see it"}},
		{"include_subgroups", map[string]any{"type": "boolean", "default": false, "description": "Whether the subgroups' projects count too"}},
		{"due_date", map[string]any{"type": "string", "format": "date", "description": "The date it is due, as YYYY-MM-DD"}},
	}
	schema := func() json.RawMessage {
		b, err := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
		if err != nil {
			panic(err)
		}
		return b
	}
	for _, p := range pool {
		if len(schema()) >= size {
			break
		}
		props[p.name] = p.def
	}
	return schema()
}
