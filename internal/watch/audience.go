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

// Audience decides whose comments on one task are heard: the task's author,
// the listed users, and, with Writers, people with write access (the forge
// is asked once per person). It is used by one goroutine at a time.
type Audience struct {
	Forge   forge.Permissions
	Task    task.Task // its Ref and Author
	Bot     string    // the bot's own comments are passed over
	Allowed []string  // heard besides the author; a leading "@" is ignored
	Writers bool      // people with write access are heard too

	known map[string]bool // lower-cased user → may steer
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
		if c.System || strings.EqualFold(c.Author, a.Bot) || strings.TrimSpace(c.Body) == "" {
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

// hears reports whether user may steer the task.
func (a *Audience) hears(ctx context.Context, user string) (bool, error) {
	if strings.EqualFold(user, a.Task.Author) || slices.ContainsFunc(a.Allowed, func(u string) bool {
		return strings.EqualFold(strings.TrimPrefix(u, "@"), user)
	}) {
		return true, nil
	}
	if !a.Writers {
		return false, nil
	}
	key := strings.ToLower(user)
	if ok, known := a.known[key]; known {
		return ok, nil
	}
	ok, err := a.Forge.CanWrite(ctx, a.Task.Ref, user)
	if err != nil {
		return false, fmt.Errorf("checking whether @%s may steer %s: %w", user, a.Task.Ref, err)
	}
	if a.known == nil {
		a.known = map[string]bool{}
	}
	a.known[key] = ok
	return ok, nil
}
