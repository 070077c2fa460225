package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// Run is one run of a task: what its policy may read of it.
type Run struct {
	e   *Engine
	in  Input
	p   Policy
	st  *checkpoint
	log *slog.Logger
	// refused is why the last call was refused as an unusable reply ("" once
	// a call was taken): the reason a run of refusals ends with.
	refused string
	counted map[string]int // token counts of texts, for this run
	// cutOff is set when the run resumes a step in the middle of its calls:
	// the call in hand was started by the process that stopped, and whether
	// it took effect is unknown. The next call run says so.
	cutOff bool
}

// Input is the task being run.
func (r *Run) Input() Input { return r.in }

// Counts are the run's counters now.
func (r *Run) Counts() Counts { return r.st.Counts }

// Log is the run's logger.
func (r *Run) Log() *slog.Logger { return r.log }

// Run works on the task under policy p until it ends (an Outcome) or a
// system error occurs (returned, with the counts so far). It resumes from
// the task's checkpoint when there is one that p can resume.
func (e *Engine) Run(ctx context.Context, in Input, p Policy) (Outcome, error) {
	ctx = llm.WithTask(ctx, in.Task.Ref.String()) // a recording of the model's traffic files it under the task
	r, err := e.begin(ctx, in, p)
	if err != nil {
		return Outcome{}, err
	}
	if in.Watch != nil {
		defer in.Watch.Close()
	}
	if f := r.st.Final; f != nil {
		r.log.Info("run had already ended; returning its outcome", "end", f.End)
		if !r.st.Announced {
			r.announce(ctx)
		}
		out := *f
		out.Keys = r.st.Keys
		return out, nil
	}
	for {
		out, err := r.step(ctx)
		if err == nil && out != nil {
			out, err = r.checked(ctx, out)
		}
		if err != nil {
			return r.complete(Outcome{}), err
		}
		if out != nil {
			return r.end(ctx, *out)
		}
	}
}

// begin loads the checkpoint, or starts a new conversation.
func (e *Engine) begin(ctx context.Context, in Input, p Policy) (*Run, error) {
	ref := in.Task.Ref
	r := &Run{e: e, in: in, p: p, log: e.o.Logger.With("task", ref.String(), "mode", p.Mode()), counted: map[string]int{}}
	cp, ok, err := e.o.State.LoadCheckpoint(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("loading checkpoint of %s: %w", ref, err)
	}
	if ok {
		if out := legacyFinal(cp.Data); out != nil {
			// Finished under the per-loop format, its labels not yet set:
			// the outcome stands, and the task is not run again.
			r.log.Info("run had already ended (older checkpoint format); returning its outcome", "end", out.End)
			r.st = &checkpoint{Version: checkpointVersion, Mode: p.Mode(), Final: out, Announced: true,
				Keys: Keys{Run: newRunID(), Doubt: true}}
			return r, nil
		}
		st, why := resumable(cp.Data, p.Mode())
		if why == "" {
			r.st = st
			// Until it saves, the run does again what the process that
			// saved this checkpoint did after it: its comments may be
			// on the forge already (keys.go).
			st.Keys.Doubt, st.Keys.Since = true, st.SavedAt
			if st.Keys.Run == "" { // saved before comments had keys
				st.Keys.Run = newRunID()
			}
			if err := r.offer(true); err != nil {
				return nil, err
			}
			err := p.Begin(ctx, r, st.Policy)
			if err == nil {
				r.log.Info("resuming from checkpoint", "calls", st.Calls, "pending", st.Pending != nil)
				// A call whose server's question was put off did nothing:
				// it is made again, not cut off.
				r.cutOff = st.Pending != nil && st.Pending.Posted && st.Pending.Executed < len(st.Pending.Calls) && st.Asked == nil
				r.roundEvent()
				if st.Asked != nil {
					if err := r.answer(ctx); err != nil {
						return nil, err
					}
				}
				return r, nil
			}
			if !errors.Is(err, ErrUnresumable) {
				return nil, fmt.Errorf("resuming %s: %w", ref, err)
			}
			why = err.Error()
		}
		r.log.Warn("ignoring a checkpoint this run cannot resume; starting over", "reason", why)
	}
	first, err := TaskPrompt(in.Task, in.Comments, in.BotName, in.Rounds, in.Setup)
	if err != nil {
		return nil, err
	}
	r.st = &checkpoint{Version: checkpointVersion, Mode: p.Mode(), Mark: max(in.Mark, MarkOf(in.Comments)),
		Counts: Counts{Started: e.o.Now(), Ignored: in.Ignored}, Keys: Keys{Run: newRunID()},
		Messages: []llm.Message{{Role: llm.System, Content: p.System()}, {Role: llm.User, Content: first}}}
	if err := r.offer(false); err != nil {
		return nil, err
	}
	if err := p.Begin(ctx, r, nil); err != nil {
		return nil, err
	}
	r.roundEvent()
	return r, nil
}

