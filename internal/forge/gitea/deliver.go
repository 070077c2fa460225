package gitea

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

var _ forge.Delivery = (*Client)(nil)

// draftPrefix marks a draft: Gitea has no draft flag, and takes a pull
// request whose title starts with one of its WORK_IN_PROGRESS_PREFIXES
// ("WIP:" and "[WIP]" by default) for a work in progress that may not be
// merged.
const draftPrefix = "WIP: "

// Repository reads the clone URL and default branch of the task's
// repository.
func (c *Client) Repository(ctx context.Context, ref task.Ref) (forge.Repo, error) {
	owner, repo, err := splitRepo(ref.Repo)
	if err != nil {
		return forge.Repo{}, err
	}
	r, resp, err := c.api(ctx).GetRepo(owner, repo)
	if err != nil {
		return forge.Repo{}, fmt.Errorf("getting repository %s: %w", ref.Repo, wrap(resp, err))
	}
	if r.CloneURL == "" || r.DefaultBranch == "" {
		return forge.Repo{}, fmt.Errorf("getting repository %s: gitea answered without a clone_url or default_branch", ref.Repo)
	}
	return forge.Repo{CloneURL: r.CloneURL, DefaultBranch: r.DefaultBranch}, nil
}

// FindChange returns the open pull request whose head is branch of the
// task's repository (not a fork's branch of the same name).
func (c *Client) FindChange(ctx context.Context, ref task.Ref, branch string) (forge.Change, bool, error) {
	ch, ok, err := c.findChange(ctx, ref, branch, "")
	if err != nil {
		return forge.Change{}, false, fmt.Errorf("finding the pull request of branch %s in %s: %w", branch, ref.Repo, err)
	}
	return ch, ok, nil
}

// findChange reads the open pull requests, every page, for one from
// head of the task's repository (into base, any when "").
func (c *Client) findChange(ctx context.Context, ref task.Ref, head, base string) (forge.Change, bool, error) {
	owner, repo, err := splitRepo(ref.Repo)
	if err != nil {
		return forge.Change{}, false, err
	}
	var found *sdk.PullRequest
	err = pages(func(opt sdk.ListOptions) (*sdk.Response, error) {
		prs, resp, err := c.api(ctx).ListRepoPullRequests(owner, repo, sdk.ListPullRequestsOptions{ListOptions: opt, State: sdk.StateOpen})
		for _, pr := range prs {
			if found == nil && pr.Head != nil && pr.Base != nil && pr.Head.Ref == head && pr.Head.RepoID == pr.Base.RepoID &&
				(base == "" || pr.Base.Ref == base) {
				found = pr
			}
		}
		return resp, err
	})
	if err != nil || found == nil {
		return forge.Change{}, false, err
	}
	return toChange(found), true, nil
}

// OpenChange opens a pull request from nc.Head into nc.Base, once:
// package postonce retries it, looking for it before asking again after
// an ambiguous failure. A draft's title starts with "WIP: ". When Gitea
// refuses it because one from nc.Head into nc.Base is open (409), that
// one is returned.
func (c *Client) OpenChange(ctx context.Context, ref task.Ref, nc forge.NewChange) (forge.Change, error) {
	owner, repo, err := splitRepo(ref.Repo)
	if err != nil {
		return forge.Change{}, err
	}
	title := nc.Title
	if nc.Draft && !isDraft(title) {
		title = draftPrefix + title
	}
	post := func(ctx context.Context) (forge.Change, error) {
		pr, resp, err := c.api(ctx).CreatePullRequest(owner, repo, sdk.CreatePullRequestOption{
			Head: nc.Head, Base: nc.Base, Title: title, Body: nc.Body})
		if err != nil {
			return forge.Change{}, wrap(resp, err)
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
	if statusOf(err) == http.StatusConflict {
		ch, ok, ferr := find(ctx, time.Time{})
		if ferr == nil && ok {
			return ch, nil
		}
		if ferr != nil {
			err = errors.Join(err, fmt.Errorf("looking for the open one: %w", ferr))
		}
	}
	return forge.Change{}, fmt.Errorf("opening a pull request from %s into %s of %s: %w", nc.Head, nc.Base, ref.Repo, err)
}

// EditChange replaces pull request number's body (PATCH .../pulls/{n}
// with the body alone); an edit is idempotent, so it is retried.
func (c *Client) EditChange(ctx context.Context, ref task.Ref, number int, body string) error {
	action := fmt.Sprintf("editing the body of pull request #%d of %s", number, ref.Repo)
	owner, repo, err := splitRepo(ref.Repo)
	if err == nil && number <= 0 {
		err = errors.New("the number must be positive")
	}
	if err == nil {
		_, resp, e := c.api(httpx.Idempotent(ctx)).EditPullRequest(owner, repo, int64(number), sdk.EditPullRequestOption{Body: &body})
		err = wrap(resp, e)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	return nil
}

func isDraft(title string) bool {
	t := strings.ToUpper(strings.TrimSpace(title))
	return strings.HasPrefix(t, "WIP:") || strings.HasPrefix(t, "[WIP]")
}

func toChange(pr *sdk.PullRequest) forge.Change {
	ch := forge.Change{Number: int(pr.Index), URL: pr.HTMLURL, Draft: isDraft(pr.Title), Body: pr.Body}
	if pr.Head != nil {
		ch.Head = pr.Head.Ref
	}
	if pr.Base != nil {
		ch.Base = pr.Base.Ref
	}
	return ch
}
