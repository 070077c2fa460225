// Package watch listens to a task while the agent works on it: at every
// checkpoint it reads what changed on the issue (new comments, the paused
// and stopped labels, the bot's assignment) with conditional requests, so an
// unchanged issue costs one request the forge does not bill. New comments
// from people allowed to steer are handed to the agent; anyone else's are
// counted and never shown to the model.
package watch

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Forge is what a Watcher needs of the forge.
type Forge interface {
	forge.Reader
	forge.Permissions
	forge.Reactor
}

// Options configure Watchers.
type Options struct {
	Forge Forge
	// Comments turns new-comment detection on (comment_detection.enabled).
	Comments bool
	// Interval checks at every Interval-th checkpoint; 0 → 1.
	Interval int
	// AllowedUsers are heard besides the author and people with write access.
	AllowedUsers []string
	// PausedLabel and StoppedLabel pause and stop the task at a checkpoint;
	// empty disables them.
	PausedLabel, StoppedLabel string
	Logger                    *slog.Logger
	Now                       func() time.Time
}

// Backoff after a failed check: 1 s, doubling, at most 60 s (or what the
// forge's Retry-After says, which the HTTP layer has already waited).
const (
	minBackoff = time.Second
	maxBackoff = time.Minute
)

// Stats are a run's comment-detection counts, logged at its end.
type Stats struct {
	Checks  int `json:"checks"`  // checks made (skipped ones not counted)
	Folded  int `json:"folded"`  // comments handed to the agent
	Ignored int `json:"ignored"` // comments from people not allowed to steer
	Errors  int `json:"errors"`  // failed checks (logged and skipped)
}

// Watcher watches one task during one run. It implements agent.Watch.
type Watcher struct {
	o    Options
	ref  task.Ref
	bot  string
	log  *slog.Logger
	task task.Task // as it was when work started: author, assignees

	mu          sync.Mutex
	checkpoints int
	lastUpdated time.Time
	lastCount   int
	since       time.Time // created time of the newest comment seen
	allowed     map[string]bool
	backoff     time.Duration
	retryAt     time.Time
	stats       Stats
}

