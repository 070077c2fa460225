package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	gh "github.com/google/go-github/v92/github"

	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

const (
	// maxPostAttempts counts every POST of one comment.
	maxPostAttempts = 4
	// clockSkew widens the window in which a comment that may have landed
	// is looked for, since our clock and GitHub's differ.
	clockSkew = 2 * time.Minute
	// secondaryDefaultWait is GitHub's advice when a secondary rate limit
	// answer carries no Retry-After: wait at least a minute.
	secondaryDefaultWait = time.Minute
)

// postOutcome says what a failed POST tells about the comment.
type postOutcome int

const (
	postFailed    postOutcome = iota // refused for good (4xx): not posted, do not retry
	postRefused                      // rate limited: not posted, retry after the wait
	postAmbiguous                    // 5xx, timeout, reset: it may have landed
)

func classify(err error) postOutcome {
	if _, ok := errors.AsType[*gh.RateLimitError](err); ok {
		return postRefused
	}
	if _, ok := errors.AsType[*gh.AbuseRateLimitError](err); ok {
		return postRefused
	}
	switch st := statusOf(err); {
	case st == http.StatusTooManyRequests:
		return postRefused
	case st >= 500:
		return postAmbiguous
	case st != 0:
		return postFailed
	}
	// No HTTP answer we could read (timeout, connection reset, a 201 with a
	// garbled body): the comment may exist.
	return postAmbiguous
}

// PostComment posts body on the issue or pull request as the token's user,
// once. The HTTP client does not retry a POST, so it is retried here, at
// most maxPostAttempts times in all: after a rate-limit answer (nothing was
// posted) no sooner than GitHub says, and after an ambiguous failure only
// once a look at the comments made since just before the first attempt
// shows that no identical comment by the bot landed.
func (c *Client) PostComment(ctx context.Context, ref task.Ref, body string) (task.Comment, error) {
	owner, name, err := split(ref)
	if err != nil {
		return task.Comment{}, err
	}
	action := "posting comment on " + refName(ref)
	since := c.now().Add(-clockSkew)
	ambiguous := false
	var lastErr error
	for attempt := 1; attempt <= maxPostAttempts; attempt++ {
		if attempt > 1 {
			wait := retryWait(lastErr, attempt, c.now())
			if wait > c.maxWait {
				return task.Comment{}, fmt.Errorf("%s: not retrying, GitHub asks to wait %s: %w", action, wait, lastErr)
			}
			c.log.WarnContext(ctx, "retrying github comment", "ref", ref.String(), "attempt", attempt, "wait", wait, "err", lastErr)
			if err := c.sleep(ctx, wait); err != nil {
				return task.Comment{}, fmt.Errorf("%s: waiting to retry: %w (after %w)", action, err, lastErr)
			}
		}
		if ambiguous {
			cm, ok, err := c.findPosted(ctx, owner, name, ref.Number, body, since)
			if err != nil {
				lastErr = fmt.Errorf("checking whether an earlier attempt landed: %w", err)
				continue
			}
			if ok {
				return cm, nil
			}
			ambiguous = false
		}
		cm, _, err := c.gh.Issues.CreateComment(ctx, owner, name, ref.Number, gh.IssueCommentRequest{Body: body})
		if err == nil {
			return toComment(cm), nil
		}
		if ctx.Err() != nil {
			return task.Comment{}, fmt.Errorf("%s: %w", action, err)
		}
		lastErr = err
		switch classify(err) {
		case postFailed:
			return task.Comment{}, wrapErr(action, err)
		case postAmbiguous:
			ambiguous = true
		}
	}
	if ambiguous {
		if cm, ok, err := c.findPosted(ctx, owner, name, ref.Number, body, since); err == nil && ok {
			return cm, nil
		}
	}
	return task.Comment{}, fmt.Errorf("%s: giving up after %d attempts: %w", action, maxPostAttempts, lastErr)
}

// findPosted looks for a comment by the bot with this body, updated at or
// after since.
func (c *Client) findPosted(ctx context.Context, owner, name string, number int, body string, since time.Time) (task.Comment, bool, error) {
	bot, err := c.BotUser(ctx)
	if err != nil {
		return task.Comment{}, false, err
	}
	cs, err := c.listComments(ctx, owner, name, number, &gh.IssueListCommentsOptions{Since: &since})
	if err != nil {
		return task.Comment{}, false, err
	}
	want := normalizeBody(body)
	for i := len(cs) - 1; i >= 0; i-- {
		if strings.EqualFold(cs[i].Author, bot) && normalizeBody(cs[i].Body) == want {
			return cs[i], true, nil
		}
	}
	return task.Comment{}, false, nil
}

// normalizeBody undoes what GitHub may do to a body it stores.
func normalizeBody(s string) string {
	return strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), " \n")
}

// retryWait is how long to wait before attempt after err: what GitHub asks
// (Retry-After, else the rate-limit reset) or an exponential backoff of
// 1s, 2s, 4s.
func retryWait(err error, attempt int, now time.Time) time.Duration {
	backoff := httpx.Backoff(attempt-2, time.Second, 0)
	if rl, ok := errors.AsType[*gh.RateLimitError](err); ok {
		if d, ok := httpx.RetryAfter(rl.Response, now); ok {
			return d
		}
		if !rl.Rate.Reset.IsZero() {
			return max(rl.Rate.Reset.Sub(now)+time.Second, time.Second)
		}
		return backoff
	}
	if ab, ok := errors.AsType[*gh.AbuseRateLimitError](err); ok {
		if d, ok := httpx.RetryAfter(ab.Response, now); ok {
			return d
		}
		if ab.RetryAfter != nil && *ab.RetryAfter > 0 {
			return *ab.RetryAfter
		}
		return secondaryDefaultWait
	}
	if er, ok := errors.AsType[*gh.ErrorResponse](err); ok {
		if d, ok := httpx.RetryAfter(er.Response, now); ok {
			return max(d, backoff)
		}
	}
	return backoff
}
