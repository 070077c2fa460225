package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/task"
)

var _ forge.Delivery = (*Client)(nil)

// draftTitle is how GitLab marks a draft merge request: a title beginning
// with "Draft:", "[Draft]" or "(Draft)", in any case. Its API has no draft
// parameter when creating one.
var draftTitle = regexp.MustCompile(`(?i)^\s*(\[draft\]|\(draft\)|draft:)`)

// Repository reads the clone URL (http_url_to_repo) and default branch of
// the task's project.
func (c *Client) Repository(ctx context.Context, ref task.Ref) (forge.Repo, error) {
	action := "getting gitlab project " + ref.Repo
	if err := checkRef(ref); err != nil {
		return forge.Repo{}, fmt.Errorf("%s: %w", action, err)
	}
	p, _, err := c.api.Projects.GetProject(ref.Repo, nil, gl.WithContext(ctx))
	if err != nil {
		return forge.Repo{}, fmt.Errorf("%s: %w", action, translateErr(err))
	}
	if p.HTTPURLToRepo == "" || p.DefaultBranch == "" {
		return forge.Repo{}, fmt.Errorf("%s: gitlab answered without http_url_to_repo or default_branch (an empty project?)", action)
	}
	return forge.Repo{CloneURL: p.HTTPURLToRepo, DefaultBranch: p.DefaultBranch}, nil
}

// FindChange returns the opened merge request whose source is branch of
// the task's project (not a fork's branch of the same name).
func (c *Client) FindChange(ctx context.Context, ref task.Ref, branch string) (forge.Change, bool, error) {
	if err := checkRef(ref); err != nil {
		return forge.Change{}, false, err
	}
	ch, ok, err := c.findChange(ctx, ref, branch, "")
	if err != nil {
		return forge.Change{}, false, fmt.Errorf("finding the merge request of branch %s in %s: %w", branch, ref.Repo, translateErr(err))
	}
	return ch, ok, nil
}

// findChange lists the opened merge requests from source into target (any
// when ""), every page, and returns the first whose source is in the
// project itself.
func (c *Client) findChange(ctx context.Context, ref task.Ref, source, target string) (forge.Change, bool, error) {
	opt := &gl.ListProjectMergeRequestsOptions{
		ListOptions: gl.ListOptions{PerPage: perPage}, State: gl.Ptr("opened"), SourceBranch: gl.Ptr(source),
	}
	if target != "" {
		opt.TargetBranch = gl.Ptr(target)
	}
	mrs, err := collect(func(page int64) ([]*gl.BasicMergeRequest, *gl.Response, error) {
		opt.Page = page
		return c.api.MergeRequests.ListProjectMergeRequests(ref.Repo, opt, gl.WithContext(ctx))
	}, nil)
	if err != nil {
		return forge.Change{}, false, err
	}
	for _, m := range mrs {
		if m.SourceBranch == source && m.SourceProjectID == m.TargetProjectID && (target == "" || m.TargetBranch == target) {
			return toChange(m), true, nil
		}
	}
	return forge.Change{}, false, nil
}

// OpenChange opens a merge request from nc.Head into nc.Base, its title
// beginning with "Draft: " when nc.Draft, once: package postonce retries it,
// looking for it before asking again after an ambiguous failure. When
// GitLab answers 409 (an open merge request from nc.Head into nc.Base
// exists), that one is returned.
func (c *Client) OpenChange(ctx context.Context, ref task.Ref, nc forge.NewChange) (forge.Change, error) {
	action := fmt.Sprintf("opening a merge request from %s into %s of %s", nc.Head, nc.Base, ref.Repo)
	if err := checkRef(ref); err != nil {
		return forge.Change{}, fmt.Errorf("%s: %w", action, err)
	}
	title := nc.Title
	if nc.Draft && !draftTitle.MatchString(title) {
		title = "Draft: " + title
	}
	post := func(ctx context.Context) (forge.Change, error) {
		m, _, err := c.api.MergeRequests.CreateMergeRequest(ref.Repo, &gl.CreateMergeRequestOptions{
			Title: gl.Ptr(title), Description: gl.Ptr(nc.Body), SourceBranch: gl.Ptr(nc.Head), TargetBranch: gl.Ptr(nc.Base),
		}, gl.WithContext(ctx))
		if err != nil {
			return forge.Change{}, err
		}
		return toChange(&m.BasicMergeRequest), nil
	}
	find := func(ctx context.Context, _ time.Time) (forge.Change, bool, error) {
		return c.findChange(ctx, ref, nc.Head, nc.Base)
	}
	ch, err := postonce.Do(ctx, c.posts, c.log.With("ref", ref.String()), "merge request creation", post, find, classify)
	if err == nil {
		return ch, nil
	}
	if er, ok := errors.AsType[*gl.ErrorResponse](err); ok && er.Response != nil && er.Response.StatusCode == http.StatusConflict {
		ch, ok, ferr := find(ctx, time.Time{})
		if ferr == nil && ok {
			return ch, nil
		}
		if ferr != nil {
			err = errors.Join(err, fmt.Errorf("looking for the open one: %w", ferr))
		}
	}
	return forge.Change{}, fmt.Errorf("%s: %w", action, translateErr(err))
}

// EditChange replaces merge request iid number's description (PUT
// .../merge_requests/:iid with the description alone).
func (c *Client) EditChange(ctx context.Context, ref task.Ref, number int, body string) error {
	action := fmt.Sprintf("editing the description of merge request !%d of %s", number, ref.Repo)
	if err := checkRef(ref); err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	if number <= 0 {
		return fmt.Errorf("%s: the iid must be positive", action)
	}
	_, _, err := c.api.MergeRequests.UpdateMergeRequest(ref.Repo, int64(number),
		&gl.UpdateMergeRequestOptions{Description: gl.Ptr(body)}, gl.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("%s: %w", action, translateErr(err))
	}
	return nil
}

func toChange(m *gl.BasicMergeRequest) forge.Change {
	return forge.Change{Number: int(m.IID), URL: m.WebURL, Draft: m.Draft, Head: m.SourceBranch, Base: m.TargetBranch,
		Body: m.Description}
}
