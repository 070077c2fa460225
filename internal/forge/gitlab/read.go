package gitlab

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/coding-agent/coding-agent/internal/task"
)

const perPage = 100 // GitLab's maximum

// Discover lists the opened issues and merge requests carrying label in the
// configured projects and group (subgroups included), every page, oldest
// first, each once.
func (c *Client) Discover(ctx context.Context, label string) ([]task.Task, error) {
	if strings.Contains(label, ",") {
		return nil, fmt.Errorf("discovering gitlab tasks: label %q contains a comma, which GitLab's filter cannot express", label)
	}
	seen := map[task.Ref]bool{}
	var out []task.Task
	add := func(ts []task.Task) {
		for _, t := range ts {
			if !seen[t.Ref] {
				seen[t.Ref] = true
				out = append(out, t)
			}
		}
	}
	for _, p := range c.projects {
		ts, err := c.discoverProject(ctx, p, label)
		if err != nil {
			return nil, fmt.Errorf("discovering tasks labelled %q in gitlab project %s: %w", label, p, translateErr(err))
		}
		add(ts)
	}
	if c.group != "" {
		ts, err := c.discoverGroup(ctx, c.group, label)
		if err != nil {
			return nil, fmt.Errorf("discovering tasks labelled %q in gitlab group %s: %w", label, c.group, translateErr(err))
		}
		add(ts)
	}
	slices.SortStableFunc(out, func(a, b task.Task) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.Ref.String(), b.Ref.String()))
	})
	return out, nil
}

func (c *Client) discoverProject(ctx context.Context, project, label string) ([]task.Task, error) {
	iopt := &gl.ListProjectIssuesOptions{
		ListOptions: gl.ListOptions{PerPage: perPage},
		State:       gl.Ptr("opened"), Labels: &gl.LabelOptions{label},
		OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr("asc"),
	}
	issues, err := collect(func(page int64) ([]*gl.Issue, *gl.Response, error) {
		iopt.Page = page
		return c.api.Issues.ListProjectIssues(project, iopt, gl.WithContext(ctx))
	}, nil)
	if err != nil {
		return nil, err
	}
	mopt := &gl.ListProjectMergeRequestsOptions{
		ListOptions: gl.ListOptions{PerPage: perPage},
		State:       gl.Ptr("opened"), Labels: &gl.LabelOptions{label},
		OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr("asc"),
	}
	mrs, err := collect(func(page int64) ([]*gl.BasicMergeRequest, *gl.Response, error) {
		mopt.Page = page
		return c.api.MergeRequests.ListProjectMergeRequests(project, mopt, gl.WithContext(ctx))
	}, nil)
	if err != nil {
		return nil, err
	}
	return c.translateAll(ctx, issues, mrs)
}

func (c *Client) discoverGroup(ctx context.Context, group, label string) ([]task.Task, error) {
	iopt := &gl.ListGroupIssuesOptions{
		ListOptions: gl.ListOptions{PerPage: perPage},
		State:       gl.Ptr("opened"), Labels: &gl.LabelOptions{label},
		OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr("asc"),
	}
	issues, err := collect(func(page int64) ([]*gl.Issue, *gl.Response, error) {
		iopt.Page = page
		return c.api.Issues.ListGroupIssues(group, iopt, gl.WithContext(ctx))
	}, nil)
	if err != nil {
		return nil, err
	}
	mopt := &gl.ListGroupMergeRequestsOptions{
		ListOptions: gl.ListOptions{PerPage: perPage},
		State:       gl.Ptr("opened"), Labels: &gl.LabelOptions{label},
		OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr("asc"),
	}
	mrs, err := collect(func(page int64) ([]*gl.BasicMergeRequest, *gl.Response, error) {
		mopt.Page = page
		return c.api.MergeRequests.ListGroupMergeRequests(group, mopt, gl.WithContext(ctx))
	}, nil)
	if err != nil {
		return nil, err
	}
	return c.translateAll(ctx, issues, mrs)
}

func (c *Client) translateAll(ctx context.Context, issues []*gl.Issue, mrs []*gl.BasicMergeRequest) ([]task.Task, error) {
	out := make([]task.Task, 0, len(issues)+len(mrs))
	for _, i := range issues {
		repo, err := c.repoOf(ctx, i.ProjectID, i.References)
		if err != nil {
			return nil, err
		}
		out = append(out, issueTask(repo, i))
	}
	for _, m := range mrs {
		repo, err := c.repoOf(ctx, m.ProjectID, m.References)
		if err != nil {
			return nil, err
		}
		out = append(out, mrTask(repo, m))
	}
	return out, nil
}

