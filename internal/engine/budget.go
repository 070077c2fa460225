package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/store"
)

// Budget keeps every request inside the model's context window: a request
// is counted before it is sent, and the conversation is compacted when the
// next request would pass CompactAt of the window less the reply reserve.
type Budget struct {
	ContextLength int         // the model's window in tokens; 0: unknown, nothing is compacted
	Reserve       int         // tokens kept for the reply (max_token)
	CompactAt     float64     // share of the budget that starts a compaction; 0 → 0.7
	Counter       llm.Counter // how tokens are counted; nil: llm.Estimate
}

// limit is what a request may hold: the window less the reply reserve.
func (b Budget) limit() int { return b.ContextLength - b.Reserve }

// threshold is the size a compaction brings a conversation under.
func (b Budget) threshold() int {
	at := b.CompactAt
	if at <= 0 || at > 1 {
		at = 0.7
	}
	return int(float64(b.limit()) * at)
}

// Compaction's shape: the newest messages kept verbatim, and what is stubbed
// before them.
const (
	keepTail   = 6   // newest messages never stubbed or summarised
	stubOver   = 400 // bytes: an older message longer than this is stubbed
	stubPrefix = 160 // bytes of a stubbed message kept, so it says what it was
	noteMark   = "[Context compacted to fit the model's context window."
)

// messageOverhead is what a message costs beyond its text (role, framing).
const messageOverhead = 4

// tokens counts a request as the model will see it (its messages, and tools
// tokens of tool definitions), scaled by what the server reported for
// earlier requests when it counted more.
func (r *Run) tokens(msgs []llm.Message, tools int) int {
	n := r.rawTokens(msgs) + tools
	if r.st.Scale > 1 {
		n = int(float64(n)*r.st.Scale) + 1
	}
	return n
}

func (r *Run) rawTokens(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		n += messageOverhead + r.count(m.Content)
		for _, c := range m.ToolCalls {
			n += messageOverhead + r.count(c.Name) + r.count(string(c.Arguments))
		}
	}
	return n
}

// toolTokens is what native tool definitions cost in a request.
func (r *Run) toolTokens(defs []llm.Tool) int {
	n := 0
	for _, t := range defs {
		n += messageOverhead + r.count(t.Name) + r.count(t.Description) + r.count(string(t.Parameters))
	}
	return n
}

// count counts text once per run: a conversation is counted again before
// every request, and only its new messages are new text.
func (r *Run) count(text string) int {
	if text == "" {
		return 0
	}
	if n, ok := r.counted[text]; ok {
		return n
	}
	n := r.e.o.Budget.Counter.Count(text)
	if len(r.counted) > 4096 {
		clear(r.counted) // compaction replaced most of what it held
	}
	r.counted[text] = n
	return n
}

// calibrate scales later counts by what the server reported for a request
// it counted more of than the engine did.
func (r *Run) calibrate(sent []llm.Message, defs []llm.Tool, u llm.Usage) {
	if u.InputTokens <= 0 {
		return
	}
	est := r.rawTokens(sent) + r.toolTokens(defs)
	if est > 0 && float64(u.InputTokens)/float64(est) > r.st.Scale {
		r.st.Scale = float64(u.InputTokens) / float64(est)
	}
}

