package gitlab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

// PostComment posts body as a note on the issue or merge request, once:
// package postonce retries it, looking for it among the bot's recent notes
// before posting again after an ambiguous failure.
func (c *Client) PostComment(ctx context.Context, ref task.Ref, body string) (task.Comment, error) {
	if err := checkRef(ref); err != nil || strings.TrimSpace(body) == "" {
		return task.Comment{}, fmt.Errorf("posting comment on %s: %w", name(ref), cmp.Or(err, errors.New("body is empty")))
	}
	post := func(ctx context.Context) (task.Comment, error) {
		n, _, err := c.createNote(ctx, ref, body)
		if err != nil {
			return task.Comment{}, err
		}
		return noteComment(n), nil
	}
	find := func(ctx context.Context, since time.Time) (task.Comment, bool, error) {
		return c.findPosted(ctx, ref, body, since)
	}
	cm, err := c.posts.Post(ctx, c.log.With("ref", ref.String()), post, find, classify)
	if err != nil {
		return task.Comment{}, fmt.Errorf("posting comment on %s: %w", name(ref), translateErr(err))
	}
	return cm, nil
}

// classify reads a failed post: a 429 was refused before anything happened;
// a 5xx, or no answer we could read (a timeout, a reset connection, a 201
// with a garbled body), is ambiguous; any other answer is final. wait is
// what GitLab asked for.
func classify(err error, now time.Time) (postonce.Kind, time.Duration) {
	if errors.Is(err, gl.ErrNotFound) {
		return postonce.Final, 0
	}
	er, ok := errors.AsType[*gl.ErrorResponse](err)
	if !ok || er.Response == nil {
		return postonce.Ambiguous, 0
	}
	wait, _ := httpx.ServerWait(er.Response, now)
	switch {
	case er.StatusCode == http.StatusTooManyRequests:
		return postonce.Refused, wait
	case er.StatusCode >= 500:
		return postonce.Ambiguous, wait
	}
	return postonce.Final, 0
}

func (c *Client) createNote(ctx context.Context, ref task.Ref, body string) (*gl.Note, *gl.Response, error) {
	if ref.Kind == task.MergeRequest {
		return c.api.Notes.CreateMergeRequestNote(ref.Repo, int64(ref.Number),
			&gl.CreateMergeRequestNoteOptions{Body: gl.Ptr(body)}, gl.WithContext(ctx))
	}
	return c.api.Notes.CreateIssueNote(ref.Repo, int64(ref.Number),
		&gl.CreateIssueNoteOptions{Body: gl.Ptr(body)}, gl.WithContext(ctx))
}

// findPosted looks, newest first, for a note by the bot with this body
// created at or after since.
func (c *Client) findPosted(ctx context.Context, ref task.Ref, body string, since time.Time) (task.Comment, bool, error) {
	bot, err := c.BotUser(ctx)
	if err != nil {
		return task.Comment{}, false, err
	}
	notes, err := c.listNotes(ctx, ref, "desc", func(page []*gl.Note) bool {
		return len(page) == 0 || deref(page[len(page)-1].CreatedAt).Before(since)
	})
	if err != nil {
		return task.Comment{}, false, fmt.Errorf("listing notes of %s: %w", name(ref), translateErr(err))
	}
	cs := make([]task.Comment, len(notes))
	for i, n := range notes {
		cs[i] = noteComment(n)
	}
	cm, ok := postonce.Landed(cs, bot, body, since)
	return cm, ok, nil
}
