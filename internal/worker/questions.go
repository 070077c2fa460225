package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// A tool server's question the run could not answer ends the run Asked
// (engine/answer.go): the question is posted on the task, which awaits a
// reply with its checkpoint kept. Any reply the conversation's audience
// hears answers it (no verdict: "thanks, staging" is an answer) and starts
// a round that resumes the run, which reads the reply into the question's
// fields; no reply within the conversation's timeout fails the task.

// askOnTask puts the question the run ended on (f.question) to the people
// on the task: the conversation's wait starts now, from the newest
// comment the run held, and the task awaits a reply. Its error is a store
// write that failed.
func (w *Worker) askOnTask(ctx context.Context, f ending) (bool, error) {
	c, _, err := w.o.Store.LoadConversation(ctx, f.ref)
	if err == nil {
		c.Mark = max(c.Mark, f.mark)
		c.Since = w.o.Now().UTC()
		err = w.o.Store.SaveConversation(ctx, f.ref, c)
	}
	if err != nil {
		f.log.Error("recording the wait for an answer", "error", err)
		f.reason, f.lost = w.o.Redact(err.Error()), errors.Is(err, store.ErrLost)
		w.move(ctx, f, storeFailed)
		return true, failure(fmt.Errorf("recording the wait for an answer on %s: %w", f.ref, err))
	}
	// The question is posted before the task awaits: a process that dies
	// in between (or a move that fails) leaves it running or queued, and
	// the run resumed asks again under the same comment key, which is
	// looked for on the forge first (Doubt: the resumed run saved since,
	// so its keys no longer say so), and posted once. The other way
	// round, the task would await an answer to a question nobody was shown.
	w.postQuestion(ctx, f)
	f.log.Info("a tool server's question was put to the people on the task", "server", f.question.Server)
	return w.move(ctx, f, runAsked)
}

// postQuestion posts the question, named by the run's next comment key
// and the question's mark (a question asked again after a reply that
// could not be read is a comment of its own), looked for on the forge
// first. A question that cannot be posted is logged.
func (w *Worker) postQuestion(ctx context.Context, f ending) {
	q := f.question
	body, err := w.o.Lang.Asked(report.Question{Server: q.Server, Message: q.Message, Fields: q.Fields(), Unread: q.Unread})
	if err == nil && f.post != nil {
		key := f.key(q.CommentName()) // the replies are the comments after it (engine.Question.Replies)
		key.Doubt, key.Since = true, time.Time{}
		err = f.post.PostAll(ctx, key, body)
	}
	if err != nil {
		f.log.Error("posting the question", "error", err)
	}
}

// asking reports whether the awaiting task waits for the answer to a
// server's question (its checkpoint says so) rather than for a reply to a
// finished round.
func (w *Worker) asking(ctx context.Context, ref task.Ref) (*engine.Question, error) {
	cp, ok, err := w.o.Store.LoadCheckpoint(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("loading the checkpoint of %s: %w", ref, err)
	}
	if !ok {
		return nil, nil
	}
	q, _ := engine.Asking(cp.Data)
	return q, nil
}

// unanswered fails a task whose server's question nobody answered within
// the conversation's timeout.
func (w *Worker) unanswered(ctx context.Context, t task.Task, q *engine.Question) error {
	log := w.log(t.Ref)
	why := fmt.Sprintf("nobody answered the question of the tool server %q within %v", q.Server, w.o.Conversation.Timeout)
	f := ending{ref: t.Ref, post: w.poster(t.Ref, log), log: log, labels: t.Labels, reason: why}
	if ok, err := w.move(ctx, f, unanswered); store.IsFailure(err) {
		return err
	} else if !ok {
		return fmt.Errorf("setting the failed label on %s", t.Ref)
	}
	return nil
}
