package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/watch"
)

// Conversation configures the follow-up conversation (spec 003): a finished
// task awaits a reply instead of being done, and a reply from someone
// allowed starts a new round with the whole history.
type Conversation struct {
	Enabled            bool
	AllowCollaborators bool     // people with write access may reply, not only the author (and Options.Trust's allow list)
	Keywords           []string // a reply holding one (see watch.IsCompletion) ends it
	Timeout            time.Duration
	MaxRounds          int
}

// awaitFrom is how far before the start of the wait comments are read:
// clocks of the forge and of this host differ.
const awaitFrom = 2 * time.Minute

// finishRound ends a round the run finished done: the task awaits a reply
// while the conversation goes on, and is done otherwise. Its error is a
// store write that failed.
func (w *Worker) finishRound(ctx context.Context, f ending, out engine.Outcome) (bool, error) {
	summary := out.Summary
	if summary == "" {
		summary = out.Comment
	}
	awaits, err := w.await(ctx, f, summary)
	if store.IsFailure(err) {
		f.reason, f.lost = w.o.Redact(err.Error()), errors.Is(err, store.ErrLost)
		w.move(ctx, f, storeFailed)
		return true, err
	}
	ev := runDone
	if awaits {
		ev = roundDone
	}
	return w.move(ctx, f, ev)
}

// await records a finished round in the conversation, with the newest
// comment the round's context held (a comment written after the round's
// last checkpoint, within awaitFrom of the wait, is judged as a reply), and
// reports whether a reply is awaited: not when the conversation is off or
// max_rounds replies have been worked on. Its error is a store failure:
// then the round is not finished at all.
func (w *Worker) await(ctx context.Context, f ending, summary string) (bool, error) {
	cv := w.o.Conversation
	if !cv.Enabled || w.o.Labels.Awaiting == "" {
		return false, nil
	}
	c, _, err := w.o.Store.LoadConversation(ctx, f.ref)
	if err != nil {
		f.log.Error("loading the conversation", "error", err)
		return false, failure(fmt.Errorf("loading the conversation of %s: %w", f.ref, err))
	}
	c.Round++
	c.Summaries = append(c.Summaries, summary)
	c.Mark = max(c.Mark, f.mark)
	c.Since = w.o.Now().UTC()
	if err := w.o.Store.SaveConversation(ctx, f.ref, c); err != nil {
		f.log.Error("saving the conversation; the task is done instead", "error", err)
		return false, failure(fmt.Errorf("saving the conversation of %s: %w", f.ref, err))
	}
	// The first round answers the task; each later one, a reply.
	if replies := c.Round - 1; replies >= cv.MaxRounds {
		f.log.Info("conversation reached max_rounds", "replies", replies)
		return false, nil
	}
	f.log.Info("round finished; awaiting a reply", "round", c.Round)
	return true, nil
}

// Replies judges every task awaiting a reply and queues those whose reply
// starts a new round, claimed in the store; it returns how many it queued.
// A reply holding a completion keyword, a closed task, or the timeout ends
// the conversation (done label). Each comment is judged once: the newest
// comment id judged is saved, and a new round is claimed before that, so a
// crash in between leaves a claimed round that the backlog resumes. Only a
// failure to queue is an error; a task that cannot be judged is logged and
// judged again on the next pass. A store failure ends the pass with it.
func (w *Worker) Replies(ctx context.Context) (int, error) {
	if !w.o.Conversation.Enabled {
		return 0, nil
	}
	// One judge at a time in a process: serve judges on its own timer as
	// well as in each discovery pass.
	w.judging.Lock()
	defer w.judging.Unlock()
	recs, err := w.o.Store.List(ctx)
	if err != nil {
		w.o.Logger.Error("listing tasks awaiting a reply", "error", err)
		return 0, failure(fmt.Errorf("listing tasks awaiting a reply: %w", err))
	}
	n := 0
	for _, r := range recs {
		if r.Status != task.Awaiting || ctx.Err() != nil {
			continue
		}
		start, err := w.judge(ctx, r.Ref)
		if store.IsFailure(err) {
			return n, err
		}
		if err != nil {
			w.log(r.Ref).Error("judging replies", "error", err)
			continue
		}
		if !start {
			continue
		}
		n++
		if err := w.enqueue(ctx, r.Ref); err != nil {
			return n, err
		}
	}
	return n, nil
}

