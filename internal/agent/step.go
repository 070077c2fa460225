package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// run is one Run's mutable state.
type run struct {
	a   *Agent
	in  Input
	st  *checkpoint
	log *slog.Logger
}

// ask makes one model request and records what it asked for as pending.
// A non-nil Outcome ends the task (too many unusable replies).
func (r *run) ask(ctx context.Context) (*Outcome, error) {
	a, st, ref := r.a, r.st, r.in.Task.Ref
	resp, err := a.o.LLM.Chat(ctx, llm.Request{Messages: st.Messages, Tools: a.ts.Defs()})
	if errors.Is(err, llm.ErrEmptyReply) {
		// A 200 without a message is an unusable reply, not an outage.
		st.Turn++
		if err := a.o.State.AddCounters(ctx, ref, store.Counters{LLMCalls: 1}); err != nil {
			return nil, fmt.Errorf("recording model usage of %s: %w", ref, err)
		}
		return r.unusable(ctx, "the reply was empty")
	}
	if err != nil {
		return nil, fmt.Errorf("model request %d for %s: %w", st.Turn+1, ref, err)
	}
	st.Turn++
	if err := a.o.State.AddCounters(ctx, ref, store.Counters{LLMCalls: 1,
		TokensIn: resp.Usage.InputTokens, TokensOut: resp.Usage.OutputTokens}); err != nil {
		return nil, fmt.Errorf("recording model usage of %s: %w", ref, err)
	}
	msg := resp.Message
	msg.Role = llm.Assistant
	msg.Content = StripThink(msg.Content)
	var action Action
	if a.o.FunctionCalling {
		action, err = parseNative(resp.Message, a.ts.names)
	} else {
		action, err = parseText(resp.Message.Content)
	}
	var bad *ReplyError
	if errors.As(err, &bad) {
		msg.ToolCalls = nil // unanswered native calls would make the next request invalid
		st.Messages = append(st.Messages, msg)
		return r.unusable(ctx, bad.Reason)
	}
	if err != nil {
		return nil, err
	}
	st.Unparsable = 0
	st.Messages = append(st.Messages, msg)
	st.Pending = &pending{Action: action}
	return nil, r.save(ctx)
}

// unusable answers an unusable reply with a correction, or ends the task
// after MaxUnparsable in a row.
func (r *run) unusable(ctx context.Context, reason string) (*Outcome, error) {
	st, max := r.st, r.a.o.MaxUnparsable
	st.Unparsable++
	r.log.Warn("unusable model reply", "turn", st.Turn, "count", st.Unparsable, "reason", reason)
	if st.Unparsable >= max {
		out, err := r.end(ctx, Outcome{Status: task.Failed, Turns: st.Turn,
			Reason: fmt.Sprintf("the model sent %d unusable replies in a row; the last: %s", st.Unparsable, reason)})
		return &out, err
	}
	text, err := correctionPrompt(reason, r.a.o.FunctionCalling, st.Unparsable, max)
	if err != nil {
		return nil, err
	}
	st.Messages = append(st.Messages, llm.Message{Role: llm.User, Content: text})
	return nil, r.save(ctx)
}

// act carries out the pending reply: post its comment once, run its tool
// calls one by one, checkpointing after each external action.
func (r *run) act(ctx context.Context) (*Outcome, error) {
	st, p := r.st, r.st.Pending
	if !p.Posted {
		body := strings.TrimSpace(p.Action.Comment)
		if p.Action.Done && st.Ignored > 0 {
			body += fmt.Sprintf("\n\n(%d comment(s) from people who may not steer this task were not read.)", st.Ignored)
		}
		if body != "" {
			if err := r.in.Post.Post(ctx, body); err != nil {
				return nil, fmt.Errorf("posting step comment on %s: %w", r.in.Task.Ref, err)
			}
		}
		p.Posted = true
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	if p.Action.Done {
		st.Pending = nil
		out, err := r.end(ctx, Outcome{Status: task.Done, Comment: p.Action.Comment, Turns: st.Turn})
		return &out, err
	}
	for p.Executed < len(p.Action.Calls) {
		if err := r.call(ctx, p.Action.Calls[p.Executed]); err != nil {
			return nil, err
		}
		p.Executed++
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	st.Pending = nil
	return nil, r.save(ctx)
}

// call runs one tool call; a tool error becomes the model's next input, only
// a cancelled context ends the run.
func (r *run) call(ctx context.Context, c ToolCall) error {
	ref := r.in.Task.Ref
	res, err := r.a.o.Tools.Call(ctx, c.Tool, c.Args)
	if err != nil {
		return fmt.Errorf("calling %s for %s: %w", c.Tool, ref, err)
	}
	if err := r.a.o.State.AddCounters(ctx, ref, store.Counters{ToolCalls: 1}); err != nil {
		return fmt.Errorf("recording tool call of %s: %w", ref, err)
	}
	msg, err := r.a.ts.ResultMessage(c, res, r.st.Repeats.Note(c.Key()))
	if err != nil {
		return err
	}
	r.log.Info("tool call", "tool", c.Tool, "is_error", res.IsError, "bytes", res.Bytes, "truncated", res.Truncated)
	r.st.Messages = append(r.st.Messages, msg)
	return nil
}

// steer asks the task's Watch what changed: new comments join the
// conversation (saved before the next request), and a pause or stop ends
// the run here.
func (r *run) steer(ctx context.Context) error {
	if r.in.Watch == nil {
		return nil
	}
	st := r.st
	s, err := r.in.Watch.At(ctx, Step{Turn: st.Turn + 1}, st.Mark)
	if err != nil {
		return err
	}
	if s.Message != "" {
		st.Messages = append(st.Messages, llm.Message{Role: llm.User, Content: s.Message})
	}
	if s.Message != "" || s.Mark != st.Mark || s.Ignored != st.Ignored {
		st.Mark, st.Ignored = s.Mark, s.Ignored
		if err := r.save(ctx); err != nil {
			return err
		}
	}
	switch {
	case s.Stop:
		return fmt.Errorf("%w: %s", ErrStopped, s.Reason)
	case s.Pause:
		return fmt.Errorf("%w: %s", ErrPaused, s.Reason)
	}
	return nil
}

// end records the run's outcome in the checkpoint, so that a resume after a
// crash before the task's labels were set does not start working again.
func (r *run) end(ctx context.Context, out Outcome) (Outcome, error) {
	out.Ignored = r.st.Ignored
	r.st.Final = &out
	return out, r.save(ctx)
}

func (r *run) save(ctx context.Context) error {
	data, err := json.Marshal(r.st)
	if err != nil {
		return fmt.Errorf("encoding checkpoint of %s: %w", r.in.Task.Ref, err)
	}
	if err := r.a.o.State.SaveCheckpoint(ctx, r.in.Task.Ref, store.Checkpoint{Step: r.st.Turn, Data: data}); err != nil {
		return fmt.Errorf("saving checkpoint of %s: %w", r.in.Task.Ref, err)
	}
	return nil
}
