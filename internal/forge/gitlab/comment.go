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

	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

const (
	// maxAttempts bounds PostComment: the first try and three retries.
	maxAttempts = 4
	// firstBackoff is the wait before the first retry when the server names
	// none; it doubles each time.
	firstBackoff = time.Second
	// maxWait is the longest wait PostComment accepts; a server asking for
	// more ends it with an error instead.
	maxWait = 10 * time.Minute
	// clockSkew widens the window in which a note counts as the one an
	// ambiguous attempt may have posted, since GitLab stamps it by its clock.
	clockSkew = time.Minute
)

// PostComment posts body as a note on the issue or merge request, once.
// After an ambiguous failure (a 5xx answer, a timeout, a reset connection)
// it looks for the note among the bot's recent notes before posting again. A
// 429 means nothing was posted; the retry waits as long as Retry-After says.
func (c *Client) PostComment(ctx context.Context, ref task.Ref, body string) (task.Comment, error) {
	if err := checkRef(ref); err != nil || strings.TrimSpace(body) == "" {
		return task.Comment{}, fmt.Errorf("posting comment on %s: %w", name(ref), cmp.Or(err, errors.New("body is empty")))
	}
	var since time.Time // start of the first ambiguous attempt
	var wait time.Duration
	var lastErr error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if attempt > 1 {
			if err := c.sleep(ctx, wait); err != nil {
				return task.Comment{}, fmt.Errorf("posting comment on %s: %w", name(ref), err)
			}
		}
		wait = httpx.Backoff(attempt-1, firstBackoff, maxWait)
		if !since.IsZero() {
			n, found, err := c.findPosted(ctx, ref, body, since)
			if err != nil {
				c.log.Debug("checking for an earlier gitlab note failed", "ref", ref.String(), "attempt", attempt, "err", err)
				lastErr = err
				continue
			}
			if found {
				c.log.Info("gitlab note had landed despite the error; not posting again", "ref", ref.String(), "note", n.ID)
				return n, nil
			}
		}
		start := c.now()
		n, resp, err := c.createNote(ctx, ref, body)
		if err == nil {
			return noteComment(n), nil
		}
		if ctx.Err() != nil {
			return task.Comment{}, fmt.Errorf("posting comment on %s: %w", name(ref), ctx.Err())
		}
		lastErr = translateErr(err)
		retry, ambiguous := classify(resp)
		if !retry {
			return task.Comment{}, fmt.Errorf("posting comment on %s: %w", name(ref), lastErr)
		}
		if ambiguous && since.IsZero() {
			since = start
		}
		if attempt == maxAttempts {
			break
		}
		if resp != nil { // nil: no answer, so no wait named
			if d, ok := httpx.ServerWait(resp.Response, c.now()); ok {
				wait = d
			}
		}
		if wait > maxWait {
			return task.Comment{}, fmt.Errorf("posting comment on %s: server asks to wait %s: %w", name(ref), wait, lastErr)
		}
		c.log.Debug("posting gitlab note failed; retrying", "ref", ref.String(), "attempt", attempt, "wait", wait, "err", err)
	}
	// The last attempt may have landed too: look once more, without posting.
	if !since.IsZero() {
		if n, found, err := c.findPosted(ctx, ref, body, since); err == nil && found {
			return n, nil
		}
	}
	return task.Comment{}, fmt.Errorf("posting comment on %s: giving up after %d attempts: %w", name(ref), maxAttempts, lastErr)
}

// classify tells whether a failed post may be retried, and whether it may
// have landed: a 429 was refused before anything happened; a 5xx or a
// transport failure (no response: timeout, reset) is ambiguous; anything
// else is final.
func classify(resp *gl.Response) (retry, ambiguous bool) {
	if resp == nil || resp.Response == nil {
		return true, true
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return true, false
	case resp.StatusCode >= 500:
		return true, true
	}
	return false, false
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
// created since (less the allowed clock skew).
func (c *Client) findPosted(ctx context.Context, ref task.Ref, body string, since time.Time) (task.Comment, bool, error) {
	bot, err := c.BotUser(ctx)
	if err != nil {
		return task.Comment{}, false, err
	}
	from := since.Add(-clockSkew)
	older := func(n *gl.Note) bool { return n.CreatedAt != nil && n.CreatedAt.Before(from) }
	notes, err := c.listNotes(ctx, ref, "desc", func(page []*gl.Note) bool {
		return len(page) == 0 || older(page[len(page)-1])
	})
	if err != nil {
		return task.Comment{}, false, fmt.Errorf("listing notes of %s: %w", name(ref), translateErr(err))
	}
	var match *gl.Note
	for _, n := range notes {
		if !n.System && !older(n) && n.Author.Username == bot && strings.TrimSpace(n.Body) == strings.TrimSpace(body) {
			match = n // the list is newest first: keep the oldest match
		}
	}
	if match == nil {
		return task.Comment{}, false, nil
	}
	return noteComment(match), true, nil
}