// Get reads one issue or merge request.
func (c *Client) Get(ctx context.Context, ref task.Ref) (task.Task, error) {
	if err := checkRef(ref); err != nil {
		return task.Task{}, fmt.Errorf("getting %s: %w", name(ref), err)
	}
	if ref.Kind == task.MergeRequest {
		m, _, err := c.api.MergeRequests.GetMergeRequest(ref.Repo, int64(ref.Number), nil, gl.WithContext(ctx))
		if err != nil {
			return task.Task{}, fmt.Errorf("getting %s: %w", name(ref), translateErr(err))
		}
		return mrTask(ref.Repo, &m.BasicMergeRequest), nil
	}
	i, _, err := c.api.Issues.GetIssue(ref.Repo, int64(ref.Number), gl.WithContext(ctx))
	if err != nil {
		return task.Task{}, fmt.Errorf("getting %s: %w", name(ref), translateErr(err))
	}
	return issueTask(ref.Repo, i), nil
}

// Comments reads every note of an issue or merge request, oldest first,
// system notes flagged.
func (c *Client) Comments(ctx context.Context, ref task.Ref) ([]task.Comment, error) {
	return c.comments(ctx, ref, "listing notes of "+name(ref), nil)
}

// CommentsSince reads the notes of an issue or merge request created or
// updated at or after since, oldest first, system notes flagged. GitLab's
// notes API has no such filter: every note is read and the older ones are
// dropped here.
func (c *Client) CommentsSince(ctx context.Context, ref task.Ref, since time.Time) ([]task.Comment, error) {
	recent := func(n *gl.Note) bool {
		return !deref(n.CreatedAt).Before(since) || !deref(n.UpdatedAt).Before(since)
	}
	return c.comments(ctx, ref, "listing notes of "+name(ref)+" since "+since.UTC().Format(time.RFC3339Nano), recent)
}

