package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/sanitize"
)

// Asked is the model's answer on a reply JudgeReply was unsure of.
type Asked struct {
	// End: the model said the reply asks for nothing more. False also
	// when the answer was not understood.
	End bool
	// Understood: the answer was exactly {"verdict": "end"} or
	// {"verdict": "continue"}; a reply the model's answer did not settle
	// continues (a request is never dropped on a garbled answer).
	Understood bool
	// Said is the answer as the model gave it, cut to a line, for the log.
	Said  string
	Usage llm.Usage
}

// askSystem is the one instruction of the request AskReply makes.
const askSystem = `You read one reply that a person wrote on an issue to a coding agent, after the agent finished a piece of work and asked for their response. Decide whether the reply asks the agent for anything more: a change, an addition, a fix, an answer to a question, or more work of any kind, now or after something else. Text the person quoted from the agent's own comment is not their request.
Answer with this JSON object and nothing else:
{"verdict": "continue"} when the reply asks for anything more;
{"verdict": "end"} when it only thanks, approves or closes the conversation.`

// askSchema holds the answer to the two verdicts on a server that enforces
// a reply schema (llm.Request.Format).
var askSchema = json.RawMessage(`{"type":"object","properties":{"verdict":{"type":"string","enum":["end","continue"]}},` +
	`"required":["verdict"],"additionalProperties":false}`)

// askTokens bounds the answer: a dozen tokens, with room for a server's
// preamble, which then makes it a garbled answer rather than a long one.
const askTokens = 64

// AskReply asks m, in one small request, whether reply (the author's
// words, sanitised and fenced: it is untrusted) ends the conversation. With
// constrained the answer's schema goes with the request. Its error is a
// request that failed (the reply is judged again on the next pass); an
// answer that is not exactly one of the two verdicts is returned not
// understood.
func AskReply(ctx context.Context, m llm.Client, reply string, constrained bool) (Asked, error) {
	req := llm.Request{MaxTokens: askTokens, Messages: []llm.Message{
		{Role: llm.System, Content: askSystem},
		{Role: llm.User, Content: sanitize.Fence("the reply", reply)},
	}}
	if constrained {
		req.Format = askSchema
	}
	resp, err := m.Chat(ctx, req)
	if errors.Is(err, llm.ErrEmptyReply) {
		return Asked{Said: "(no message)"}, nil // answered, with nothing understood
	}
	if err != nil {
		return Asked{}, fmt.Errorf("asking the model whether the reply ends the conversation: %w", err)
	}
	end, ok := ParseVerdict(resp.Message.Content)
	return Asked{End: end && ok, Understood: ok, Said: sanitize.Line(cut(resp.Message.Content, 200)), Usage: resp.Usage}, nil
}

// ParseVerdict reads the model's answer strictly: one JSON object holding
// only "verdict", "end" or "continue" in lower case, with nothing around it
// but white space. ok is false for anything else (a fence, prose, a second
// object, another field, another spelling).
func ParseVerdict(content string) (end, ok bool) {
	dec := json.NewDecoder(strings.NewReader(content))
	dec.DisallowUnknownFields()
	var a struct {
		Verdict *string `json:"verdict"`
	}
	if err := dec.Decode(&a); err != nil || a.Verdict == nil {
		return false, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return false, false
	}
	if !bytes.HasPrefix(bytes.TrimSpace([]byte(content)), []byte("{")) {
		return false, false
	}
	switch *a.Verdict {
	case "end":
		return true, true
	case "continue":
		return false, true
	}
	return false, false
}

func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
