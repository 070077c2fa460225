package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/watch"
)

// verdict judges the new replies together, as a person reads them: any
// that asks for more continues the conversation (the zero ended); when
// every one is thanks or approval, it ends (report.EndedByReply). When
// the rest leave watch.JudgeReply unsure, the model is asked once about
// them (watch.AskReply), the request counted as the task's; an answer it
// does not understand continues, logged; a request that fails is the
// error, and the replies are judged again on the next pass. Without a
// model to ask, an unsure reply continues.
func (w *Worker) verdict(ctx context.Context, t task.Task, replies []task.Comment, bot []string) (ended, error) {
	log := w.log(t.Ref)
	cv := w.o.Conversation
	var unsure []string
	latest := replies[len(replies)-1]
	for _, r := range replies {
		switch watch.JudgeReply(r.Body, cv.Keywords, bot) {
		case watch.Continue:
			return ended{}, nil
		case watch.Unsure:
			unsure = append(unsure, r.Body)
		}
	}
	if len(unsure) == 0 {
		return ended{why: fmt.Sprintf("@%s ended it (comment %d)", latest.Author, latest.ID), announce: report.EndedByReply,
			author: latest.Author}, nil
	}
	if cv.Ask == nil {
		log.Info("the reply neither plainly asks for more nor only thanks, and no model is at hand to ask; it starts a new round",
			"comment", latest.ID)
		return ended{}, nil
	}
	a, err := watch.AskReply(llm.WithTask(ctx, t.Ref.String()), cv.Ask, strings.Join(unsure, "\n\n"), cv.Constrained)
	if err != nil {
		return ended{}, err
	}
	if err := w.o.Store.AddCounters(ctx, t.Ref, store.Counters{LLMCalls: 1, TokensIn: a.Usage.InputTokens,
		TokensOut: a.Usage.OutputTokens}); err != nil {
		log.Error("recording the model request that judged the reply", "error", err)
		if store.IsFailure(err) {
			return ended{}, err
		}
	}
	switch {
	case !a.Understood:
		log.Warn("the model's answer on the reply was not understood (want {\"verdict\": \"end\"} or {\"verdict\": \"continue\"}); the reply starts a new round rather than ending the conversation unseen",
			"comment", latest.ID, "answer", a.Said)
		return ended{}, nil
	case !a.End:
		log.Info("the model read the reply as asking for more; it starts a new round", "comment", latest.ID)
		return ended{}, nil
	}
	log.Info("the model read the reply as an ending", "comment", latest.ID)
	return ended{why: fmt.Sprintf("the model read @%s's reply as an ending (comment %d)", latest.Author, latest.ID),
		announce: report.EndedByModel, author: latest.Author}, nil
}

// StopAwaiting stops task ref at once when it awaits a reply: the stopped
// label added, the awaiting label taken (the forge arbitrates with a reply
// starting a round), its row stopped, a notice posted. It reports false,
// with what the task is, when it does not await a reply on the forge: the
// stop then acts at the next checkpoint of the run that holds it. A row
// this store does not have (another host's) is no error: the forge is what
// everyone reads.
func (w *Worker) StopAwaiting(ctx context.Context, ref task.Ref) (bool, string, error) {
	t, err := w.o.Forge.Get(ctx, ref)
	if err != nil {
		return false, "", fmt.Errorf("reading %s: %w", ref, err)
	}
	ls := w.o.Labels
	if ls.Awaiting == "" || !t.HasLabel(ls.Awaiting) || t.HasLabel(ls.Processing) {
		return false, "it does not await a reply", nil
	}
	ok, err := w.stopAwaiting(ctx, t, "stopped from the command line")
	if errors.Is(err, store.ErrNotFound) {
		err = nil
	}
	if !ok && err == nil {
		return false, "a reply started a round at the same moment", nil
	}
	return ok, "stopped; it no longer awaits a reply", err
}

// stopAwaiting is the stopAwaiting row for t: false when a reply took the
// task first (the stopped label then stops that round at its first
// checkpoint).
func (w *Worker) stopAwaiting(ctx context.Context, t task.Task, why string) (bool, error) {
	log := w.log(t.Ref)
	tr := lifecycle[stopAwaiting]
	f := ending{ref: t.Ref, log: log, labels: t.Labels, reason: why}
	all, err := w.relabel(ctx, f, tr)
	if errors.Is(err, forge.ErrLabelAbsent) {
		log.Info("a round took the task before the stop; the stopped label stops it at its first checkpoint")
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stopping %s: %w", t.Ref, err)
	}
	if !all {
		log.Warn("could not remove every stale label while stopping")
	}
	w.settle(f, tr)
	serr := w.setStatus(ctx, t.Ref, tr.to, why)
	body, err := report.StoppedAwaiting(w.o.Lang, w.o.Labels.Bot)
	if err == nil {
		post := w.poster(t.Ref, log)
		err = post.PostAll(ctx, engine.Key{}, body)
	}
	if err != nil {
		log.Error("posting the stop", "error", err)
	}
	log.Info("task "+string(stopAwaiting), "status", tr.to, "reason", why)
	return true, serr
}
