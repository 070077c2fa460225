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
	"sync/atomic"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/httpx"
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
	// Labels' Paused and Stopped pause and stop the task at a checkpoint.
	Labels task.Labels
	// Shutdown is closed when the process shuts down: the run then ends
	// at its next checkpoint, interrupted, to resume later.
	Shutdown <-chan struct{}
	// Posted is how many comments this process has posted on a task so far
	// (Posts.Count): a thread that grew by exactly those is not read. nil:
	// every change is read.
	Posted func(task.Ref) int
	Logger *slog.Logger
	Now    func() time.Time
}

// Backoff after a failed check: 1 s, doubling, at most 60 s; but never
// sooner than a rate-limited forge asked (Retry-After or the rate-limit
// reset, recorded by the HTTP layer), however long that is.
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

// Watcher watches one task during one run. It implements engine.Watch.
type Watcher struct {
	o    Options
	ref  task.Ref
	bot  string
	log  *slog.Logger
	task task.Task // as it was when work started: author, assignees

	nudged atomic.Bool // a webhook said the task changed (Nudge)

	mu          sync.Mutex
	checkpoints int
	lastUpdated time.Time
	lastCount   int
	lastPosted  int       // Options.Posted when lastCount was read
	since       time.Time // created time of the newest comment seen
	audience    *Audience // who may steer; remembers the forge's answers for the run
	backoff     time.Duration
	retryAt     time.Time
	stats       Stats
}

