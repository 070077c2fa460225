package gitlab

import (
	"context"
	"fmt"
	"net/http"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/coding-agent/coding-agent/internal/forge"
)

var _ forge.Setup = (*Client)(nil)

// Account is the token's user (GET /user); GitLab marks the users of
// project and group access tokens as bots.
func (c *Client) Account(ctx context.Context) (forge.Account, error) {
	u, _, err := c.api.Users.CurrentUser(gl.WithContext(ctx))
	if err != nil {
		return forge.Account{}, fmt.Errorf("getting gitlab user of the token: %w", translateErr(err))
	}
	return forge.Account{Login: u.Username, Bot: u.Bot}, nil
}

// CanPush reports whether the token's user is a Developer or higher on
// the project.
func (c *Client) CanPush(ctx context.Context, project string) (bool, error) {
	bot, err := c.BotUser(ctx)
	if err != nil {
		return false, err
	}
	return c.canWrite(ctx, project, bot, fmt.Sprintf("checking whether %s may write to %s", bot, project))
}

// RepoLabels lists the project's labels, every page.
func (c *Client) RepoLabels(ctx context.Context, project string) ([]string, error) {
	opt := &gl.ListLabelsOptions{ListOptions: gl.ListOptions{PerPage: perPage}}
	labels, err := collect(func(page int64) ([]*gl.Label, *gl.Response, error) {
		opt.Page = page
		return c.api.Labels.ListLabels(project, opt, gl.WithContext(ctx))
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("listing the labels of %s: %w", project, translateErr(err))
	}
	out := make([]string, 0, len(labels))
	for _, l := range labels {
		out = append(out, l.Name)
	}
	return out, nil
}

// CreateLabel defines a project label; one that exists already (409) is
// no error.
func (c *Client) CreateLabel(ctx context.Context, project, name, color string) error {
	_, resp, err := c.api.Labels.CreateLabel(project, &gl.CreateLabelOptions{Name: gl.Ptr(name), Color: gl.Ptr(color)}, gl.WithContext(ctx))
	if resp != nil && resp.StatusCode == http.StatusConflict {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating label %q in %s: %w", name, project, translateErr(err))
	}
	return nil
}
