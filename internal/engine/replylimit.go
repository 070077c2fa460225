package engine

import (
	"fmt"

	"github.com/coding-agent/coding-agent/internal/llm"
)

// A reply cut at the output token limit (DecodeResponse: Reply.Cut) is told
// so with the limit, and the limit is raised once for the next request:
// twice the reserve, within what the context window leaves beside the
// request. A reply cut again at the raised limit is told that too, and the
// limit is not raised further; the first reply not cut brings it back to
// the reserve. The raised limit is in the checkpoint, so a resumed run
// sends the same request.

// correctionTokens is room kept for the correction's own words beyond the
// decoder's reason.
const correctionTokens = 128

// replyLimit is the output token limit of the next request: 0 (the
// client's own, the reserve) unless a cut reply raised it; then the raised
// limit, never more than the window less the request as counted. fit has
// brought the request under the window less the reserve, so the limit is
// never less than the reserve either.
func (r *Run) replyLimit(defs []llm.Tool) int {
	b, st := r.e.o.Budget, r.st
	if st.Raised == 0 || b.ContextLength <= 0 {
		return 0
	}
	room := b.ContextLength - r.tokens(st.Messages, r.toolTokens(defs))
	return max(b.Reserve, min(st.Raised, room))
}

// cutReason is the correction for a reply cut at the output token limit: the
// decoder's reason, the limit the request had (sent; 0 for the reserve),
// and whether it is raised for the next request, raising it the first time
// to what the window leaves once the reply (kept: what of it stays in the
// conversation) and the correction have joined it.
func (r *Run) cutReason(reason string, sent int, defs []llm.Tool, kept llm.Message) string {
	b, st := r.e.o.Budget, r.st
	const less = "write less in one reply (a large file in several smaller calls)"
	if b.ContextLength <= 0 || b.Reserve <= 0 {
		return reason + "; " + less // the limit is the server's own: nothing to raise it within
	}
	limit := sent
	if limit <= 0 {
		limit = b.Reserve
	}
	if st.Raised > 0 {
		return fmt.Sprintf("%s, at the raised limit of %d tokens; it is not raised further: %s", reason, limit, less)
	}
	next := append(st.Messages[:len(st.Messages):len(st.Messages)], kept, llm.Message{Role: llm.User, Content: reason})
	raised := min(2*b.Reserve, b.ContextLength-r.tokens(next, r.toolTokens(defs))-correctionTokens)
	if raised <= limit {
		return fmt.Sprintf("%s; the limit is %d tokens, and the context window leaves no room to raise it: %s", reason, limit, less)
	}
	st.Raised = raised
	r.log.Info("reply cut at the output token limit; raising the limit once", "limit", limit, "raised", raised)
	return fmt.Sprintf("%s; the limit was %d tokens, and is raised to %d tokens for your next reply; "+
		"still, keep large contents for several smaller calls", reason, limit, raised)
}
