package github

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v92/github"

	"github.com/coding-agent/coding-agent/internal/forge"
)

var _ forge.Setup = (*Client)(nil)

// Account is the token's user (GET /user; a bot when GitHub says its type
// is Bot), or the app's bot user.
func (c *Client) Account(ctx context.Context) (forge.Account, error) {
	if c.app != nil {
		bot, err := c.app.botUser(ctx)
		return forge.Account{Login: bot, Bot: true}, err
	}
	u, _, err := c.gh.Users.Get(ctx, "")
	if err != nil {
		return forge.Account{}, wrapErr("getting the token's user", err)
	}
	return forge.Account{Login: u.GetLogin(), Bot: u.GetType() == "Bot"}, nil
}

// CanPush reads the token user's permissions on the repository, or for an
// app the permissions of its installation there (contents, issues and pull
// requests written).
func (c *Client) CanPush(ctx context.Context, repo string) (bool, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok {
		return false, fmt.Errorf("repository %q is not owner/name", repo)
	}
	if c.app != nil {
		inst, _, err := c.app.api.Apps.GetRepositoryInstallation(ctx, owner, name)
		if err != nil {
			return false, wrapErr("reading the app's installation on "+repo, err)
		}
		p := inst.GetPermissions()
		return p.GetContents() == "write" && p.GetIssues() == "write" && p.GetPullRequests() == "write", nil
	}
	r, _, err := c.gh.Repositories.Get(ctx, owner, name)
	if err != nil {
		return false, wrapErr("reading "+repo, err)
	}
	return r.GetPermissions().GetPush(), nil
}

// RepoLabels lists the repository's labels, every page.
func (c *Client) RepoLabels(ctx context.Context, repo string) ([]string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok {
		return nil, fmt.Errorf("repository %q is not owner/name", repo)
	}
	var out []string
	opts := &gh.ListOptions{PerPage: 100}
	for {
		ls, resp, err := c.gh.Issues.ListLabels(ctx, owner, name, opts)
		if err != nil {
			return nil, wrapErr("listing the labels of "+repo, err)
		}
		for _, l := range ls {
			out = append(out, l.GetName())
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// CreateLabel defines a label; one that exists already is no error.
func (c *Client) CreateLabel(ctx context.Context, repo, label, color string) error {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok {
		return fmt.Errorf("repository %q is not owner/name", repo)
	}
	_, _, err := c.gh.Issues.CreateLabel(ctx, owner, name, gh.CreateIssueLabelRequest{Name: label, Color: new(strings.TrimPrefix(color, "#"))})
	if statusOf(err) == http.StatusUnprocessableEntity && strings.Contains(err.Error(), "already_exists") {
		return nil
	}
	if err != nil {
		return wrapErr(fmt.Sprintf("creating label %q in %s", label, repo), err)
	}
	return nil
}
