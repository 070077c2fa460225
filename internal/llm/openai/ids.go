package openai

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"regexp"
)

// wireID is the one shape of tool call id every server takes back. Mistral
// models refuse any other when the history is sent back: vLLM with the
// Mistral tokenizer answers 400 "Tool call id was call_3_0 but must be
// a-z, A-Z, 0-9, with a length of 9." (mistral_common's check), llama.cpp's
// server with a Mistral template "Tool call IDs should be alphanumeric
// strings with length 9!"; OpenAI and the others take any string.
var wireID = regexp.MustCompile(`^[a-zA-Z0-9]{9}$`)

// callIDs maps the tool call ids of one request onto ids of the wire shape:
// an id of that shape is kept while no other call of the request has it;
// any other (ours for calls that came without one, a server's longer ones,
// a repeated one) becomes one derived from it. The mapping depends on the
// conversation alone, so the same history (a resumed checkpoint) is the
// same request. A tool message takes the id its call got: the call of the
// nearest assistant message before it, else of the latest one that had the
// id.
type callIDs struct {
	used    map[string]bool     // wire ids given in this request
	latest  map[string][]string // the latest assistant message's calls: id → wire ids, in order
	dropped map[string]bool     // its calls left out (no name)
	any     map[string]string   // every call so far: id → its latest wire id
}

func newCallIDs() *callIDs {
	return &callIDs{used: map[string]bool{}, any: map[string]string{}}
}

// assistant starts the calls of an assistant message.
func (m *callIDs) assistant() {
	m.latest, m.dropped = map[string][]string{}, map[string]bool{}
}

// call is the wire id of a call of the current assistant message.
func (m *callIDs) call(id string) string {
	wire := id
	for n := 0; !wireID.MatchString(wire) || m.used[wire]; n++ {
		wire = derived(id, n)
	}
	m.used[wire] = true
	m.latest[id] = append(m.latest[id], wire)
	m.any[id] = wire
	return wire
}

// drop notes a call left out of the current assistant message.
func (m *callIDs) drop(id string) { m.dropped[id] = true }

// result is the wire id for a tool message answering id, and false when it
// answers a call that was left out.
func (m *callIDs) result(id string) (string, bool) {
	if q := m.latest[id]; len(q) > 0 {
		if len(q) > 1 { // calls sharing an id are answered in their order
			m.latest[id] = q[1:]
		}
		return q[0], true
	}
	if m.dropped[id] {
		return "", false
	}
	if wire, ok := m.any[id]; ok {
		return wire, true
	}
	if wireID.MatchString(id) {
		return id, true
	}
	return derived(id, 0), true
}

// derived is the n-th wire id derived from id: nine letters and digits
// from its hash.
func derived(id string, n int) string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	sum := sha256.Sum256(fmt.Appendf(nil, "%d\x00%s", n, id))
	v := binary.BigEndian.Uint64(sum[:8])
	out := make([]byte, 9)
	for i := range out {
		out[i] = digits[v%62]
		v /= 62
	}
	return string(out)
}
