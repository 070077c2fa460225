package watch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Trust is who may make the agent act (SPEC-NOTES 18): people with write
// access and the allow list always; the task's author as configured;
// anyone else never.
type Trust struct {
	// Allowed are heard and may label a task like people with write
	// access (comment_detection.allowed_users); a leading "@" is ignored.
	Allowed []string
	// HearAuthor: the task's author is heard without write access
	// (trust.hear_author_without_access).
	HearAuthor bool
	// LabelerNeedsWrite: the bot label counts only from someone Trusted
	// (trust.labeler_needs_write_access).
	LabelerNeedsWrite bool
}

// Audience applies the one audience rule to one task, on every path into
// the model: the comments a run starts with, those read at its
// checkpoints, and the replies that start a later round. The forge is
// asked once per person. It is used by one goroutine at a time.
type Audience struct {
	Forge forge.Permissions
	Task  task.Task // its Ref and Author
	Bot   string    // the bot's own comments are passed over
	Trust Trust
	// Writers: people with write access are heard; false leaves the
	// author (as Trust says) and the allow list (a conversation with
	// allow_collaborators off).
	Writers bool

	known map[string]bool // lower-cased user → has write access
}

// Sorted is what Sort found among the comments after a mark.
type Sorted struct {
	Heard   []task.Comment // from people allowed to steer, oldest first
	Ignored []task.Comment // from anyone else
	Mark    int64          // the newest comment id after the mark; the mark when none
	Latest  time.Time      // when the newest of them was created; zero when none
}

// Sort sorts the comments newer than mark. System notes, the bot's own
// comments and blank ones are neither heard nor ignored, but move the mark.
// A failed permission question fails the whole sort, so that a caller that
// keeps its mark on error loses no comment.
func (a *Audience) Sort(ctx context.Context, comments []task.Comment, mark int64) (Sorted, error) {
	s := Sorted{Mark: mark}
	for _, c := range comments {
		if c.ID <= mark {
			continue
		}
		s.Mark = max(s.Mark, c.ID)
		if c.CreatedAt.After(s.Latest) {
			s.Latest = c.CreatedAt
		}
		if a.passedOver(c) {
			continue
		}
		ok, err := a.hears(ctx, c.Author)
		if err != nil {
			return Sorted{Mark: mark}, err
		}
		if ok {
			s.Heard = append(s.Heard, c)
		} else {
			s.Ignored = append(s.Ignored, c)
		}
	}
	return s, nil
}

// Shown keeps the comments a run may show the model: those heard, the
// bot's own and system notes, in their order; ignored counts the rest.
func (a *Audience) Shown(ctx context.Context, comments []task.Comment) (shown []task.Comment, ignored int, err error) {
	for _, c := range comments {
		ok := a.passedOver(c)
		if !ok {
			if ok, err = a.hears(ctx, c.Author); err != nil {
				return nil, 0, err
			}
		}
		if ok {
			shown = append(shown, c)
		} else {
			ignored++
		}
	}
	return shown, ignored, nil
}

// passedOver: system notes, the bot's own comments and blank ones are
// nobody's request.
func (a *Audience) passedOver(c task.Comment) bool {
	return c.System || strings.EqualFold(c.Author, a.Bot) || strings.TrimSpace(c.Body) == ""
}

// hears reports whether user may steer the task.
func (a *Audience) hears(ctx context.Context, user string) (bool, error) {
	if a.allowed(user) {
		return true, nil
	}
	author := strings.EqualFold(user, a.Task.Author)
	if author && a.Trust.HearAuthor {
		return true, nil
	}
	if !a.Writers && !author {
		return false, nil
	}
	return a.canWrite(ctx, user)
}

// Trusted reports whether user may ask for the agent by labelling the
// task: someone with write access or on the allow list, or the bot's own
// user (the operator's commands, such as resume, label as the bot).
func (a *Audience) Trusted(ctx context.Context, user string) (bool, error) {
	if user == "" {
		return false, nil
	}
	if a.allowed(user) || strings.EqualFold(user, a.Bot) {
		return true, nil
	}
	return a.canWrite(ctx, user)
}

func (a *Audience) allowed(user string) bool {
	return slices.ContainsFunc(a.Trust.Allowed, func(u string) bool {
		return strings.EqualFold(strings.TrimPrefix(u, "@"), user)
	})
}

func (a *Audience) canWrite(ctx context.Context, user string) (bool, error) {
	key := strings.ToLower(user)
	if ok, known := a.known[key]; known {
		return ok, nil
	}
	ok, err := a.Forge.CanWrite(ctx, a.Task.Ref, user)
	if err != nil {
		return false, fmt.Errorf("checking whether @%s has write access to %s: %w", user, a.Task.Ref, err)
	}
	if a.known == nil {
		a.known = map[string]bool{}
	}
	a.known[key] = ok
	return ok, nil
}
