package tokens_test

import (
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/tokens"
)

func TestCounts(t *testing.T) {
	for _, tc := range []struct {
		model, text string
		want        int
	}{
		{"gpt-4o", "hello world", 2},            // o200k_base
		{"gpt-4o-2024-08-06", "hello world", 2}, // dated variants count alike
		{"gpt-4", "hello world", 2},             // cl100k_base
		{"qwen3:8b", "hello world", 4},          // estimate: 11 bytes / 3, rounded up
		{"qwen3:8b", "", 0},
	} {
		if got := tokens.ForModel(tc.model).Count(tc.text); got != tc.want {
			t.Errorf("ForModel(%q).Count(%q) = %d, want %d", tc.model, tc.text, got, tc.want)
		}
	}
}

// The estimate is never below what OpenAI's tokenizer counts for English
// prose, code or Japanese: it is a conservative stand-in for unknown
// tokenizers, which the server's usage then corrects upwards.
func TestEstimateIsConservative(t *testing.T) {
	bpe := tokens.ForModel("gpt-4o")
	for _, text := range []string{
		strings.Repeat("The quick brown fox jumps over the lazy dog. ", 50),
		strings.Repeat("func (r *Run) tokens(msgs []llm.Message) int { return len(msgs) }\n", 30),
		strings.Repeat("挨拶ファイルを作成して、メモを追加します。", 40),
	} {
		if est, real := (llm.Estimate{}).Count(text), bpe.Count(text); est < real {
			t.Errorf("estimate %d < tokenizer %d for %.30q", est, real, text)
		}
	}
}

func TestWindow(t *testing.T) {
	for model, want := range map[string]int{"gpt-4o": 128000, "gpt-4.1-mini": 128000, "o3": 128000, "gpt-5": 128000, "qwen3:8b": 0, "gpt-test": 0} {
		if got := tokens.Window(model); got != want {
			t.Errorf("Window(%q) = %d, want %d", model, got, want)
		}
	}
}
