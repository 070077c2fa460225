package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	gh "github.com/google/go-github/v92/github"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

// labelAbsent is GitHub's message when the label to remove is not on the
// issue (the issue itself exists).
const labelAbsent = "Label does not exist"

// AddLabel adds one label (POST .../labels with that label alone; GitHub
// creates it on the repository if needed). Labels set meanwhile by others
// stay: the replace-all endpoint is never used.
func (c *Client) AddLabel(ctx context.Context, ref task.Ref, label string) error {
	owner, name, err := split(ref)
	if err != nil {
		return err
	}
	if label == "" {
		return fmt.Errorf("adding a label to %s: empty label", refName(ref))
	}
	// Adding a label twice leaves one label: the transport may repeat it.
	if _, _, err := c.gh.Issues.AddLabelsToIssue(httpx.Idempotent(ctx), owner, name, ref.Number, []string{label}); err != nil {
		return wrapErr(fmt.Sprintf("adding label %q to %s", label, refName(ref)), err)
	}
	return nil
}

// RemoveLabel removes one label. A label that is not there is not an error;
// an issue that is not there is (forge.ErrNotFound).
func (c *Client) RemoveLabel(ctx context.Context, ref task.Ref, label string) error {
	if err := c.TakeLabel(ctx, ref, label); err != nil && !errors.Is(err, forge.ErrLabelAbsent) {
		return err
	}
	return nil
}

// TakeLabel removes one label as a claim: GitHub deletes the label from
// the issue in one request and answers 200 to the request that removed it
// and 404 "Label does not exist" to every later one, which is
// forge.ErrLabelAbsent. An issue that is not there is forge.ErrNotFound.
func (c *Client) TakeLabel(ctx context.Context, ref task.Ref, label string) error {
	owner, name, err := split(ref)
	if err != nil {
		return err
	}
	if label == "" {
		return fmt.Errorf("removing a label from %s: empty label", refName(ref))
	}
	// go-github puts the name into the path as it is: escape it, or a
	// space, "/", "?" or "#" in a label would change the URL.
	_, err = c.gh.Issues.RemoveLabelForIssue(ctx, owner, name, ref.Number, url.PathEscape(label))
	if er, ok := errors.AsType[*gh.ErrorResponse](err); ok && er.Response != nil &&
		er.Response.StatusCode == http.StatusNotFound && er.Message == labelAbsent {
		return fmt.Errorf("removing label %q from %s: %w", label, refName(ref), forge.ErrLabelAbsent)
	}
	if err != nil {
		return wrapErr(fmt.Sprintf("removing label %q from %s", label, refName(ref)), err)
	}
	return nil
}
