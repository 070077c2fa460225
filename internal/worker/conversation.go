package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/watch"
)

// Conversation configures the follow-up conversation (spec 003): a finished
// task awaits a reply instead of being done, and a reply from someone
// allowed starts a new round with the whole history.
type Conversation struct {
	Enabled            bool
	AllowCollaborators bool     // people with write access may reply, not only the author
	AllowedUsers       []string // also heard
	Keywords           []string // a reply holding one (see watch.IsCompletion) ends it
	Timeout            time.Duration
	MaxRounds          int
}

// awaitFrom is how far before the start of the wait comments are read:
// clocks of the forge and of this host differ.
const awaitFrom = 2 * time.Minute

// await moves a finished round to awaiting a reply: the conversation
// records the round and the newest comment so far (the bot's closing one
// included), the awaiting label replaces processing. It reports false when
// the conversation is over (off, or the last round) and the task should be
// done.
func (w *Worker) await(ctx context.Context, f ending, summary string) bool {
	cv := w.o.Conversation
	if !cv.Enabled || w.o.Labels.Awaiting == "" {
		return false
	}
	c, _, err := w.o.Store.LoadConversation(ctx, f.ref)
	if err != nil {
		f.log.Error("loading the conversation", "error", err)
		return false
	}
	c.Round++
	c.Summaries = append(c.Summaries, summary)
	comments, err := w.o.Forge.Comments(ctx, f.ref)
	if err != nil {
		f.log.Error("reading comments to close the round; the task is done instead", "error", err)
		return false
	}
	for _, cm := range comments {
		c.Mark = max(c.Mark, cm.ID)
	}
	c.Since = time.Now().UTC()
	if err := w.o.Store.SaveConversation(ctx, f.ref, c); err != nil {
		f.log.Error("saving the conversation; the task is done instead", "error", err)
		return false
	}
	if c.Round >= cv.MaxRounds {
		f.log.Info("conversation reached its last round", "rounds", c.Round)
		return false
	}
	if !w.relabel(ctx, f, w.o.Labels.Awaiting, w.o.Labels.Processing, w.o.Labels.Done) {
		w.finishLater(ctx, f)
		return true
	}
	w.setStatus(ctx, f.ref, task.Awaiting, "")
	w.clearCheckpoint(ctx, f)
	f.log.Info("round finished; awaiting a reply", "round", c.Round)
	return true
}

// Replies judges every task awaiting a reply and returns those whose reply
// starts a new round, claimed and queued in the store. A reply holding a
// completion keyword, a closed task, or the timeout ends the conversation
// (done label). Each comment is judged once: the newest comment id judged
// is saved, and a new round is claimed before that, so a crash in between
// leaves a claimed round that the backlog resumes.
func (w *Worker) Replies(ctx context.Context) []task.Ref {
	if !w.o.Conversation.Enabled {
		return nil
	}
	// One judge at a time in a process: serve judges on its own timer as
	// well as in each discovery pass.
	w.judging.Lock()
	defer w.judging.Unlock()
	recs, err := w.o.Store.List(ctx)
	if err != nil {
		w.o.Logger.Error("listing tasks awaiting a reply", "error", err)
		return nil
	}
	var refs []task.Ref
	for _, r := range recs {
		if r.Status != task.Awaiting || ctx.Err() != nil {
			continue
		}
		start, err := w.judge(ctx, r.Ref)
		if err != nil {
			w.log(r.Ref).Error("judging replies", "error", err)
			continue
		}
		if start {
			refs = append(refs, r.Ref)
		}
	}
	return refs
}

