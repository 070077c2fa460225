// Package postonce posts a forge comment (or creates a pull or merge
// request) at most once. The HTTP client does not retry a POST, since a
// retried comment may appear twice; the forge adapters retry it here
// instead, with vendor parts passed in: how to post, how to find a comment
// that landed, how to read an error.
//
// The rules, the same for every forge: at most MaxAttempts attempts in all.
// After a refusal (a rate limit: nothing was posted) the next attempt waits
// at least as long as the forge asks. After an ambiguous failure (a 5xx, a
// timeout, a reset connection, an unreadable answer) the comment may have
// landed, so each later attempt first looks for the bot's identical comment
// created since ClockSkew before the first attempt (by its key when it is
// marked with one: see Mark), and posts only when there is none; a look-up that fails uses up the attempt. A final failure (any
// other 4xx) ends it at once. The waits grow from FirstBackoff, doubling.
package postonce

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

const (
	// MaxAttempts counts every attempt at one comment, POSTs and failed
	// look-ups alike.
	MaxAttempts = 4
	// ClockSkew widens the window in which a landed comment is looked for,
	// since the forge stamps it by a clock that may differ from ours.
	ClockSkew = 2 * time.Minute
	// FirstBackoff is the wait before the first retry when the forge names
	// none; it doubles for each later one.
	FirstBackoff = time.Second
	// DefaultMaxWait is the longest wait accepted when Options.MaxWait is 0.
	DefaultMaxWait = 5 * time.Minute
)

// Kind says what a failed post tells about the comment.
type Kind int

const (
	Final     Kind = iota // refused for good: nothing posted, do not retry
	Refused               // refused for now (a rate limit): nothing posted
	Ambiguous             // it may have landed: look before posting again
)

// Options are what stays the same from one comment to the next. Zero
// values mean defaults.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Sleep waits between attempts; nil means httpx.Sleep.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxWait is the longest wait accepted; a forge asking for more ends
	// the post with an error. 0 means DefaultMaxWait.
	MaxWait time.Duration
}

// Post posts one comment: post sends it once; find looks for the comment,
// as the bot posted it, created at or after since; classify reads post's
// error and the wait the forge named (0 if none) at now. Retries are logged
// on log (nil discards them). The error names no action: the caller does.
func (o Options) Post(ctx context.Context, log *slog.Logger,
	post func(ctx context.Context) (task.Comment, error),
	find func(ctx context.Context, since time.Time) (task.Comment, bool, error),
	classify func(err error, now time.Time) (kind Kind, wait time.Duration),
) (task.Comment, error) {
	return Do(ctx, o, log, "comment post", post, find, classify)
}

// Do creates one thing on a forge (a comment, a pull request) under the
// rules above, what naming it in the log: post sends it once; find looks
// for it as created at or after since; classify reads post's error.
func Do[T any](ctx context.Context, o Options, log *slog.Logger, what string,
	post func(ctx context.Context) (T, error),
	find func(ctx context.Context, since time.Time) (T, bool, error),
	classify func(err error, now time.Time) (kind Kind, wait time.Duration),
) (T, error) {
	var zero T
	o = o.filled()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	since := o.Now().Add(-ClockSkew)
	look := false // an attempt may have landed
	var wait time.Duration
	var lastErr error
	for attempt := 1; attempt <= MaxAttempts; attempt++ {
		if attempt > 1 {
			if wait > o.MaxWait {
				return zero, fmt.Errorf("not retrying, the forge asks to wait %s: %w", wait, lastErr)
			}
			log.WarnContext(ctx, "retrying "+what, "attempt", attempt, "wait", wait, "err", lastErr)
			if err := o.Sleep(ctx, wait); err != nil {
				return zero, fmt.Errorf("waiting to retry: %w (after %w)", err, lastErr)
			}
		}
		wait = httpx.Backoff(attempt-1, FirstBackoff, 0)
		if look {
			v, ok, err := find(ctx, since)
			if err != nil {
				lastErr = fmt.Errorf("checking whether an earlier attempt landed: %w", err)
				continue
			}
			if ok {
				return v, nil
			}
			look = false
		}
		v, err := post(ctx)
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil { // net/http and the vendor clients wrap ctx's error
			return zero, err
		}
		lastErr = err
		kind, named := classify(err, o.Now())
		if kind == Final {
			return zero, err
		}
		look = kind == Ambiguous
		wait = max(wait, named)
	}
	if look { // the last attempt may have landed too
		if v, ok, err := find(ctx, since); err == nil && ok {
			return v, nil
		}
	}
	return zero, fmt.Errorf("giving up after %d attempts: %w", MaxAttempts, lastErr)
}

func (o Options) filled() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = httpx.Sleep
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	return o
}

// Landed returns the newest of cs that bot created at or after since with
// body, as the forge may have stored it (line ends and surrounding blanks
// aside); a body marked with a key (Mark) is found by its key, as a
// resumed run finds it. System notes do not count.
func Landed(cs []task.Comment, bot, body string, since time.Time) (task.Comment, bool) {
	if key, ok := KeyOf(body); ok {
		return Keyed(cs, bot, key, since)
	}
	var found task.Comment
	ok := false
	for _, c := range cs {
		if c.System || c.CreatedAt.Before(since) || !strings.EqualFold(c.Author, bot) || normalize(c.Body) != normalize(body) {
			continue
		}
		if !ok || c.CreatedAt.After(found.CreatedAt) || c.CreatedAt.Equal(found.CreatedAt) && c.ID > found.ID {
			found, ok = c, true
		}
	}
	return found, ok
}

func normalize(s string) string {
	return strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
}
