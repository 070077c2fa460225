package gitea

import (
	"context"
	"fmt"
	"net/http"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/coding-agent/coding-agent/internal/forge"
)

// Account is the token's user (GET /user). Gitea's API marks no user as a
// bot, so the account is always taken for a person's: doctor advises a
// user made for the agent alone.
func (c *Client) Account(ctx context.Context) (forge.Account, error) {
	u, resp, err := c.api(ctx).GetMyUserInfo()
	if err != nil {
		return forge.Account{}, fmt.Errorf("getting the gitea user of the token: %w", wrap(resp, err))
	}
	return forge.Account{Login: u.UserName}, nil
}

// CanPush reports whether the token's user may push to repo (its
// permissions on the repository say push).
func (c *Client) CanPush(ctx context.Context, repo string) (bool, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return false, err
	}
	r, resp, err := c.api(ctx).GetRepo(owner, name)
	if err != nil {
		return false, fmt.Errorf("reading repository %s: %w", repo, wrap(resp, err))
	}
	return r.Permissions != nil && (r.Permissions.Push || r.Permissions.Admin), nil
}

// RepoLabels lists the repository's labels, every page.
func (c *Client) RepoLabels(ctx context.Context, repo string) ([]string, error) {
	ls, err := c.repoLabels(ctx, repo)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out, nil
}

// CreateLabel defines a repository label; color is "#rrggbb".
func (c *Client) CreateLabel(ctx context.Context, repo, name, color string) error {
	owner, rname, err := splitRepo(repo)
	if err != nil {
		return err
	}
	_, resp, err := c.api(ctx).CreateLabel(owner, rname, sdk.CreateLabelOption{Name: name, Color: color})
	if resp != nil && resp.StatusCode == http.StatusConflict {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating label %q in %s: %w", name, repo, wrap(resp, err))
	}
	c.mu.Lock()
	delete(c.labels, repo)
	c.mu.Unlock()
	return nil
}
