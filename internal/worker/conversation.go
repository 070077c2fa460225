package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Conversation configures the follow-up conversation (spec 003): a finished
// task awaits a reply instead of being done, and a reply from someone
// allowed starts a new round with the whole history.
type Conversation struct {
	Enabled            bool
	AllowCollaborators bool     // people with write access may reply, not only the author (and Options.Trust's allow list)
	Keywords           []string // thanks and approval words (see watch.JudgeReply); none: no reply ends it
	Timeout            time.Duration
	MaxRounds          int
	// Ask is the model asked about a reply watch.JudgeReply is unsure
	// of (watch.AskReply, one request counted as the task's); nil: such a
	// reply continues.
	Ask llm.Client
	// Constrained sends the answer's schema with that request (llm.constrained).
	Constrained bool
	// Questions: a tool server's question is put to the people on the task,
	// which awaits their answer (engine.Input.Questions); false (a dry
	// run) declines it.
	Questions bool
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

// Replies judges every task awaiting a reply, and every task whose
// conversation ended within the window (Conversation.Timeout) before, and
// queues those whose reply starts a new round, claimed in the store; it
// returns how many it queued. A reply that asks for more starts a round; one
// of thanks or approval ends the conversation (done label, announced on the
// task); one the judge is unsure of goes to the model (see verdict). A
// closed task or the timeout ends it too, and the stopped label stops it
// (stopAwaiting). Each comment is judged once: the newest comment id
// judged is saved, and a new round is claimed before that, so a crash in
// between leaves a claimed round that the backlog resumes. Only a failure
// to queue is an error; a task that cannot be judged is logged and judged
// again on the next pass. A store failure ends the pass with it.
func (w *Worker) Replies(ctx context.Context) (int, error) {
	if !w.o.Conversation.Enabled || w.o.Labels.Awaiting == "" {
		return 0, nil
	}
	// One judge at a time in a process: serve judges on its own timer as
	// well as in each discovery pass.
	w.judging.Lock()
	defer w.judging.Unlock()
	recs, err := w.o.Store.List(ctx)
	if err != nil {
		logFailure(ctx, w.o.Logger, "listing tasks awaiting a reply", "error", err)
		return 0, failure(fmt.Errorf("listing tasks awaiting a reply: %w", err))
	}
	n := 0
	for _, r := range recs {
		if ctx.Err() != nil {
			break
		}
		var start bool
		switch r.Status {
		case task.Awaiting:
			start, err = w.judge(ctx, r.Ref)
		case task.Done:
			start, err = w.judgeEnded(ctx, r.Ref)
		default:
			continue
		}
		if store.IsFailure(err) {
			return n, err
		}
		if err != nil {
			logFailure(ctx, w.log(r.Ref), "judging replies", "error", err)
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
		return false, w.endConversation(ctx, t, c, ended{why: "the task was closed"})
	}
	ls := w.o.Labels
	if !t.HasLabel(ls.Awaiting) || t.HasLabel(ls.Processing) {
		// Another host's store may have taken the task up since (a reply
		// it won, a new request): this row is behind, and neither a reply
		// nor the timeout is this host's to act on.
		log.Info("the task no longer awaits a reply on the forge; leaving it", "labels", t.Labels)
		return false, nil
	}
	if ls.Stopped != "" && t.HasLabel(ls.Stopped) {
		_, err := w.stopAwaiting(ctx, t, fmt.Sprintf("the %q label was added", ls.Stopped))
		return false, err
	}
	replies, bot, mark, all, err := w.replies(ctx, t, c)
	if err != nil {
		return false, err
	}
	question, err := w.asking(ctx, ref)
	if err != nil {
		return false, err
	}
	if question != nil {
		// Only what was written after the question was posted answers it
		// (the run reads the same: engine.Question.Replies).
		bot, err := w.botName(ctx)
		if err != nil {
			return false, err
		}
		after, _ := question.Replies(append(slices.Clone(replies), botComments(all, bot)...), bot)
		replies = after
	}
	if len(replies) == 0 {
		if w.o.Now().Sub(c.Since) > w.o.Conversation.Timeout {
			if question != nil {
				return false, w.unanswered(ctx, t, question)
			}
			return false, w.endConversation(ctx, t, c, ended{why: "no reply within the timeout", announce: report.EndedByTimeout})
		}
		if mark != c.Mark {
			c.Mark = mark
			return false, w.o.Store.SaveConversation(ctx, ref, c)
		}
		return false, nil
	}
	c.Mark = mark
	if question == nil { // a reply to a question answers it, whatever it says
		end, err := w.verdict(ctx, t, replies, bot)
		if err != nil {
			return false, err
		}
		if end.announce != "" {
			return false, w.endConversation(ctx, t, c, end)
		}
	}
	// Processing replaces the awaiting label, whose removal the forge
	// arbitrates (take): another host may judge the same reply.
	if ok, err := w.take(ctx, t, replied, task.Awaiting); err != nil || !ok {
		return false, err
	}
	if err := w.o.Store.SaveConversation(ctx, ref, c); err != nil {
		log.Error("saving the judged comments; the round may see them again", "error", err)
	}
	latest := replies[len(replies)-1]
	log.Info("a reply starts a new round", "round", c.Round+1, "comment", latest.ID, "author", latest.Author)
	return true, nil
}

// judgeEnded looks at a done task whose conversation ended, announced,
// within the window (Conversation.Timeout since the end): a reply that
// asks for more starts a new round, as the announcement says; true means
// one was claimed. A reply of thanks is marked judged and nothing else.
// Tasks done otherwise (max_rounds, no conversation) are not read.
func (w *Worker) judgeEnded(ctx context.Context, ref task.Ref) (bool, error) {
	cv := w.o.Conversation
	c, ok, err := w.o.Store.LoadConversation(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("loading the conversation of %s: %w", ref, err)
	}
	if !ok || c.Round == 0 || c.Round-1 >= cv.MaxRounds || w.o.Now().Sub(c.Since) > cv.Timeout {
		return false, nil
	}
	t, err := w.o.Forge.Get(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", ref, err)
	}
	ls := w.o.Labels
	if t.State != "open" || !t.HasLabel(ls.Done) || t.HasLabel(ls.Processing) || t.HasLabel(ls.Bot) {
		return false, nil // closed, or taken up again another way
	}
	replies, bot, mark, _, err := w.replies(ctx, t, c)
	if err != nil || (len(replies) == 0 && mark == c.Mark) {
		return false, err
	}
	c.Mark = mark
	if len(replies) > 0 {
		end, err := w.verdict(ctx, t, replies, bot)
		if err != nil {
			return false, err
		}
		if end.announce == "" {
			if ok, err := w.take(ctx, t, reopened, task.Done); err != nil || !ok {
				return false, err
			}
			w.log(ref).Info("a reply after the conversation ended starts a new round", "round", c.Round+1,
				"comment", replies[len(replies)-1].ID)
			return true, w.o.Store.SaveConversation(ctx, ref, c)
		}
	}
	return false, w.o.Store.SaveConversation(ctx, ref, c)
}

// replies are the new comments, after the conversation's mark, from people
// allowed to reply; bot are the bodies of the bot's own comments among all
// those read (what a reply may quote); mark is the newest comment id among
// all new ones; all are the comments read.
func (w *Worker) replies(ctx context.Context, t task.Task, c store.Conversation) ([]task.Comment, []string, int64, []task.Comment, error) {
	comments, err := w.o.Forge.CommentsSince(ctx, t.Ref, c.Since.Add(-awaitFrom))
	if err != nil {
		return nil, nil, c.Mark, nil, fmt.Errorf("reading replies on %s: %w", t.Ref, err)
	}
	bot, err := w.botName(ctx)
	if err != nil {
		return nil, nil, c.Mark, nil, err
	}
	var said []string
	for _, cm := range comments {
		if cm.Author == bot {
			said = append(said, cm.Body)
		}
	}
	// The author (as Options.Trust says), listed users, and people with
	// write access when allow_collaborators is on.
	sorted, err := w.audience(t, bot, w.o.Conversation.AllowCollaborators).Sort(ctx, comments, c.Mark)
	if err != nil {
		return nil, nil, c.Mark, nil, err
	}
	for _, cm := range sorted.Ignored {
		w.log(t.Ref).Info("reply from someone not allowed to continue the conversation ignored", "comment", cm.ID, "author", cm.Author)
	}
	return sorted.Heard, said, sorted.Mark, comments, nil
}

// botComments are the bot's comments among all.
func botComments(all []task.Comment, bot string) []task.Comment {
	var out []task.Comment
	for _, c := range all {
		if strings.EqualFold(c.Author, bot) {
			out = append(out, c)
		}
	}
	return out
}

// ended is why a conversation ends: why for the log, and announce, the
// reason the announcement gives (report.EndedBy…; "" for none: the task
// was closed, or the reply does not end it), with the reply's author.
type ended struct {
	why, announce, author string
}

// endConversation marks an awaiting task done and announces it (one short
// comment: why, and that a reply within the window or the bot label
// continues it). The conversation (its mark, and the end as the start of
// the window) is saved only once the labels are set: until then the next
// pass judges the same comments again and ends it again; the announcement
// is named by the round and the mark, so that it is posted once.
func (w *Worker) endConversation(ctx context.Context, t task.Task, c store.Conversation, e ended) error {
	log := w.log(t.Ref)
	if ok, err := w.move(ctx, ending{ref: t.Ref, log: log, labels: t.Labels}, conversationEnded); store.IsFailure(err) {
		return err
	} else if !ok {
		return fmt.Errorf("setting the done label on %s", t.Ref)
	}
	log.Info("conversation ended; task done", "reason", e.why, "rounds", c.Round)
	if e.announce != "" {
		w.announce(ctx, t.Ref, c, e)
	}
	c.Since = w.o.Now().UTC()
	if err := w.o.Store.SaveConversation(ctx, t.Ref, c); err != nil {
		return fmt.Errorf("saving the conversation of %s: %w", t.Ref, err)
	}
	return nil
}

// announce posts the end of a conversation; a failure is logged.
func (w *Worker) announce(ctx context.Context, ref task.Ref, c store.Conversation, e ended) {
	log := w.log(ref)
	cv := w.o.Conversation
	body, err := report.Ended(w.o.Lang, e.announce, e.author, cv.Timeout, w.o.Labels.Bot)
	if err == nil {
		post := w.poster(ref, log)
		key := engine.Key{Name: fmt.Sprintf("ended/%d/%d", c.Round, c.Mark), Doubt: true, Since: c.Since}
		err = post.PostAll(ctx, key, body)
	}
	if err != nil {
		log.Error("announcing the end of the conversation", "error", err)
	}
}
