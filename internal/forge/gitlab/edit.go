package gitlab

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/coding-agent/coding-agent/internal/task"
)

// EditComment replaces the body of note id on the issue or merge request.
// The edit is a PUT, which the HTTP client retries after a 5xx, a 429 or a
// timeout: sending the same body again leaves the same note. A note that is
// gone gives forge.ErrNotFound.
func (c *Client) EditComment(ctx context.Context, ref task.Ref, id int64, body string) error {
	if err := c.updateNote(ctx, ref, id, body); err != nil {
		return fmt.Errorf("editing note %d on %s: %w", id, name(ref), err)
	}
	return nil
}

func (c *Client) updateNote(ctx context.Context, ref task.Ref, id int64, body string) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	if id <= 0 {
		return errors.New("note id must be positive")
	}
	if strings.TrimSpace(body) == "" {
		return errors.New("body is empty")
	}
	var err error
	if ref.Kind == task.MergeRequest {
		_, _, err = c.api.Notes.UpdateMergeRequestNote(ref.Repo, int64(ref.Number), id,
			&gl.UpdateMergeRequestNoteOptions{Body: gl.Ptr(body)}, gl.WithContext(ctx))
	} else {
		_, _, err = c.api.Notes.UpdateIssueNote(ref.Repo, int64(ref.Number), id,
			&gl.UpdateIssueNoteOptions{Body: gl.Ptr(body)}, gl.WithContext(ctx))
	}
	return translateErr(err)
}

// DeleteComment deletes note id on the issue or merge request: GitLab
// answers 204 to the request that deleted it and 404 to any later one,
// which is forge.ErrNotFound.
func (c *Client) DeleteComment(ctx context.Context, ref task.Ref, id int64) error {
	if err := c.deleteNote(ctx, ref, id); err != nil {
		return fmt.Errorf("deleting note %d on %s: %w", id, name(ref), err)
	}
	return nil
}

func (c *Client) deleteNote(ctx context.Context, ref task.Ref, id int64) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	if id <= 0 {
		return errors.New("note id must be positive")
	}
	var err error
	if ref.Kind == task.MergeRequest {
		_, err = c.api.Notes.DeleteMergeRequestNote(ref.Repo, int64(ref.Number), id, gl.WithContext(ctx))
	} else {
		_, err = c.api.Notes.DeleteIssueNote(ref.Repo, int64(ref.Number), id, gl.WithContext(ctx))
	}
	return translateErr(err)
}
