package github

import (
	"context"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v92/github"

	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

// EditComment replaces the body of comment id on the issue or pull request
// (both go through the issue comments endpoint). Sending the same body again
// leaves the same comment, so the PATCH is marked idempotent and the HTTP
// client retries it like a PUT after a 5xx, a 429 or a timeout. A comment
// that is gone gives forge.ErrNotFound.
func (c *Client) EditComment(ctx context.Context, ref task.Ref, id int64, body string) error {
	owner, name, err := split(ref)
	if err != nil {
		return err
	}
	action := fmt.Sprintf("editing comment %d on %s", id, refName(ref))
	if id <= 0 {
		return fmt.Errorf("%s: comment id must be positive", action)
	}
	if strings.TrimSpace(body) == "" {
		return fmt.Errorf("%s: body is empty", action)
	}
	_, _, err = c.gh.Issues.UpdateComment(httpx.Idempotent(ctx), owner, name, id, gh.IssueCommentRequest{Body: body})
	if err != nil {
		return wrapErr(action, err)
	}
	return nil
}

// DeleteComment deletes comment id (DELETE .../issues/comments/{id}): GitHub
// answers 204 to the request that deleted it and 404 to any later one,
// which is forge.ErrNotFound.
func (c *Client) DeleteComment(ctx context.Context, ref task.Ref, id int64) error {
	owner, name, err := split(ref)
	if err != nil {
		return err
	}
	action := fmt.Sprintf("deleting comment %d on %s", id, refName(ref))
	if id <= 0 {
		return fmt.Errorf("%s: comment id must be positive", action)
	}
	if _, err := c.gh.Issues.DeleteComment(ctx, owner, name, id); err != nil {
		return wrapErr(action, err)
	}
	return nil
}
