package watch

import "testing"

var keywords = []string{"ありがとう", "ありがとうございます", "ありがとうございました", "完了", "OK", "了解", "承知",
	"thank you", "thanks", "done", "complete"}

func TestIsCompletion(t *testing.T) {
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
		{"Thanks! Could you also add a test?", false},
		{"ありがとう、でもテストも追加できますか？", false},
		{"book a meeting", false}, // "ok" inside a word
		{"undone", false},         // "done" inside a word
		{"Please add a README too.", false},
		{"", false},
	} {
		if got := IsCompletion(c.body, keywords); got != c.want {
			t.Errorf("IsCompletion(%q) = %v, want %v", c.body, got, c.want)
		}
	}
}
