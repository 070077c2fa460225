package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	gh "github.com/google/go-github/v92/github"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

var _ forge.Delivery = (*Client)(nil)

// Repository reads the clone URL and default branch of the task's
// repository.
func (c *Client) Repository(ctx context.Context, ref task.Ref) (forge.Repo, error) {
	owner, name, err := split(ref)
	if err != nil {
		return forge.Repo{}, err
	}
	r, _, err := c.gh.Repositories.Get(ctx, owner, name)
	if err != nil {
		return forge.Repo{}, wrapErr("getting repository "+ref.Repo, err)
	}
	if r.GetCloneURL() == "" || r.GetDefaultBranch() == "" {
		return forge.Repo{}, fmt.Errorf("getting repository %s: github answered without a clone_url or default_branch", ref.Repo)
	}
	return forge.Repo{CloneURL: r.GetCloneURL(), DefaultBranch: r.GetDefaultBranch()}, nil
}

// FindChange returns the open pull request whose head is branch of the
// task's repository (not a fork's branch of the same name).
func (c *Client) FindChange(ctx context.Context, ref task.Ref, branch string) (forge.Change, bool, error) {
	ch, ok, err := c.findChange(ctx, ref, branch, "")
	if err != nil {
		return forge.Change{}, false, wrapErr(fmt.Sprintf("finding the pull request of branch %s in %s", branch, ref.Repo), err)
	}
	return ch, ok, nil
}

// findChange lists the open pull requests from owner:head (into base, any
// when ""), every page, and returns the first whose head is in the task's
// repository.
func (c *Client) findChange(ctx context.Context, ref task.Ref, head, base string) (forge.Change, bool, error) {
	owner, name, err := split(ref)
	if err != nil {
		return forge.Change{}, false, err
	}
	opts := &gh.PullRequestListOptions{State: "open", Head: owner + ":" + head, Base: base, ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		prs, resp, err := c.gh.PullRequests.List(ctx, owner, name, opts)
		if err != nil {
			return forge.Change{}, false, apiErr(err)
		}
		for _, pr := range prs {
			// GitHub ignores a head filter it cannot read: check each.
			if pr.GetHead().GetRef() == head && strings.EqualFold(pr.GetHead().GetRepo().GetFullName(), ref.Repo) &&
				(base == "" || pr.GetBase().GetRef() == base) {
				return toChange(pr), true, nil
			}
		}
		if resp.NextPage == 0 {
			return forge.Change{}, false, nil
		}
		opts.Page = resp.NextPage
	}
}

// OpenChange opens a pull request from nc.Head into nc.Base, once: package
// postonce retries it, looking for it before asking again after an
// ambiguous failure. When GitHub refuses it (422) and an open pull request
// from nc.Head into nc.Base exists, that one is returned.
func (c *Client) OpenChange(ctx context.Context, ref task.Ref, nc forge.NewChange) (forge.Change, error) {
	owner, name, err := split(ref)
	if err != nil {
		return forge.Change{}, err
	}
	action := fmt.Sprintf("opening a pull request from %s into %s of %s", nc.Head, nc.Base, ref.Repo)
	post := func(ctx context.Context) (forge.Change, error) {
		pr, _, err := c.gh.PullRequests.Create(ctx, owner, name, gh.CreatePullRequest{
			Title: &nc.Title, Head: nc.Head, Base: nc.Base, Body: &nc.Body, Draft: &nc.Draft,
		})
		if err != nil {
			return forge.Change{}, apiErr(err)
		}
		return toChange(pr), nil
	}
	find := func(ctx context.Context, _ time.Time) (forge.Change, bool, error) {
		return c.findChange(ctx, ref, nc.Head, nc.Base)
	}
	ch, err := postonce.Do(ctx, c.posts, c.log.With("ref", ref.String()), "pull request creation", post, find, classify)
	if err == nil {
		return ch, nil
	}
	if statusOf(err) == http.StatusUnprocessableEntity {
		// Among GitHub's reasons: "A pull request already exists".
		ch, ok, ferr := find(ctx, time.Time{})
		if ferr == nil && ok {
			return ch, nil
		}
		if ferr != nil {
			err = errors.Join(err, fmt.Errorf("looking for an open one: %w", ferr))
		}
	}
	return forge.Change{}, wrapErr(action, err)
}

// EditChange replaces pull request number's body (PATCH
// .../pulls/{number} with the body alone); an edit is idempotent, so it is
// retried.
func (c *Client) EditChange(ctx context.Context, ref task.Ref, number int, body string) error {
	owner, name, err := split(ref)
	if err != nil {
		return err
	}
	action := fmt.Sprintf("editing the body of pull request #%d of %s", number, ref.Repo)
	if number <= 0 {
		return fmt.Errorf("%s: the number must be positive", action)
	}
	if _, _, err := c.gh.PullRequests.Edit(httpx.Idempotent(ctx), owner, name, number, &gh.PullRequest{Body: &body}); err != nil {
		return wrapErr(action, err)
	}
	return nil
}

func toChange(pr *gh.PullRequest) forge.Change {
	return forge.Change{
		Number: pr.GetNumber(), URL: pr.GetHTMLURL(), Draft: pr.GetDraft(),
		Head: pr.GetHead().GetRef(), Base: pr.GetBase().GetRef(), Body: pr.GetBody(),
	}
}