// fit compacts the conversation when the next request would pass the
// threshold, down to three quarters of it so that the next turns do not
// compact again at once; with force (the server refused the last request as
// too long, so it counts more than the engine) down to half of what was
// sent, the engine's counts scaled up. It fails when even then the request
// cannot be brought under the limit: a request over the window is never
// sent.
func (r *Run) fit(ctx context.Context, force bool, defs []llm.Tool) error {
	b, st := r.e.o.Budget, r.st
	if b.ContextLength <= 0 {
		return nil
	}
	tools := r.toolTokens(defs)
	before := r.tokens(st.Messages, tools)
	if before <= b.threshold() && !force {
		return nil
	}
	target, limit := b.threshold()*3/4, b.limit()
	if force {
		st.Scale = max(st.Scale, 1) * 1.25
		target, limit = min(target, before/2), min(limit, before/2)
	}
	pinned := r.pinned()
	var msgs []llm.Message
	var cut int
	for _, keep := range []int{keepTail, keepTail - 2, 2} {
		if msgs, cut = stubbed(st.Messages, keep); r.tokens(msgs, tools) <= target {
			break
		}
	}
	// A summary only pays when what it replaces is a good part of the
	// conversation; a large newest output is cut instead (trimmed).
	summarised := false
	if r.tokens(msgs, tools) > target && cut > 2 && r.tokens(msgs[2:cut], 0) > target/4 {
		var err error
		if msgs, summarised, err = r.summarised(ctx, msgs, cut, pinned); err != nil {
			return err
		}
	}
	if !summarised && cut > 2 {
		msgs = withNote(msgs, r.noteText("Older tool outputs and long messages were shortened to a few lines."), pinned)
	}
	msgs = r.trimmed(msgs, limit, tools)
	after := r.tokens(msgs, tools)
	if after > b.limit() {
		return fmt.Errorf("the conversation of %s cannot be brought under the context window: %d tokens of a %d-token budget "+
			"(the system prompt, the tool definitions and short messages cannot be cut): raise context_length",
			r.in.Task.Ref, after, b.limit())
	}
	st.Messages = msgs
	st.Compactions++
	how := "older tool outputs and long messages shortened"
	if summarised {
		how = "the oldest part replaced by a summary"
	}
	r.record(ctx, store.Event{Kind: store.EventCompaction, Phase: r.at().Phase,
		Title: fmt.Sprintf("conversation compacted from %d to %d tokens (%s)", before, after, how)})
	r.log.Info("conversation compacted", "tokens_before", before, "tokens_after", after, "limit", b.limit(),
		"messages", len(msgs), "summarised", summarised, "forced", force)
	return nil
}

// noteText is what a compaction note says: what this compaction did, and
// the summary of earlier work, which every later note carries on.
func (r *Run) noteText(what string) string {
	if r.st.Summary == "" {
		return what
	}
	return what + "\nEarlier work, as you summarised it:\n" + r.st.Summary
}

// stubbed shortens every message before the newest keep (the system
// prompt and the task excepted) that is longer than stubOver, keeping its
// start so it says what it was; native call arguments too. It returns the
// new conversation and where the verbatim tail starts.
func stubbed(msgs []llm.Message, keep int) ([]llm.Message, int) {
	out := make([]llm.Message, len(msgs))
	copy(out, msgs)
	cut := max(2, len(out)-keep)
	for cut > 2 && cut < len(out) && out[cut].Role != llm.Assistant {
		cut-- // the tail starts with a reply: a tool result stays with its call, and roles alternate
	}
	for i := 2; i < cut; i++ {
		m := &out[i]
		if len(m.Content) > stubOver {
			m.Content = stub(m.Content)
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]llm.ToolCall, len(m.ToolCalls))
			copy(calls, m.ToolCalls)
			for j := range calls {
				if n := len(calls[j].Arguments); n > stubOver {
					calls[j].Arguments = json.RawMessage(fmt.Sprintf(`{"elided":"%d bytes of arguments, removed to fit the context window"}`, n))
				}
			}
			m.ToolCalls = calls
		}
	}
	return out, cut
}

