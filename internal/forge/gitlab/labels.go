package gitlab

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/coding-agent/coding-agent/internal/task"
)

// AddLabel adds one label with add_labels, leaving the others as they are.
func (c *Client) AddLabel(ctx context.Context, ref task.Ref, label string) error {
	if err := c.editLabel(ctx, ref, label, true); err != nil {
		return fmt.Errorf("adding label %q on %s: %w", label, name(ref), err)
	}
	return nil
}

// RemoveLabel removes one label with remove_labels, leaving the others as
// they are; removing an absent label is not an error.
func (c *Client) RemoveLabel(ctx context.Context, ref task.Ref, label string) error {
	if err := c.editLabel(ctx, ref, label, false); err != nil {
		return fmt.Errorf("removing label %q on %s: %w", label, name(ref), err)
	}
	return nil
}

func (c *Client) editLabel(ctx context.Context, ref task.Ref, label string, add bool) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	label = strings.TrimSpace(label)
	if label == "" || strings.Contains(label, ",") {
		// GitLab reads add_labels and remove_labels as comma-separated lists.
		return errors.New("label must be non-empty and contain no comma")
	}
	one := &gl.LabelOptions{label}
	var err error
	if ref.Kind == task.MergeRequest {
		opt := &gl.UpdateMergeRequestOptions{}
		if add {
			opt.AddLabels = one
		} else {
			opt.RemoveLabels = one
		}
		_, _, err = c.api.MergeRequests.UpdateMergeRequest(ref.Repo, int64(ref.Number), opt, gl.WithContext(ctx))
	} else {
		opt := &gl.UpdateIssueOptions{}
		if add {
			opt.AddLabels = one
		} else {
			opt.RemoveLabels = one
		}
		_, _, err = c.api.Issues.UpdateIssue(ref.Repo, int64(ref.Number), opt, gl.WithContext(ctx))
	}
	return translateErr(err)
}