// step makes one model request and acts on its reply, or finishes the
// reply in hand. A non-nil Outcome ends the run.
func (r *Run) step(ctx context.Context) (*Outcome, error) {
	st := r.st
	if st.Checking != nil { // a done whose checks had not decided
		out := st.Checking.Out
		return &out, nil
	}
	if q := st.Asked; q != nil { // a reply to it could not be read: asked again
		return &Outcome{End: Asked, Question: q, Reason: "a server's question awaits an answer"}, nil
	}
	if st.Pending != nil {
		return r.act(ctx)
	}
	if why := CallLimit(st.Calls+st.Summaries, r.e.o.MaxCalls); why != "" {
		return &Outcome{End: Failed, Reason: why}, nil
	}
	text, out, err := r.p.Next(ctx)
	if err != nil || out != nil {
		return out, err
	}
	if text != "" {
		r.say(text)
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	if out, err := r.listen(ctx); out != nil || err != nil {
		return out, err
	}
	return r.ask(ctx)
}

// listen makes the checkpoint check: new comments join the conversation
// (saved before the next request), and a pause, stop or shutdown ends the
// run here.
func (r *Run) listen(ctx context.Context) (*Outcome, error) {
	if r.in.Watch == nil {
		return nil, nil
	}
	st := r.st
	at := r.at()
	at.Turn = st.Calls + 1
	s, err := r.in.Watch.At(ctx, at, st.Mark)
	if err != nil {
		return nil, err
	}
	changed := s.Message != "" || s.Mark != st.Mark || s.Ignored != 0
	st.Mark = s.Mark
	st.Ignored += s.Ignored
	if s.Message != "" {
		r.say(s.Message)
		r.heard(ctx, s.Applied)
	}
	if s.Message != "" || s.Ignored != 0 {
		r.record(ctx, heardEvent(s, r.at().Phase))
	}
	if changed {
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	if s.End != "" {
		return &Outcome{End: s.End, Reason: s.Reason}, nil
	}
	return nil, nil
}

// ask makes one model request and carries out its reply.
func (r *Run) ask(ctx context.Context) (*Outcome, error) {
	st, ref := r.st, r.in.Task.Ref
	defs := r.defs()
	con, err := r.constraint()
	if err != nil {
		return nil, err
	}
	if con.finish != nil {
		defs = append(defs, *con.finish)
	}
	counted := budgeted(defs, con.format)
	if err := r.fit(ctx, false, counted); err != nil {
		return nil, err
	}
	req := llm.Request{Messages: st.Messages, Tools: defs, Format: con.format, ToolChoice: con.choice,
		MaxTokens: r.replyLimit(counted)}
	began := time.Now()
	resp, err := r.e.o.LLM.Chat(ctx, req)
	if errors.Is(err, llm.ErrContextLength) && r.e.o.Budget.ContextLength > 0 {
		// The server counts more than the engine did: compact harder, once.
		r.log.Warn("the server refused the request as too long; compacting and retrying", "error", err)
		if ferr := r.fit(ctx, true, counted); ferr != nil {
			return nil, ferr
		}
		req.Messages, req.MaxTokens = st.Messages, r.replyLimit(counted)
		resp, err = r.e.o.LLM.Chat(ctx, req)
	}
	ev := store.Event{Kind: store.EventRequest, Phase: r.at().Phase, Millis: time.Since(began).Milliseconds(),
		TokensIn: resp.Usage.InputTokens, TokensOut: resp.Usage.OutputTokens}
	if err != nil && !errors.Is(err, llm.ErrEmptyReply) {
		ev.Title, ev.Error = "the request failed: "+err.Error(), true
		r.record(ctx, ev)
		r.trouble(ctx, err.Error(), false)
		if serr := r.save(ctx); serr != nil {
			r.log.Error("saving checkpoint after a model error", "error", serr)
		}
		return nil, fmt.Errorf("model request %d for %s: %w", st.Calls+1, ref, err)
	}
	st.Calls++
	st.TokensIn += resp.Usage.InputTokens
	st.TokensOut += resp.Usage.OutputTokens
	if r.e.o.Budget.ContextLength > 0 {
		r.calibrate(st.Messages, counted, resp.Usage)
	}
	if err := r.e.o.State.AddCounters(ctx, ref, store.Counters{LLMCalls: 1,
		TokensIn: resp.Usage.InputTokens, TokensOut: resp.Usage.OutputTokens}); err != nil {
		return nil, fmt.Errorf("recording model usage of %s: %w", ref, err)
	}
	if err != nil { // a 200 without a message is an unusable reply, not an outage
		ev.Title, ev.Error = "unusable reply: the reply was empty", true
		r.record(ctx, ev)
		return r.unusable(ctx, llm.Message{}, "the reply was empty")
	}
	msg := resp.Message
	msg.Role = llm.Assistant
	msg.Content = StripThink(msg.Content)
	reply, act, finished, err := r.read(resp, con)
	r.record(ctx, requestEvent(ev, act, err))
	if re, ok := errors.AsType[*ReplyError](err); ok && reply.Cut {
		kept := msg
		kept.ToolCalls = nil
		return r.unusable(ctx, msg, r.cutReason(re.Reason, req.MaxTokens, counted, kept))
	}
	st.Raised = 0
	if re, ok := errors.AsType[*ReplyError](err); ok {
		return r.unusable(ctx, msg, re.Reason)
	}
	if err != nil {
		return nil, err
	}
	if reply.Said != "" { // read from the reasoning: the conversation keeps only that part
		msg.Content = strings.TrimSpace(msg.Content + "\n\n" + reply.Said)
	}
	if len(act.Calls) == 0 {
		st.Unusable = 0 // a step with calls is usable once a call is taken
	}
	st.Messages = append(st.Messages, msg)
	if finished {
		st.Messages = append(st.Messages, r.e.ts.finishAnswer(msg))
	}
	st.Pending = act
	if err := r.save(ctx); err != nil {
		return nil, err
	}
	return r.act(ctx)
}

// read decodes a reply and has the policy read it: the reply (Cut: it was
// cut at the output token limit; Said: the part of the reasoning it was
// read from) and the act; finished says it was the finish tool's call
// alone (constrain.go), which the conversation must answer. The decoder's
// hint goes with the act the first time its kind comes up in the run only.
func (r *Run) read(resp llm.Response, con constraint) (reply Reply, act *Act, finished bool, err error) {
	if con.finish != nil {
		reply, finished, err = r.e.ts.finished(resp.Message, con.expect)
	}
	if !finished {
		reply, err = r.e.ts.DecodeResponse(resp)
	}
	if err != nil {
		return reply, nil, finished, err
	}
	act, err = r.p.Read(reply)
	if act != nil && reply.Hint != "" && !slices.Contains(r.st.Hinted, reply.hintKind) {
		act.Hint = reply.Hint
		r.st.Hinted = append(r.st.Hinted, reply.hintKind)
	}
	return reply, act, finished, err
}

// unusable answers a reply that cannot be used with a correction naming
// what was wrong, or ends the run after MaxUnusable in a row.
func (r *Run) unusable(ctx context.Context, msg llm.Message, reason string) (*Outcome, error) {
	st, max := r.st, r.e.o.MaxUnusable
	st.Unusable++
	at := r.at()
	r.log.Warn("unusable model reply", "phase", at.Phase, "call", st.Calls, "count", st.Unusable, "reason", reason)
	msg.ToolCalls = nil // unanswered native calls would make the next request invalid
	if strings.TrimSpace(msg.Content) != "" {
		st.Messages = append(st.Messages, msg)
	}
	r.trouble(ctx, reason, st.Unusable < max)
	if why := UnusableLimit(st.Unusable, max, at.Phase, reason); why != "" {
		return &Outcome{End: Failed, Reason: why}, nil
	}
	text, err := r.p.Correction(reason)
	if err != nil {
		return nil, err
	}
	r.say(text)
	return nil, r.save(ctx)
}

// act carries out the reply in hand: its comment once, its tool calls one by
// one, then the policy's next move; checkpointing after each.
func (r *Run) act(ctx context.Context) (*Outcome, error) {
	st, a := r.st, r.st.Pending
	if !a.Posted { // saved before: its comment's key is fixed (keys.go)
		if err := r.p.Post(ctx, a); err != nil {
			return nil, err
		}
		a.Posted = true
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	for a.Executed < len(a.Calls) {
		if err := r.call(ctx, a, a.Calls[a.Executed]); err != nil {
			return nil, err
		}
		if q := st.Asked; q != nil { // the call is in hand until it is answered
			if err := r.save(ctx); err != nil {
				return nil, err
			}
			return &Outcome{End: Asked, Question: q, Reason: "a server's question awaits an answer"}, nil
		}
		// An answer was given for the call in hand: a later call that
		// asks the same is asked again.
		st.Answers = nil
		a.Executed++
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	st.Pending = nil
	if a.Hint != "" {
		r.say(a.Hint) // how to reply next time, after the results
	}
	if len(a.Calls) > 0 {
		last := "its tool calls were refused"
		if r.refused != "" {
			last = "its tool call was refused: " + r.refused
		}
		if why := UnusableLimit(st.Unusable, r.e.o.MaxUnusable, r.at().Phase, last); why != "" {
			return &Outcome{End: Failed, Reason: why}, nil
		}
	}
	out, err := r.p.Apply(ctx, a)
	if err != nil || out != nil {
		return out, err
	}
	return nil, r.save(ctx)
}

// call runs one tool call, or answers the policy's refusal; a tool error
// becomes the model's next input, only a system error ends the run.
func (r *Run) call(ctx context.Context, a *Act, c ToolCall) error {
	st, ref := r.st, r.in.Task.Ref
	rerun := r.cutOff && c.Tool != SearchTool // a search changes nothing outside
	r.cutOff = false
	if c.Tool == FinishTool && r.e.FinishFn() != "" {
		st.Messages = append(st.Messages, r.e.ts.finishAmongOthers(c))
		return nil
	}
	if reason, unusable := r.refuse(c, a); reason != "" {
		r.refused = ""
		if unusable {
			st.Unusable++
			r.refused = reason
		} else {
			st.Unusable = 0
		}
		r.log.Info("tool call refused", "tool", c.Tool, "reason", reason)
		r.record(ctx, store.Event{Kind: store.EventCall, Phase: r.at().Phase, Title: c.Tool + " (refused)",
			Args: cutArgs(c.Args), Text: reason, Error: true})
		st.Messages = append(st.Messages, r.e.ts.Refusal(c, reason))
		return nil
	}
	st.Unusable, r.refused = 0, ""
	if rerun {
		r.log.Warn("running again a tool call cut off by a restart", "tool", c.Tool)
	}
	ask := &asker{answers: slices.Clone(st.Answers), can: r.in.Questions}
	began := time.Now()
	res, err := r.run(toolhost.WithAsker(ctx, ask), c)
	if err != nil {
		return fmt.Errorf("calling %s for %s: %w", c.Tool, ref, err)
	}
	asked, used := ask.result()
	if asked != nil {
		// Its result is dropped: the call is made again once the people
		// on the task have answered.
		r.log.Info("a server asked a question during a call; putting it to the people on the task", "tool", c.Tool, "server", asked.Server)
		st.Asked = &Question{Question: *asked, Mark: st.Mark}
		r.record(ctx, store.Event{Kind: store.EventQuestion, Phase: r.at().Phase, Title: asked.Server + " asked a question during " + c.Tool,
			Text: asked.Message})
		return nil
	}
	if len(used) > 0 {
		res.Text = answeredNote(used) + res.Text
	}
	st.ToolCalls++
	r.used(c.Tool)
	if err := r.e.o.State.AddCounters(ctx, ref, store.Counters{ToolCalls: 1}); err != nil {
		return fmt.Errorf("recording tool call of %s: %w", ref, err)
	}
	r.called(ctx, c, res)
	r.noteRan(res.Ran)
	var warn int
	st.Repeats, warn = st.Repeats.Note(c.Key())
	msg, err := r.e.ts.ResultMessage(c, res, warn, rerun)
	if err != nil {
		return err
	}
	r.log.Info("tool call", "phase", r.at().Phase, "tool", c.Tool, "is_error", res.IsError, "bytes", res.Bytes, "truncated", res.Truncated)
	r.record(ctx, store.Event{Kind: store.EventCall, Phase: r.at().Phase, Title: c.Tool, Args: cutArgs(c.Args), Text: res.Text,
		Error: res.IsError, Millis: time.Since(began).Milliseconds()})
	st.Messages = append(st.Messages, msg)
	return nil
}

// run runs a call: the catalog search here, any other tool on its server
// (through the run's own Caller, if it has one).
func (r *Run) run(ctx context.Context, c ToolCall) (toolhost.Result, error) {
	if c.Tool != SearchTool {
		if r.in.Tools != nil {
			return r.in.Tools.Call(ctx, c.Tool, c.Args)
		}
		return r.e.o.Tools.Call(ctx, c.Tool, c.Args)
	}
	var args struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(c.Args, &args); err != nil || strings.TrimSpace(args.Query) == "" {
		return toolhost.Result{Text: `find_tools takes {"query": "words describing the tool"}`, IsError: true}, nil
	}
	text, err := r.search(args.Query)
	return toolhost.Result{Text: text, Bytes: len(text)}, err
}

// say adds a user message, joined to the last one when that is a user
// message too (some chat templates want roles to alternate).
func (r *Run) say(text string) {
	msgs := r.st.Messages
	if last := &msgs[len(msgs)-1]; last.Role == llm.User && len(last.ToolCalls) == 0 {
		last.Content += "\n\n" + text
		return
	}
	r.st.Messages = append(msgs, llm.Message{Role: llm.User, Content: text})
}

// complete fills in the run's counts and its comments' keys.
func (r *Run) complete(out Outcome) Outcome {
	out.Calls, out.Ignored, out.Mark = r.st.Calls, r.st.Ignored, r.st.Mark
	out.Ran = slices.Clone(r.st.Ran)
	out.Keys = r.st.Keys
	return out
}

// end ends the run. A final outcome is saved first, so a resume returns it
// without more work, then announced; once saved it is returned even if a
// later save fails: a finished task is never reported as a system error.
func (r *Run) end(ctx context.Context, out Outcome) (Outcome, error) {
	out = r.complete(out)
	r.record(ctx, store.Event{Kind: store.EventEnd, Title: string(out.End), Text: out.Reason})
	if !out.Final() {
		r.log.Info("run ends at a checkpoint", "end", out.End, "reason", out.Reason, "calls", out.Calls)
		r.halt(ctx, out)
		return out, nil
	}
	r.ending(&out)
	r.st.Final = &out
	if err := r.save(ctx); err != nil {
		return Outcome{}, err
	}
	r.log.Info("run ended", "end", out.End, "calls", out.Calls, "tool_calls", r.st.ToolCalls)
	r.announce(ctx)
	out.Keys = r.st.Keys // the closing comment's included
	return out, nil
}

// announce has the policy report the end, once.
func (r *Run) announce(ctx context.Context) {
	r.p.Announce(ctx, *r.st.Final)
	r.st.Announced = true
	if err := r.save(ctx); err != nil {
		r.log.Error("saving checkpoint after announcing the end", "error", err)
	}
}

// save writes the checkpoint.
func (r *Run) save(ctx context.Context) error {
	ref := r.in.Task.Ref
	pol, err := json.Marshal(r.p.State())
	if err != nil {
		return fmt.Errorf("encoding the %s state of %s: %w", r.p.Mode(), ref, err)
	}
	r.st.Policy = pol
	r.st.SavedAt = time.Now() // the wall clock, as the forge stamps comments (not Options.Now, a test's)
	data, err := json.Marshal(r.st)
	if err != nil {
		return fmt.Errorf("encoding checkpoint of %s: %w", ref, err)
	}
	if err := r.e.o.State.SaveCheckpoint(ctx, ref, store.Checkpoint{Step: r.st.Calls, Data: data}); err != nil {
		return fmt.Errorf("saving checkpoint of %s: %w", ref, err)
	}
	r.st.Keys.Doubt = false // what it posts from here on is new
	return nil
}