// New returns a Watcher for t, worked on as bot. comments are the comments
// the run started with (already in the agent's context).
func New(o Options, t task.Task, comments []task.Comment, bot string) *Watcher {
	if o.Interval <= 0 {
		o.Interval = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	w := &Watcher{o: o, ref: t.Ref, bot: bot, task: t, allowed: map[string]bool{},
		log: o.Logger.With("task", t.Ref.String())}
	w.lastUpdated, w.lastCount = t.UpdatedAt, t.CommentCount
	for _, c := range comments {
		if c.CreatedAt.After(w.since) {
			w.since = c.CreatedAt
		}
	}
	if w.since.IsZero() {
		w.since = t.CreatedAt
	}
	return w
}

// At is the check made at a checkpoint. mark is the newest comment id the
// agent's context already holds. A failed check is logged and skipped: it
// never stops the task.
func (w *Watcher) At(ctx context.Context, at agent.Step, mark int64) (agent.Steer, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	steer, err := w.at(ctx, at, mark)
	steer.Ignored = w.stats.Ignored
	return steer, err
}

func (w *Watcher) at(ctx context.Context, at agent.Step, mark int64) (agent.Steer, error) {
	steer := agent.Steer{Mark: mark}
	w.checkpoints++
	if (w.checkpoints-1)%w.o.Interval != 0 {
		return steer, nil
	}
	if now := w.o.Now(); now.Before(w.retryAt) {
		w.log.Debug("comment check skipped while backing off", "until", w.retryAt)
		return steer, nil
	}
	w.stats.Checks++
	steer, err := w.check(ctx, at, mark)
	if err != nil {
		if ctx.Err() != nil {
			return agent.Steer{Mark: mark}, ctx.Err()
		}
		w.stats.Errors++
		w.backoff = min(max(w.backoff*2, minBackoff), maxBackoff)
		w.retryAt = w.o.Now().Add(w.backoff)
		w.log.Warn("checking the task for changes failed; skipped", "error", err, "next_check_after", w.backoff)
		// A pause or stop seen before the failure still counts.
		return agent.Steer{Mark: mark, Pause: steer.Pause, Stop: steer.Stop, Reason: steer.Reason}, nil
	}
	w.backoff = 0
	return steer, nil
}

func (w *Watcher) check(ctx context.Context, at agent.Step, mark int64) (agent.Steer, error) {
	steer := agent.Steer{Mark: mark}
	t, err := w.o.Forge.Get(ctx, w.ref)
	if err != nil {
		return steer, fmt.Errorf("reading %s: %w", w.ref, err)
	}
	switch {
	case w.o.StoppedLabel != "" && t.HasLabel(w.o.StoppedLabel):
		steer.Stop, steer.Reason = true, fmt.Sprintf("the %q label was added", w.o.StoppedLabel)
	case w.unassigned(t):
		steer.Stop, steer.Reason = true, "the bot was unassigned"
	case t.State != "" && t.State != "open":
		steer.Stop, steer.Reason = true, "the task was closed"
	case w.o.PausedLabel != "" && t.HasLabel(w.o.PausedLabel):
		steer.Pause, steer.Reason = true, fmt.Sprintf("the %q label was added", w.o.PausedLabel)
	}
	if !w.o.Comments || (t.UpdatedAt.Equal(w.lastUpdated) && t.CommentCount == w.lastCount) {
		return steer, nil
	}
	comments, err := w.o.Forge.CommentsSince(ctx, w.ref, w.since.Add(-time.Second))
	if err != nil {
		return steer, fmt.Errorf("reading new comments of %s: %w", w.ref, err)
	}
	var fold []task.Comment
	// The mark and the read position move only once every comment was
	// judged: a failure halfway loses none of them.
	newMark, since := mark, w.since
	for _, c := range comments {
		if c.ID <= mark {
			continue
		}
		newMark = max(newMark, c.ID)
		if c.CreatedAt.After(since) {
			since = c.CreatedAt
		}
		if c.System || strings.EqualFold(c.Author, w.bot) || strings.TrimSpace(c.Body) == "" {
			continue
		}
		ok, err := w.mayPost(ctx, c.Author)
		if err != nil {
			return steer, err
		}
		if !ok {
			w.stats.Ignored++
			w.log.Info("comment from someone not allowed to steer ignored", "comment", c.ID, "author", c.Author)
			continue
		}
		fold = append(fold, c)
	}
	w.lastUpdated, w.lastCount, w.since = t.UpdatedAt, t.CommentCount, since
	steer.Mark = newMark
	if len(fold) == 0 {
		return steer, nil
	}
	steer.Message = Format(fold)
	for _, c := range fold {
		steer.Applied = append(steer.Applied, agent.Applied{ID: c.ID, Author: c.Author})
		if err := w.o.Forge.React(ctx, w.ref, c.ID, forge.ReactionSeen); err != nil {
			w.log.Warn("acknowledging a comment failed", "comment", c.ID, "error", err)
		}
	}
	w.stats.Folded += len(fold)
	w.log.Info("new comments handed to the agent", "count", len(fold), "phase", at.Phase, "turn", at.Turn, "action", at.Action)
	return steer, nil
}

// unassigned reports whether the bot was assigned when work started and is
// not now.
func (w *Watcher) unassigned(t task.Task) bool {
	was := slices.ContainsFunc(w.task.Assignees, func(a string) bool { return strings.EqualFold(a, w.bot) })
	is := slices.ContainsFunc(t.Assignees, func(a string) bool { return strings.EqualFold(a, w.bot) })
	return was && !is
}

// mayPost reports whether user may steer the task: its author, a listed
// user, or someone with write access (asked once per run).
func (w *Watcher) mayPost(ctx context.Context, user string) (bool, error) {
	if strings.EqualFold(user, w.task.Author) || slices.ContainsFunc(w.o.AllowedUsers, func(u string) bool {
		return strings.EqualFold(strings.TrimPrefix(u, "@"), user)
	}) {
		return true, nil
	}
	key := strings.ToLower(user)
	if ok, known := w.allowed[key]; known {
		return ok, nil
	}
	ok, err := w.o.Forge.CanWrite(ctx, w.ref, user)
	if err != nil {
		return false, fmt.Errorf("checking whether @%s may steer %s: %w", user, w.ref, err)
	}
	w.allowed[key] = ok
	return ok, nil
}

// Stats returns the counts so far.
func (w *Watcher) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// LogStats logs the run's counts (checks, comments folded, ignored, errors).
func (w *Watcher) LogStats() {
	s := w.Stats()
	w.log.Info("comment detection", "checks", s.Checks, "folded", s.Folded, "ignored", s.Ignored, "errors", s.Errors)
}

// Ignored is how many comments were not shown to the model.
func (w *Watcher) Ignored() int { return w.Stats().Ignored }

// Format is the message that hands new comments to the model, in spec
// 001's format; the comments are fenced as untrusted text.
func Format(cs []task.Comment) string {
	if len(cs) == 1 {
		c := cs[0]
		return fmt.Sprintf("[New Comment from @%s]:\n%s", c.Author, agent.Fence("comment by @"+c.Author, c.Body))
	}
	var b strings.Builder
	b.WriteString("[New Comments Detected]:\n")
	for i, c := range cs {
		fmt.Fprintf(&b, "\nComment %d from @%s (%s):\n%s\n", i+1, c.Author, c.CreatedAt.UTC().Format(time.RFC3339),
			agent.Fence("comment by @"+c.Author, c.Body))
	}
	return strings.TrimRight(b.String(), "\n")
}
