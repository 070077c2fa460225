package watch

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// negations before a keyword that turn it around ("not done").
var negations = []string{"not", "don't", "dont", "isn't", "isnt", "aren't", "no", "never", "without", "nothing"}

// negationsAfter follow a Japanese keyword and turn it around (完了していない).
var negationsAfter = []string{"していない", "してない", "ではない", "じゃない", "できていない", "できてない", "しない", "ではありません", "じゃありません", "していません"}

// wordy reports whether k is written with letters of a script that
// separates words with spaces (Latin and the like).
func wordy(k string) bool {
	for _, r := range k {
		if unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana) {
			return false
		}
	}
	return true
}

// boundary reports whether position i of s is a word boundary: the rune
// before it (before) or at it (after) is not a letter or digit.
func boundary(s string, i int, before bool) bool {
	var r rune
	if before {
		if i == 0 {
			return true
		}
		r, _ = utf8.DecodeLastRuneInString(s[:i])
	} else {
		if i >= len(s) {
			return true
		}
		r, _ = utf8.DecodeRuneInString(s[i:])
	}
	return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
}

// negated reports whether the words just before a keyword, or the text
// right after it, negate it.
func negated(before, after string) bool {
	words := strings.Fields(strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' {
			return r
		}
		return ' '
	}, before))
	for i := max(len(words)-2, 0); i < len(words); i++ {
		for _, n := range negations {
			if words[i] == n {
				return true
			}
		}
	}
	if strings.HasSuffix(strings.TrimSpace(before), "未") {
		return true
	}
	after = strings.TrimSpace(after)
	for _, n := range negationsAfter {
		if strings.HasPrefix(after, n) {
			return true
		}
	}
	return false
}