func stub(s string) string {
	head := s[:stubPrefix]
	for len(head) > 0 && !isRuneStart(s[len(head)]) {
		head = head[:len(head)-1]
	}
	return fmt.Sprintf("%s… [%d more bytes elided to fit the context window]", head, len(s)-len(head))
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// withNote ends the task message with the note saying the conversation was
// compacted, and what the policy must keep in view (planning: the plan and
// the action in hand); an earlier note is replaced. The note joins the task
// message, so user and assistant messages still alternate.
func withNote(msgs []llm.Message, what, pinned string) []llm.Message {
	text := noteMark + " " + what + "]"
	if pinned != "" {
		text += "\n\n" + pinned
	}
	out := append([]llm.Message(nil), msgs...)
	task := out[1].Content
	if i := strings.Index(task, "\n\n"+noteMark); i >= 0 {
		task = task[:i]
	}
	out[1].Content = task + "\n\n" + text
	return out
}

// summarised replaces the messages between the task and the verbatim tail
// with a summary the model writes in one extra request, of them and of the
// earlier summary. It reports false, changing nothing, when that request
// fails (the caller keeps the shortened messages); only a cancelled
// context is an error.
func (r *Run) summarised(ctx context.Context, msgs []llm.Message, cut int, pinned string) ([]llm.Message, bool, error) {
	span := msgs[2:cut]
	var b strings.Builder
	if r.st.Summary != "" {
		b.WriteString("Your earlier summary: " + r.st.Summary + "\n")
	}
	for _, m := range span {
		b.WriteString(m.Role + ": " + m.Content + "\n")
		for _, c := range m.ToolCalls {
			b.WriteString("  call " + c.Name + " " + string(c.Arguments) + "\n")
		}
	}
	text := b.String()
	// The request must fit: keep the newest part of the span.
	for max(r.e.o.Budget.limit()/2, 256) < r.count(text) && len(text) > 1024 {
		half := len(text) / 2
		for half < len(text) && !isRuneStart(text[half]) {
			half++
		}
		text = "(earlier part cut)\n" + text[half:]
	}
	req := llm.Request{MaxTokens: summaryTokens, Messages: []llm.Message{
		{Role: llm.System, Content: "You summarise a coding agent's work for the agent itself."},
		{Role: llm.User, Content: "Summarise this part of your work on the task in at most 200 words: what you looked at, what you changed, what failed, what you learned. Plain text.\n\n" + text},
	}}
	resp, err := r.e.o.LLM.Chat(ctx, req)
	if ctx.Err() != nil {
		return msgs, false, ctx.Err()
	}
	summary := strings.TrimSpace(StripThink(resp.Message.Content))
	if err == nil {
		r.st.Summaries++
		r.st.TokensIn += resp.Usage.InputTokens
		r.st.TokensOut += resp.Usage.OutputTokens
		if cerr := r.e.o.State.AddCounters(ctx, r.in.Task.Ref, store.Counters{LLMCalls: 1,
			TokensIn: resp.Usage.InputTokens, TokensOut: resp.Usage.OutputTokens}); cerr != nil {
			r.log.Error("recording the summary's model usage", "error", cerr)
		}
	}
	if err != nil || summary == "" {
		r.log.Warn("summarising the conversation failed; keeping it shortened instead", "error", err)
		return msgs, false, nil
	}
	r.st.Summary = summary
	kept := append(append([]llm.Message(nil), msgs[:2]...), msgs[cut:]...)
	return withNote(kept, r.noteText(fmt.Sprintf("%d earlier messages were replaced by the summary below.", len(span))), pinned), true, nil
}

// summaryTokens bounds the summary's reply (200 words asked for).
const summaryTokens = 600

// trimmed cuts half out of the middle of the longest message (never the
// system prompt, the task last) until the conversation is under limit: the
// newest tool output can alone be larger than a small window.
func (r *Run) trimmed(msgs []llm.Message, limit, tools int) []llm.Message {
	for range 64 {
		if r.tokens(msgs, tools) <= limit {
			return msgs
		}
		// The task (which ends with the compaction note) is cut last.
		longest := 1
		for i := 2; i < len(msgs); i++ {
			if len(msgs[i].Content) >= 2*stubPrefix && (longest == 1 || len(msgs[i].Content) > len(msgs[longest].Content)) {
				longest = i
			}
		}
		c := msgs[longest].Content
		if len(c) < 2*stubPrefix {
			return msgs
		}
		// Cut the middle: the start says what the message is, the end holds
		// the newest (for the task: its newest comments and the note).
		q := len(c) / 4
		head, tail := q, len(c)-q
		for head > 0 && !isRuneStart(c[head]) {
			head--
		}
		for tail < len(c) && !isRuneStart(c[tail]) {
			tail++
		}
		msgs = append([]llm.Message(nil), msgs...)
		msgs[longest].Content = c[:head] + fmt.Sprintf("\n… [%d bytes cut here to fit the context window] …\n", tail-head) + c[tail:]
	}
	return msgs
}
