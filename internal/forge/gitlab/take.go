package gitlab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/task"
)

// GitLab removes a label idempotently: remove_labels answers 200 to every
// caller, whether or not the label was there, so the removal cannot say who
// took it. What GitLab does refuse is a second award of one emoji by one
// user on one issue or merge request (404 "Award Emoji Name has already
// been taken"): every host uses the same token, so the award is a lock
// only one of them holds at a time. TakeLabel holds it while it reads the
// label and removes it.
const (
	// lockEmoji is the award that holds the lock.
	lockEmoji = "lock"
	// staleLock is how old a lock must be before a taker removes it as
	// left by a process that died while taking: a take holds it for five
	// requests.
	staleLock = 5 * time.Minute
)

// TakeLabel removes label as a claim (forge.Labeler): with the bot's lock
// award on the issue or merge request, it reads the labels, and removes the
// label only when it is there; without the lock, or without the label, it
// is forge.ErrLabelAbsent. Five requests: award, list the awards (GitLab
// checks the award's uniqueness in Rails, not with a database constraint:
// of two awards that slipped through together, the older one holds the
// lock), read, remove, release.
func (c *Client) TakeLabel(ctx context.Context, ref task.Ref, label string) error {
	if err := c.takeLabel(ctx, ref, label); err != nil {
		return fmt.Errorf("taking label %q from %s: %w", label, name(ref), err)
	}
	return nil
}

func (c *Client) takeLabel(ctx context.Context, ref task.Ref, label string) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	label = strings.TrimSpace(label)
	if label == "" || strings.Contains(label, ",") {
		return errors.New("label must be non-empty and contain no comma")
	}
	id, err := c.lock(ctx, ref)
	if err != nil {
		return err
	}
	defer c.unlock(ctx, ref, id)
	t, err := c.Get(ctx, ref)
	if err != nil {
		return err
	}
	if !t.HasLabel(label) {
		return forge.ErrLabelAbsent
	}
	return c.editLabel(ctx, ref, label, false)
}

// lock awards lockEmoji as the bot and returns the award's id; another
// holder's lock is forge.ErrLabelAbsent. A lock released between the
// refusal and the look at the awards, or older than staleLock (then
// removed), gets the award tried once more.
func (c *Client) lock(ctx context.Context, ref task.Ref) (int64, error) {
	for try := 0; ; try++ {
		a, err := c.awardItem(ctx, ref)
		if err == nil {
			return c.confirm(ctx, ref, a)
		}
		if !errors.Is(err, gl.ErrNotFound) {
			return 0, translateErr(err)
		}
		// A 404 is a missing issue or a lock already held: the awards say
		// which (their listing is a 404 too for a missing issue).
		locks, lerr := c.locks(ctx, ref)
		if lerr != nil {
			return 0, translateErr(lerr)
		}
		if len(locks) == 0 {
			// Held a moment ago and released since (the client library
			// drops a 404's message, so "already taken" is inferred):
			// award again, once; refused again, other takers are at work.
			if try > 0 {
				c.log.Debug("the lock award was refused twice, released each time before it could be seen", "task", name(ref))
				return 0, forge.ErrLabelAbsent
			}
			continue
		}
		held := locks[0]
		if try > 0 || time.Since(deref(held.CreatedAt)) < staleLock {
			return 0, forge.ErrLabelAbsent
		}
		c.log.Warn("removing a stale lock award", "task", name(ref), "award", held.ID, "created", deref(held.CreatedAt))
		if err := c.deleteAward(ctx, ref, held.ID); err != nil && !errors.Is(err, gl.ErrNotFound) {
			return 0, translateErr(err)
		}
	}
}

// confirm keeps the lock a (just awarded) unless an older lock award of
// the bot's is there too: then the older one holds it, and a is removed.
func (c *Client) confirm(ctx context.Context, ref task.Ref, a *gl.AwardEmoji) (int64, error) {
	locks, err := c.locks(ctx, ref)
	if err != nil {
		c.unlock(ctx, ref, a.ID)
		return 0, translateErr(err)
	}
	if len(locks) > 0 && locks[0].ID < a.ID {
		c.unlock(ctx, ref, a.ID)
		return 0, forge.ErrLabelAbsent
	}
	return a.ID, nil
}

// unlock removes the lock award id, even when ctx has ended; a failure is
// logged (the lock goes stale and the next taker removes it).
func (c *Client) unlock(ctx context.Context, ref task.Ref, id int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := c.deleteAward(ctx, ref, id); err != nil && !errors.Is(err, gl.ErrNotFound) {
		c.log.Warn("removing the lock award; it goes stale", "task", name(ref), "award", id, "error", err)
	}
}

func (c *Client) awardItem(ctx context.Context, ref task.Ref) (*gl.AwardEmoji, error) {
	opt := &gl.CreateAwardEmojiOptions{Name: lockEmoji}
	if ref.Kind == task.MergeRequest {
		a, _, err := c.api.AwardEmoji.CreateMergeRequestAwardEmoji(ref.Repo, int64(ref.Number), opt, gl.WithContext(ctx))
		return a, err
	}
	a, _, err := c.api.AwardEmoji.CreateIssueAwardEmoji(ref.Repo, int64(ref.Number), opt, gl.WithContext(ctx))
	return a, err
}

func (c *Client) deleteAward(ctx context.Context, ref task.Ref, id int64) error {
	var err error
	if ref.Kind == task.MergeRequest {
		_, err = c.api.AwardEmoji.DeleteMergeRequestAwardEmoji(ref.Repo, int64(ref.Number), id, gl.WithContext(ctx))
	} else {
		_, err = c.api.AwardEmoji.DeleteIssueAwardEmoji(ref.Repo, int64(ref.Number), id, gl.WithContext(ctx))
	}
	return err
}

// locks are the bot's lock awards on the item, oldest (lowest id) first.
func (c *Client) locks(ctx context.Context, ref task.Ref) ([]*gl.AwardEmoji, error) {
	bot, err := c.BotUser(ctx)
	if err != nil {
		return nil, err
	}
	opt := &gl.ListAwardEmojiOptions{ListOptions: gl.ListOptions{PerPage: perPage}}
	awards, err := collect(func(page int64) ([]*gl.AwardEmoji, *gl.Response, error) {
		opt.Page = page
		if ref.Kind == task.MergeRequest {
			return c.api.AwardEmoji.ListMergeRequestAwardEmoji(ref.Repo, int64(ref.Number), opt, gl.WithContext(ctx))
		}
		return c.api.AwardEmoji.ListIssueAwardEmoji(ref.Repo, int64(ref.Number), opt, gl.WithContext(ctx))
	}, nil)
	if err != nil {
		return nil, err
	}
	awards = slices.DeleteFunc(awards, func(a *gl.AwardEmoji) bool {
		return a.Name != lockEmoji || !strings.EqualFold(a.User.Username, bot)
	})
	slices.SortFunc(awards, func(a, b *gl.AwardEmoji) int { return cmp.Compare(a.ID, b.ID) })
	return awards, nil
}
