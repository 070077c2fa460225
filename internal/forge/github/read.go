package github

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	gh "github.com/google/go-github/v92/github"

	"github.com/coding-agent/coding-agent/internal/task"
)

// Get reads an issue or pull request; for a pull request it also reads the
// head and base branches and whether the head is in a fork. The kind comes from GitHub, not from ref.
func (c *Client) Get(ctx context.Context, ref task.Ref) (task.Task, error) {
	owner, name, err := split(ref)
	if err != nil {
		return task.Task{}, err
	}
	action := "getting " + refName(ref)
	is, _, err := c.gh.Issues.Get(ctx, owner, name, ref.Number)
	if err != nil {
		return task.Task{}, wrapErr(action, err)
	}
	t := toTask(is, ref.Repo)
	if is.IsPullRequest() {
		pr, _, err := c.gh.PullRequests.Get(ctx, owner, name, ref.Number)
		if err != nil {
			return task.Task{}, wrapErr(action+" branches", err)
		}
		t.HeadBranch = pr.GetHead().GetRef()
		t.BaseBranch = pr.GetBase().GetRef()
		// A deleted fork leaves head.repo null.
		t.Fork = !strings.EqualFold(pr.GetHead().GetRepo().GetFullName(), pr.GetBase().GetRepo().GetFullName()) ||
			pr.GetHead().GetRepo() == nil
	}
	return t, nil
}

// Comments reads every comment of an issue or pull request (the
// conversation, not code review comments), oldest first.
func (c *Client) Comments(ctx context.Context, ref task.Ref) ([]task.Comment, error) {
	return c.comments(ctx, ref, time.Time{})
}

// CommentsSince reads the comments of an issue or pull request created or
// updated at or after since, oldest first. GitHub filters them (its since
// parameter compares updated_at, at one-second resolution, so a comment
// from earlier in since's second is included too). A zero since reads them
// all.
func (c *Client) CommentsSince(ctx context.Context, ref task.Ref, since time.Time) ([]task.Comment, error) {
	return c.comments(ctx, ref, since)
}

func (c *Client) comments(ctx context.Context, ref task.Ref, since time.Time) ([]task.Comment, error) {
	owner, name, err := split(ref)
	if err != nil {
		return nil, err
	}
	action := "listing comments of " + refName(ref)
	opts := &gh.IssueListCommentsOptions{}
	if !since.IsZero() {
		s := since.UTC()
		opts.Since = &s
		action += " since " + s.Format(time.RFC3339)
	}
	cs, err := c.listComments(ctx, owner, name, ref.Number, opts)
	if err != nil {
		return nil, wrapErr(action, err)
	}
	return cs, nil
}

// listComments reads every page of an item's comments, updated at or after
// opts.Since when it is set, in chronological order. It sets opts' paging.
func (c *Client) listComments(ctx context.Context, owner, name string, number int, opts *gh.IssueListCommentsOptions) ([]task.Comment, error) {
	opts.PerPage = 100
	var out []task.Comment
	for {
		page, resp, err := c.gh.Issues.ListComments(ctx, owner, name, number, opts)
		if err != nil {
			return nil, apiErr(err)
		}
		for _, cm := range page {
			out = append(out, toComment(cm))
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	slices.SortStableFunc(out, func(a, b task.Comment) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

func toComment(cm *gh.IssueComment) task.Comment {
	return task.Comment{
		ID:        cm.GetID(),
		Author:    cm.GetUser().GetLogin(),
		Body:      cm.GetBody(),
		CreatedAt: cm.GetCreatedAt().Time,
	}
}

// toTask translates an issue (or the issue view of a pull request). repo is
// used when the payload does not say which repository it belongs to.
func toTask(is *gh.Issue, repo string) task.Task {
	if r := repoFromURL(is.GetRepositoryURL()); r != "" {
		repo = r
	}
	kind := task.Issue
	if is.IsPullRequest() {
		kind = task.PullRequest
	}
	t := task.Task{
		Ref:          task.Ref{Forge: task.GitHub, Repo: repo, Kind: kind, Number: is.GetNumber()},
		Title:        is.GetTitle(),
		Body:         is.GetBody(),
		Author:       is.GetUser().GetLogin(),
		URL:          is.GetHTMLURL(),
		State:        is.GetState(),
		CreatedAt:    is.GetCreatedAt().Time,
		UpdatedAt:    is.GetUpdatedAt().Time,
		CommentCount: is.GetComments(),
	}
	for _, l := range is.Labels {
		t.Labels = append(t.Labels, l.GetName())
	}
	for _, a := range is.Assignees {
		t.Assignees = append(t.Assignees, a.GetLogin())
	}
	return t
}

// repoFromURL reads "owner/name" out of a repository_url such as
// https://api.github.com/repos/acme/app or https://ghe/api/v3/repos/acme/app.
func repoFromURL(u string) string {
	i := strings.LastIndex(u, "/repos/")
	if i < 0 {
		return ""
	}
	r := u[i+len("/repos/"):]
	if !repoPattern.MatchString(r) {
		return ""
	}
	return r
}

// LabeledBy reads every page of the item's events (oldest first) and
// returns the actor of the last labeled event for label (its name compared
// as GitHub does, ignoring case).
func (c *Client) LabeledBy(ctx context.Context, ref task.Ref, label string) (string, error) {
	owner, name, err := split(ref)
	if err != nil {
		return "", err
	}
	opts := &gh.ListOptions{PerPage: 100}
	who := ""
	for {
		page, resp, err := c.gh.Issues.ListIssueEvents(ctx, owner, name, ref.Number, opts)
		if err != nil {
			return "", wrapErr("reading the events of "+refName(ref), err)
		}
		for _, e := range page {
			if e.GetEvent() == "labeled" && strings.EqualFold(e.GetLabel().GetName(), label) {
				who = e.GetActor().GetLogin()
			}
		}
		if resp.NextPage == 0 {
			return who, nil
		}
		opts.Page = resp.NextPage
	}
}
