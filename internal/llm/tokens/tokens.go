// Package tokens counts tokens before a request is sent: OpenAI's own
// tokenizer (offline BPE tables, github.com/tiktoken-go/tokenizer) for its
// model families, otherwise a conservative estimate that the engine scales
// by the usage servers report.
package tokens

import (
	"strings"

	"github.com/tiktoken-go/tokenizer"

	"github.com/coding-agent/coding-agent/internal/llm"
)

// ForModel returns the tokenizer of an OpenAI model family, or Estimate for
// any other model (local models have tokenizers of their own).
func ForModel(model string) llm.Counter {
	enc, ok := encoding(model)
	if !ok {
		return Estimate{}
	}
	codec, err := tokenizer.Get(enc)
	if err != nil {
		return Estimate{}
	}
	return bpe{codec}
}

// encoding is the BPE encoding of an OpenAI model name, matched by family
// prefix so that dated and fine-tuned variants count alike.
func encoding(model string) (tokenizer.Encoding, bool) {
	m := strings.ToLower(model)
	for _, p := range []string{"gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss"} {
		if strings.HasPrefix(m, p) {
			return tokenizer.O200kBase, true
		}
	}
	for _, p := range []string{"gpt-4", "gpt-3.5"} {
		if strings.HasPrefix(m, p) {
			return tokenizer.Cl100kBase, true
		}
	}
	return "", false
}

type bpe struct{ c tokenizer.Codec }

func (b bpe) Count(text string) int {
	n, err := b.c.Count(text)
	if err != nil {
		return Estimate{}.Count(text)
	}
	return n
}

// Estimate counts a token for every 3 bytes, rounded up: more than BPE
// tokenizers give for English and code (about 4 bytes a token), and about
// one token per character for CJK text (3 bytes in UTF-8).
type Estimate struct{}

// Count is the estimate of text's tokens.
func (Estimate) Count(text string) int { return (len(text) + 2) / 3 }