// judge looks at one awaiting task; true means a new round was claimed.
func (w *Worker) judge(ctx context.Context, ref task.Ref) (bool, error) {
	log := w.log(ref)
	c, ok, err := w.o.Store.LoadConversation(ctx, ref)
	if err != nil || !ok {
		return false, fmt.Errorf("loading the conversation of %s: %w (found: %t)", ref, err, ok)
	}
	t, err := w.o.Forge.Get(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", ref, err)
	}
	if t.State != "open" {
		return false, w.endConversation(ctx, t, c, "the task was closed")
	}
	replies, mark, err := w.replies(ctx, t, c)
	if err != nil {
		return false, err
	}
	if len(replies) == 0 {
		if time.Since(c.Since) > w.o.Conversation.Timeout {
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
	if ok, err := w.claimRound(ctx, t); err != nil || !ok {
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
	mark := c.Mark
	var out []task.Comment
	allowed := map[string]bool{} // one permission question per person
	for _, cm := range comments {
		if cm.ID <= c.Mark {
			continue
		}
		mark = max(mark, cm.ID)
		if cm.System || strings.EqualFold(cm.Author, bot) || strings.TrimSpace(cm.Body) == "" {
			continue
		}
		key := strings.ToLower(cm.Author)
		ok, known := allowed[key]
		if !known {
			if ok, err = w.mayReply(ctx, t, cm.Author); err != nil {
				return nil, c.Mark, err
			}
			allowed[key] = ok
		}
		if ok {
			out = append(out, cm)
		} else {
			w.log(t.Ref).Info("reply from someone not allowed to continue the conversation ignored", "comment", cm.ID, "author", cm.Author)
		}
	}
	return out, mark, nil
}

// mayReply: the author; listed users; people with write access when
// allow_collaborators is on.
func (w *Worker) mayReply(ctx context.Context, t task.Task, user string) (bool, error) {
	cv := w.o.Conversation
	if strings.EqualFold(user, t.Author) || slices.ContainsFunc(cv.AllowedUsers, func(u string) bool { return strings.EqualFold(u, user) }) {
		return true, nil
	}
	if !cv.AllowCollaborators {
		return false, nil
	}
	return w.o.Forge.CanWrite(ctx, t.Ref, user)
}

// botName is the configured bot, else the token's user.
func (w *Worker) botName(ctx context.Context) (string, error) {
	if w.o.BotName != "" {
		return w.o.BotName, nil
	}
	bot, err := w.o.Forge.BotUser(ctx)
	if err != nil {
		return "", fmt.Errorf("learning the bot's user name: %w", err)
	}
	return bot, nil
}

// claimRound takes an awaiting task for a new round: store claim first
// (atomic across processes), then processing replaces the awaiting label.
func (w *Worker) claimRound(ctx context.Context, t task.Task) (bool, error) {
	if _, err := w.o.Store.Claim(ctx, t.Ref, w.o.Owner); err != nil {
		if errors.Is(err, store.ErrClaimed) {
			return false, nil
		}
		return false, fmt.Errorf("claiming %s for a new round: %w", t.Ref, err)
	}
	if err := w.o.Forge.AddLabel(ctx, t.Ref, w.o.Labels.Processing); err != nil {
		w.setStatus(ctx, t.Ref, task.Awaiting, "")
		return false, fmt.Errorf("claiming %s for a new round: %w", t.Ref, err)
	}
	if err := w.o.Forge.RemoveLabel(ctx, t.Ref, w.o.Labels.Awaiting); err != nil {
		w.log(t.Ref).Warn("could not remove the awaiting label", "error", err)
	}
	if err := w.o.Store.SetStatus(ctx, t.Ref, task.Queued, ""); err != nil {
		return false, fmt.Errorf("marking %s queued: %w", t.Ref, err)
	}
	return true, nil
}

// endConversation marks an awaiting task done.
func (w *Worker) endConversation(ctx context.Context, t task.Task, c store.Conversation, why string) error {
	log := w.log(t.Ref)
	if err := w.o.Store.SaveConversation(ctx, t.Ref, c); err != nil {
		return fmt.Errorf("saving the conversation of %s: %w", t.Ref, err)
	}
	f := ending{ref: t.Ref, log: log, labels: t.Labels}
	if !w.relabel(ctx, f, w.o.Labels.Done, w.o.Labels.Awaiting, w.o.Labels.Failed) {
		return fmt.Errorf("setting the done label on %s", t.Ref)
	}
	w.setStatus(ctx, t.Ref, task.Done, "")
	log.Info("conversation ended; task done", "reason", why, "rounds", c.Round)
	return nil
}