// New returns a Watcher for the task a decides for (a.Task, worked on as
// a.Bot). comments are the comments the run started with, all of them:
// those a let into the agent's context and those it left out.
func New(o Options, a *Audience, comments []task.Comment) *Watcher {
	if o.Interval <= 0 {
		o.Interval = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	t := a.Task
	w := &Watcher{o: o, ref: t.Ref, bot: a.Bot, task: t, log: o.Logger.With("task", t.Ref.String()), audience: a}
	w.lastUpdated, w.lastCount, w.lastPosted = t.UpdatedAt, t.CommentCount, w.posted()
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
func (w *Watcher) At(ctx context.Context, at engine.Step, mark int64) (engine.Steer, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if shuttingDown(w.o.Shutdown) {
		return engine.Steer{Mark: mark, End: engine.Interrupted,
			Reason: "the process is shutting down"}, nil
	}
	return w.at(ctx, at, mark)
}

func shuttingDown(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false // a nil channel never shuts down
	}
}

// Ref is the task watched.
func (w *Watcher) Ref() task.Ref { return w.ref }

// Nudge says the task changed (a webhook told of a comment): the next
// checkpoint checks, whatever Interval says and even while backing off.
func (w *Watcher) Nudge() { w.nudged.Store(true) }

func (w *Watcher) at(ctx context.Context, at engine.Step, mark int64) (engine.Steer, error) {
	steer := engine.Steer{Mark: mark}
	w.checkpoints++
	nudged := w.nudged.Swap(false)
	if (w.checkpoints-1)%w.o.Interval != 0 && !nudged {
		return steer, nil
	}
	if now := w.o.Now(); now.Before(w.retryAt) && !nudged {
		w.log.Debug("comment check skipped while backing off", "until", w.retryAt)
		return steer, nil
	}
	w.stats.Checks++
	rctx, waits := httpx.RecordWaits(ctx)
	steer, err := w.check(rctx, at, mark)
	if err != nil {
		if ctx.Err() != nil {
			return engine.Steer{Mark: mark}, ctx.Err()
		}
		w.stats.Errors++
		w.backoff = min(max(w.backoff*2, minBackoff), maxBackoff)
		pause := max(w.backoff, waits.Longest())
		w.retryAt = w.o.Now().Add(pause)
		w.log.Warn("checking the task for changes failed; skipped", "error", err, "next_check_after", pause)
		// A pause or stop seen before the failure still counts.
		return engine.Steer{Mark: mark, End: steer.End, Reason: steer.Reason}, nil
	}
	w.backoff = 0
	return steer, nil
}

func (w *Watcher) check(ctx context.Context, at engine.Step, mark int64) (engine.Steer, error) {
	steer := engine.Steer{Mark: mark}
	// Counted before the read: a post in between makes the counts differ,
	// and the comments are read.
	posted := w.posted()
	t, err := w.o.Forge.Get(ctx, w.ref)
	if err != nil {
		return steer, fmt.Errorf("reading %s: %w", w.ref, err)
	}
	halt := w.o.Labels.Halting(t.Labels)
	switch {
	case halt == task.RoleStopped:
		steer.End, steer.Reason = engine.Stopped, fmt.Sprintf("the %q label was added", w.o.Labels.Stopped)
	case w.unassigned(t):
		steer.End, steer.Reason = engine.Stopped, "the bot was unassigned"
	case t.State != "" && t.State != "open":
		steer.End, steer.Reason = engine.Stopped, "the task was closed"
	case halt == task.RolePaused:
		steer.End, steer.Reason = engine.Paused, fmt.Sprintf("the %q label was added", w.o.Labels.Paused)
	}
	if !w.o.Comments {
		return steer, nil
	}
	if posted != w.lastPosted && t.CommentCount == w.lastCount+posted-w.lastPosted {
		// Only the bot spoke: its comments are passed over whenever they
		// are read, so they need not be read now.
		w.lastUpdated, w.lastCount, w.lastPosted = t.UpdatedAt, t.CommentCount, posted
		return steer, nil
	}
	if t.UpdatedAt.Equal(w.lastUpdated) && t.CommentCount == w.lastCount {
		return steer, nil
	}
	comments, err := w.o.Forge.CommentsSince(ctx, w.ref, w.since.Add(-time.Second))
	if err != nil {
		return steer, fmt.Errorf("reading new comments of %s: %w", w.ref, err)
	}
	// The mark and the read position move only once every comment was
	// judged: a failure halfway loses none of them.
	sorted, err := w.audience.Sort(ctx, comments, mark)
	if err != nil {
		return steer, err
	}
	steer.Ignored = len(sorted.Ignored)
	for _, c := range sorted.Ignored {
		w.stats.Ignored++
		w.log.Info("comment from someone not allowed to steer ignored", "comment", c.ID, "author", c.Author)
	}
	w.lastUpdated, w.lastCount, w.lastPosted = t.UpdatedAt, t.CommentCount, posted
	if sorted.Latest.After(w.since) {
		w.since = sorted.Latest
	}
	steer.Mark = sorted.Mark
	if len(sorted.Heard) == 0 {
		return steer, nil
	}
	steer.Message = Format(sorted.Heard)
	for _, c := range sorted.Heard {
		steer.Applied = append(steer.Applied, engine.Applied{ID: c.ID, Author: c.Author})
		if err := w.o.Forge.React(ctx, w.ref, c.ID, forge.ReactionSeen); err != nil {
			w.log.Warn("acknowledging a comment failed", "comment", c.ID, "error", err)
		}
	}
	w.stats.Folded += len(sorted.Heard)
	w.log.Info("new comments handed to the agent", "count", len(sorted.Heard), "phase", at.Phase, "turn", at.Turn, "action", at.Action)
	return steer, nil
}

// posted is Options.Posted for the task, 0 without it.
func (w *Watcher) posted() int {
	if w.o.Posted == nil {
		return 0
	}
	return w.o.Posted(w.ref)
}

// unassigned reports whether the bot was assigned when work started and is
// not now.
func (w *Watcher) unassigned(t task.Task) bool {
	was := slices.ContainsFunc(w.task.Assignees, func(a string) bool { return strings.EqualFold(a, w.bot) })
	is := slices.ContainsFunc(t.Assignees, func(a string) bool { return strings.EqualFold(a, w.bot) })
	return was && !is
}

// Stats returns the counts so far.
func (w *Watcher) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Close logs the run's counts (checks, comments folded, ignored, errors).
func (w *Watcher) Close() {
	s := w.Stats()
	w.log.Info("comment detection", "checks", s.Checks, "folded", s.Folded, "ignored", s.Ignored, "errors", s.Errors)
}

// Ignored is how many comments were not shown to the model.
func (w *Watcher) Ignored() int { return w.Stats().Ignored }

// Format is the message that hands new comments to the model, in spec
// 001's format; the comments are fenced as untrusted text and each is cut
// at engine.MaxCommentChars, as in the task prompt.
func Format(cs []task.Comment) string {
	if len(cs) == 1 {
		c := cs[0]
		return fmt.Sprintf("[New Comment from @%s]:\n%s", c.Author, engine.FenceCut("comment by @"+c.Author, c.Body, engine.MaxCommentChars))
	}
	var b strings.Builder
	b.WriteString("[New Comments Detected]:\n")
	for i, c := range cs {
		fmt.Fprintf(&b, "\nComment %d from @%s (%s):\n%s\n", i+1, c.Author, c.CreatedAt.UTC().Format(time.RFC3339),
			engine.FenceCut("comment by @"+c.Author, c.Body, engine.MaxCommentChars))
	}
	return strings.TrimRight(b.String(), "\n")
}
