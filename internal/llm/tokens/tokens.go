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

// ForModel returns the tokenizer of an OpenAI model family, or llm.Estimate
// for any other model (local models have tokenizers of their own).
func ForModel(model string) llm.Counter {
	enc, ok := encoding(model)
	if !ok {
		return llm.Estimate{}
	}
	codec, err := tokenizer.Get(enc)
	if err != nil {
		return llm.Estimate{}
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
		return llm.Estimate{}.Count(text)
	}
	return n
}

// Window is the context window of an OpenAI model family served by OpenAI,
// in tokens, or 0 for a model this package does not know.
func Window(model string) int {
	m := strings.ToLower(model)
	for _, p := range []string{"gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4", "chatgpt-4o"} {
		if strings.HasPrefix(m, p) {
			return 128000
		}
	}
	return 0
}