// judge looks at one awaiting task; true means a new round was claimed.
func (w *Worker) judge(ctx context.Context, ref task.Ref) (bool, error) {
	log := w.log(ref)
	c, ok, err := w.o.Store.LoadConversation(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("loading the conversation of %s: %w", ref, err)
	}
	if !ok {
		return false, fmt.Errorf("%s awaits a reply but has no conversation", ref)
	}
	t, err := w.o.Forge.Get(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", ref, err)
	}
	if t.State != "open" {
		return false, w.endConversation(ctx, t, c, "the task was closed")
	}
	if ls := w.o.Labels; !t.HasLabel(ls.Awaiting) || t.HasLabel(ls.Processing) {
		// Another host's store may have taken the task up since (a reply
		// it won, a new request): this row is behind, and neither a reply
		// nor the timeout is this host's to act on.
		log.Info("the task no longer awaits a reply on the forge; leaving it", "labels", t.Labels)
		return false, nil
	}
	replies, mark, err := w.replies(ctx, t, c)
	if err != nil {
		return false, err
	}
	if len(replies) == 0 {
		if w.o.Now().Sub(c.Since) > w.o.Conversation.Timeout {
			return false, w.endConversation(ctx, t, c, "no reply within the timeout")
		}
		if mark != c.Mark {
			c.Mark = mark
			return false, w.o.Store.SaveConversation(ctx, ref, c)
		}
		return false, nil
	}
	c.Mark = mark
	latest := replies[len(replies)-1]
	if watch.IsCompletion(latest.Body, w.o.Conversation.Keywords) {
		return false, w.endConversation(ctx, t, c, fmt.Sprintf("@%s ended it (comment %d)", latest.Author, latest.ID))
	}
	// Processing replaces the awaiting label, whose removal the forge
	// arbitrates (take): another host may judge the same reply.
	if ok, err := w.take(ctx, t, replied, task.Awaiting); err != nil || !ok {
		return false, err
	}
	if err := w.o.Store.SaveConversation(ctx, ref, c); err != nil {
		log.Error("saving the judged comments; the round may see them again", "error", err)
	}
	log.Info("a reply starts a new round", "round", c.Round+1, "comment", latest.ID, "author", latest.Author)
	return true, nil
}

// replies are the new comments, after the conversation's mark, from people
// allowed to reply; mark is the newest comment id among all new ones.
func (w *Worker) replies(ctx context.Context, t task.Task, c store.Conversation) ([]task.Comment, int64, error) {
	comments, err := w.o.Forge.CommentsSince(ctx, t.Ref, c.Since.Add(-awaitFrom))
	if err != nil {
		return nil, c.Mark, fmt.Errorf("reading replies on %s: %w", t.Ref, err)
	}
	bot, err := w.botName(ctx)
	if err != nil {
		return nil, c.Mark, err
	}
	// The author (as Options.Trust says), listed users, and people with
	// write access when allow_collaborators is on.
	sorted, err := w.audience(t, bot, w.o.Conversation.AllowCollaborators).Sort(ctx, comments, c.Mark)
	if err != nil {
		return nil, c.Mark, err
	}
	for _, cm := range sorted.Ignored {
		w.log(t.Ref).Info("reply from someone not allowed to continue the conversation ignored", "comment", cm.ID, "author", cm.Author)
	}
	return sorted.Heard, sorted.Mark, nil
}

// endConversation marks an awaiting task done. The conversation (its mark)
// is saved only once the labels are set: until then the next pass judges
// the same comments again and ends it again.
func (w *Worker) endConversation(ctx context.Context, t task.Task, c store.Conversation, why string) error {
	log := w.log(t.Ref)
	if ok, err := w.move(ctx, ending{ref: t.Ref, log: log, labels: t.Labels}, conversationEnded); store.IsFailure(err) {
		return err
	} else if !ok {
		return fmt.Errorf("setting the done label on %s", t.Ref)
	}
	log.Info("conversation ended; task done", "reason", why, "rounds", c.Round)
	if err := w.o.Store.SaveConversation(ctx, t.Ref, c); err != nil {
		return fmt.Errorf("saving the conversation of %s: %w", t.Ref, err)
	}
	return nil
}
