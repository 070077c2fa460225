package engine_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
)

// FuzzDecode decodes any text as a reply's content and as its reasoning
// field (with the content empty), with native tools on and off: it never
// panics, and every call it yields has an arguments object. It is seeded
// with the text of every real reply shape (shapes_test.go), and for those
// whose full text yields calls it checks that no prefix of the text (a
// reply cut anywhere, inside a call's markup included) is acted on as a
// partial call: a prefix yields no calls, or the first calls of the full
// text exactly (tool and compact arguments), those its markup holds whole.
//
//	go test -run '^$' -fuzz FuzzDecode -fuzztime 20s ./internal/engine
func FuzzDecode(f *testing.F) {
	host := startHost(f)
	toolsets := []*engine.Toolset{engine.NewToolset(host.Tools(), nil, false), engine.NewToolset(host.Tools(), nil, true)}
	seeds := map[string]bool{}
	for _, s := range shapes {
		for _, text := range s.texts(f) {
			if text != "" && !seeds[text] {
				seeds[text] = true
				f.Add(text)
			}
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, ts := range toolsets {
			for _, as := range []func(string) llm.Message{asContent, asReasoning} {
				full := decodeKeys(t, ts, as(text))
				if !seeds[text] || len(full) == 0 {
					continue
				}
				for n := range len(text) {
					if got := decodeKeys(t, ts, as(text[:n])); len(got) > 0 && !slices.Equal(got, full[:min(len(got), len(full))]) {
						t.Fatalf("the first %d bytes of %q yield %q; the whole text yields %q", n, text, got, full)
					}
				}
			}
		}
	})
}

func asContent(text string) llm.Message   { return llm.Message{Role: llm.Assistant, Content: text} }
func asReasoning(text string) llm.Message { return llm.Message{Role: llm.Assistant, Reasoning: text} }

// decodeKeys decodes msg: its calls as "server/tool {args}", none when the
// reply is not usable; each call's arguments must be a JSON object.
func decodeKeys(t *testing.T, ts *engine.Toolset, msg llm.Message) []string {
	r, err := ts.Decode(msg)
	if err != nil {
		if _, ok := err.(*engine.ReplyError); !ok {
			t.Fatalf("decoding %q: %v", msg.Content+msg.Reasoning, err)
		}
		return nil
	}
	for _, c := range r.Calls {
		var args map[string]json.RawMessage
		if json.Unmarshal(c.Args, &args) != nil || args == nil {
			t.Fatalf("decoding %q: the call of %s has arguments %s, not an object", msg.Content+msg.Reasoning, c.Tool, c.Args)
		}
	}
	if strings.Contains(r.Hint, "\n") {
		t.Fatalf("decoding %q: a hint of more than one line: %q", msg.Content+msg.Reasoning, r.Hint)
	}
	return callKeys(r.Calls)
}

// texts are the texts a shape's reply carries: its content and its
// reasoning (from the raw body, for a raw shape).
func (s shape) texts(tb testing.TB) []string {
	if s.raw == "" {
		return []string{s.reply.Content, s.reply.Reasoning}
	}
	var body struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				Reasoning string  `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(s.raw), &body); err != nil || len(body.Choices) != 1 {
		tb.Fatalf("the raw body of %q: %v", s.name, err)
	}
	m := body.Choices[0].Message
	var content string
	if m.Content != nil {
		content = *m.Content
	}
	return []string{content, m.Reasoning}
}
