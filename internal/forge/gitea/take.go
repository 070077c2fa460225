package gitea

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Gitea removes a label idempotently: DELETE .../labels/{id} answers 204
// to every caller, whether or not the label was there, so the removal
// cannot say who took it. What Gitea does keep unique, by a database
// constraint, is one user's reaction of one kind on one issue: the first
// POST .../reactions is answered 201, any later one 200 (it exists), and
// one racing it past Gitea's own look-up fails the constraint (500).
// Every host uses the same token, so that reaction is a lock only one of
// them holds at a time. TakeLabel holds it while it reads the label and
// removes it.
const (
	// lockReaction is the reaction that holds the lock: one of Gitea's
	// default allowed reactions, and one the daemon uses for nothing else.
	lockReaction = "rocket"
	// staleLock is how old a lock must be before a taker removes it as
	// left by a process that died while taking: a take holds it for three
	// requests.
	staleLock = 5 * time.Minute
)

// TakeLabel removes label as a claim (forge.Labeler): with the bot's lock
// reaction on the issue or pull request, it reads the labels, and removes
// the label only when it is there; without the lock, or without the
// label, it is forge.ErrLabelAbsent. Four requests: react, read the
// issue, remove, release (and the labels' ids, once a repository). The guarantee holds as long as Gitea's database enforces its
// unique index on reactions (every supported database does) and no person
// removes the bot's reaction by hand during a take.
func (c *Client) TakeLabel(ctx context.Context, ref task.Ref, label string) error {
	if err := c.takeLabel(ctx, ref, label); err != nil {
		return fmt.Errorf("taking label %q from %s: %w", label, name(ref), err)
	}
	return nil
}

func (c *Client) takeLabel(ctx context.Context, ref task.Ref, label string) error {
	if _, _, err := split(ref); err != nil {
		return err
	}
	if strings.TrimSpace(label) == "" {
		return errors.New("label is empty")
	}
	if err := c.lock(ctx, ref); err != nil {
		return err
	}
	defer c.unlock(ctx, ref)
	// The issue's labels alone: Get would read a pull request's branches
	// too, a request the take has no use for.
	owner, repo, _ := split(ref)
	i, resp, err := c.api(ctx).GetIssue(owner, repo, int64(ref.Number))
	if err != nil {
		return wrap(resp, err)
	}
	if !slices.ContainsFunc(i.Labels, func(l *sdk.Label) bool { return l.Name == label }) {
		return forge.ErrLabelAbsent
	}
	return c.removeLabel(ctx, ref, label)
}

// lock reacts lockReaction as the bot: 201 holds the lock; 200 says it is
// held (forge.ErrLabelAbsent) unless the reaction is older than staleLock,
// when it is removed and the lock tried once more.
func (c *Client) lock(ctx context.Context, ref task.Ref) error {
	owner, repo, _ := split(ref)
	for try := 0; ; try++ {
		_, resp, err := c.api(ctx).PostIssueReaction(owner, repo, int64(ref.Number), lockReaction)
		if err != nil {
			return wrap(resp, err)
		}
		if resp.StatusCode == http.StatusCreated {
			return nil
		}
		if try > 0 {
			return forge.ErrLabelAbsent
		}
		held, err := c.heldSince(ctx, ref)
		if err != nil {
			return err
		}
		if held.IsZero() {
			continue // released since it was refused
		}
		if time.Since(held) < staleLock {
			return forge.ErrLabelAbsent
		}
		c.log.Warn("removing a stale lock reaction", "task", name(ref), "created", held)
		if resp, err := c.api(ctx).DeleteIssueReaction(owner, repo, int64(ref.Number), lockReaction); err != nil {
			return wrap(resp, err)
		}
	}
}

// heldSince is when the bot's lock reaction was made; the zero time when
// there is none (released a moment ago: the lock is tried again).
func (c *Client) heldSince(ctx context.Context, ref task.Ref) (time.Time, error) {
	owner, repo, _ := split(ref)
	bot, err := c.BotUser(ctx)
	if err != nil {
		return time.Time{}, err
	}
	var held time.Time
	err = pages(func(opt sdk.ListOptions) (*sdk.Response, error) {
		rs, resp, err := c.api(ctx).ListIssueReactions(owner, repo, int64(ref.Number), sdk.ListIssueReactionsOptions{ListOptions: opt})
		for _, r := range rs {
			if r.Reaction == lockReaction && r.User != nil && strings.EqualFold(r.User.UserName, bot) {
				held = r.Created
			}
		}
		return resp, err
	})
	return held, err
}

// unlock removes the lock reaction, even when ctx has ended; a failure is
// logged (the lock goes stale and the next taker removes it).
func (c *Client) unlock(ctx context.Context, ref task.Ref) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	owner, repo, _ := split(ref)
	if resp, err := c.api(ctx).DeleteIssueReaction(owner, repo, int64(ref.Number), lockReaction); err != nil {
		c.log.Warn("removing the lock reaction; it goes stale", "task", name(ref), "error", wrap(resp, err))
	}
}