// comments reads every note of ref in chronological order and keeps those
// keep accepts (all when keep is nil).
func (c *Client) comments(ctx context.Context, ref task.Ref, action string, keep func(*gl.Note) bool) ([]task.Comment, error) {
	if err := checkRef(ref); err != nil {
		return nil, fmt.Errorf("%s: %w", action, err)
	}
	notes, err := c.listNotes(ctx, ref, "asc", nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", action, translateErr(err))
	}
	out := make([]task.Comment, 0, len(notes))
	for _, n := range notes {
		if keep == nil || keep(n) {
			out = append(out, noteComment(n))
		}
	}
	// GitLab was asked for this order; keep it even if a server ignores sort.
	slices.SortStableFunc(out, func(a, b task.Comment) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// listNotes reads notes ordered by created_at in direction sort, page after
// page, until stop (if given) says the page read makes the rest unneeded.
func (c *Client) listNotes(ctx context.Context, ref task.Ref, sort string, stop func([]*gl.Note) bool) ([]*gl.Note, error) {
	lo := gl.ListOptions{PerPage: perPage}
	return collect(func(page int64) ([]*gl.Note, *gl.Response, error) {
		lo.Page = page
		if ref.Kind == task.MergeRequest {
			return c.api.Notes.ListMergeRequestNotes(ref.Repo, int64(ref.Number),
				&gl.ListMergeRequestNotesOptions{ListOptions: lo, OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr(sort)}, gl.WithContext(ctx))
		}
		return c.api.Notes.ListIssueNotes(ref.Repo, int64(ref.Number),
			&gl.ListIssueNotesOptions{ListOptions: lo, OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr(sort)}, gl.WithContext(ctx))
	}, stop)
}

// collect reads every page of an offset-paginated list, or pages until stop
// returns true for the page just read.
func collect[T any](list func(page int64) ([]T, *gl.Response, error), stop func([]T) bool) ([]T, error) {
	var all []T
	for page := int64(1); ; {
		items, resp, err := list(page)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if resp == nil || resp.NextPage == 0 || stop != nil && stop(items) {
			return all, nil
		}
		if resp.NextPage <= page {
			return nil, fmt.Errorf("paginating: page %d points back to page %d", page, resp.NextPage)
		}
		page = resp.NextPage
	}
}

// repoOf returns a project's full path: from the item's full reference
// ("grp/app#3"), else by asking for the project once.
func (c *Client) repoOf(ctx context.Context, projectID int64, refs *gl.IssueReferences) (string, error) {
	if refs != nil {
		if i := strings.LastIndexAny(refs.Full, "#!"); i > 0 {
			return refs.Full[:i], nil
		}
	}
	c.mu.Lock()
	path, ok := c.paths[projectID]
	c.mu.Unlock()
	if ok {
		return path, nil
	}
	p, _, err := c.api.Projects.GetProject(projectID, nil, gl.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("getting project %d: %w", projectID, err)
	}
	c.mu.Lock()
	c.paths[projectID] = p.PathWithNamespace
	c.mu.Unlock()
	return p.PathWithNamespace, nil
}

func issueTask(repo string, i *gl.Issue) task.Task {
	t := task.Task{
		Ref:   task.Ref{Forge: task.GitLab, Repo: repo, Kind: task.Issue, Number: int(i.IID)},
		Title: i.Title, Body: i.Description, URL: i.WebURL, State: state(i.State),
		Labels: slices.Clone([]string(i.Labels)), CreatedAt: deref(i.CreatedAt), UpdatedAt: deref(i.UpdatedAt),
		CommentCount: int(i.UserNotesCount),
	}
	if i.Author != nil {
		t.Author = i.Author.Username
	}
	for _, a := range i.Assignees {
		if a != nil {
			t.Assignees = append(t.Assignees, a.Username)
		}
	}
	return t
}

func mrTask(repo string, m *gl.BasicMergeRequest) task.Task {
	t := task.Task{
		Ref:   task.Ref{Forge: task.GitLab, Repo: repo, Kind: task.MergeRequest, Number: int(m.IID)},
		Title: m.Title, Body: m.Description, URL: m.WebURL, State: state(m.State),
		Labels:     slices.Clone([]string(m.Labels)),
		HeadBranch: m.SourceBranch, BaseBranch: m.TargetBranch,
		Fork:      m.SourceProjectID != m.TargetProjectID,
		CreatedAt: deref(m.CreatedAt), UpdatedAt: deref(m.UpdatedAt),
		CommentCount: int(m.UserNotesCount),
	}
	if m.Author != nil {
		t.Author = m.Author.Username
	}
	for _, a := range m.Assignees {
		if a != nil {
			t.Assignees = append(t.Assignees, a.Username)
		}
	}
	return t
}

func noteComment(n *gl.Note) task.Comment {
	return task.Comment{ID: n.ID, Author: n.Author.Username, Body: n.Body, CreatedAt: deref(n.CreatedAt), System: n.System}
}

// state maps GitLab's states onto the task's "open" and "closed"; a locked
// merge request is being merged and still open.
func state(s string) string {
	if s == "opened" || s == "locked" {
		return "open"
	}
	return "closed"
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// LabeledBy reads every page of the item's resource label events (GitLab
// lists them oldest first) and returns the user of the newest "add" of
// label (the highest event id, whatever order a server used).
func (c *Client) LabeledBy(ctx context.Context, ref task.Ref, label string) (string, error) {
	action := "reading the label events of " + name(ref)
	if err := checkRef(ref); err != nil {
		return "", fmt.Errorf("%s: %w", action, err)
	}
	opt := &gl.ListLabelEventsOptions{ListOptions: gl.ListOptions{PerPage: perPage}}
	events, err := collect(func(page int64) ([]*gl.LabelEvent, *gl.Response, error) {
		opt.Page = page
		if ref.Kind == task.MergeRequest {
			return c.api.ResourceLabelEvents.ListMergeRequestsLabelEvents(ref.Repo, int64(ref.Number), opt, gl.WithContext(ctx))
		}
		return c.api.ResourceLabelEvents.ListIssueLabelEvents(ref.Repo, int64(ref.Number), opt, gl.WithContext(ctx))
	}, nil)
	if err != nil {
		return "", fmt.Errorf("%s: %w", action, translateErr(err))
	}
	who, newest := "", int64(0)
	for _, e := range events {
		if e.Action == "add" && e.Label.Name == label && e.ID > newest {
			who, newest = e.User.Username, e.ID
		}
	}
	return who, nil
}
