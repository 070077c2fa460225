package github

import (
	"context"
	"errors"
	"net/http"
	"time"

	gh "github.com/google/go-github/v92/github"

	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

// secondaryDefaultWait is GitHub's advice when a secondary rate limit answer
// carries no Retry-After: wait at least a minute.
const secondaryDefaultWait = time.Minute

// PostComment posts body on the issue or pull request as the token's user,
// once: package postonce retries it, looking for it among the comments before
// posting again after an ambiguous failure.
func (c *Client) PostComment(ctx context.Context, ref task.Ref, body string) (task.Comment, error) {
	owner, name, err := split(ref)
	if err != nil {
		return task.Comment{}, err
	}
	post := func(ctx context.Context) (task.Comment, error) {
		cm, _, err := c.gh.Issues.CreateComment(ctx, owner, name, ref.Number, gh.IssueCommentRequest{Body: body})
		return toComment(cm), apiErr(err)
	}
	find := func(ctx context.Context, since time.Time) (task.Comment, bool, error) {
		bot, err := c.BotUser(ctx)
		if err != nil {
			return task.Comment{}, false, err
		}
		cs, err := c.listComments(ctx, owner, name, ref.Number, &gh.IssueListCommentsOptions{Since: &since})
		if err != nil {
			return task.Comment{}, false, wrapErr("listing comments of "+refName(ref), err)
		}
		cm, ok := postonce.Landed(cs, bot, body, since)
		return cm, ok, nil
	}
	cm, err := c.posts.Post(ctx, c.log.With("ref", ref.String()), post, find, classify)
	if err != nil {
		return task.Comment{}, wrapErr("posting comment on "+refName(ref), err)
	}
	return cm, nil
}

// classify reads a failed POST: a rate limit (the primary one's 403 or 429,
// or the secondary one) refused it; a 5xx, or no answer we could read (a
// timeout, a reset connection, a 201 with a garbled body), is ambiguous; any
// other answer is final. wait is what GitHub asked for.
func classify(err error, now time.Time) (postonce.Kind, time.Duration) {
	var resp *http.Response
	if er, ok := errors.AsType[*gh.ErrorResponse](err); ok {
		resp = er.Response
	} else if rl, ok := errors.AsType[*gh.RateLimitError](err); ok {
		resp = rl.Response
	}
	ab, secondary := errors.AsType[*gh.AbuseRateLimitError](err)
	if secondary {
		resp = ab.Response
	}
	wait, named := httpx.ServerWait(resp, now)
	switch {
	case secondary && !named && ab.RetryAfter != nil && *ab.RetryAfter > 0: // from X-RateLimit-Reset
		return postonce.Refused, *ab.RetryAfter
	case secondary && !named:
		return postonce.Refused, secondaryDefaultWait
	case secondary || httpx.RateLimited(resp):
		return postonce.Refused, wait
	case resp == nil || resp.StatusCode >= 500:
		return postonce.Ambiguous, wait
	}
	return postonce.Final, 0
}
