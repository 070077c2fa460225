package watch

import (
	"strings"
	"testing"
)

var keywords = []string{"ありがとう", "ありがとうございます", "ありがとうございました", "完了", "OK", "了解", "承知",
	"thank you", "thanks", "done", "complete"}

// maskPhrases finds keywords as whole words (inside Japanese text), and
// tells a negated one ("not done", "未完了") from one that stands.
func TestMaskPhrases(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
	}{
		{"ありがとう", true},
		{"ありがとうございました！", true},
		{"Thanks!", true},
		{"thanks, looks good", true},
		{"Thank you very much.", true},
		{"OK", true},
		{"ok 👍", true},
		{"LGTM, done.", true},
		{"完了です", true},
		{"not done", false},
		{"This is not done yet", false},
		{"It isn't complete.", false},
		{"未完了です", false},
		{"完了していません", false},
		{"Thanks! Could you also add a test?", true}, // found: the question is JudgeReply's to weigh
		{"ありがとう、でもテストも追加できますか？", true},
		{"book a meeting", false}, // "ok" inside a word
		{"undone", false},         // "done" inside a word
		{"Please add a README too.", false},
		{"", false},
	} {
		_, found, denied := maskPhrases(strings.ToLower(c.body), keywords)
		if found != c.want {
			t.Errorf("maskPhrases(%q) found %v, want %v", c.body, found, c.want)
		}
		if neg := strings.Contains(c.body, "not") || strings.Contains(c.body, "n't") || strings.Contains(c.body, "未") ||
			strings.Contains(c.body, "していません"); denied != neg {
			t.Errorf("maskPhrases(%q) denied %v, want %v", c.body, denied, neg)
		}
	}
}
