package sanitize

import (
	"regexp"
	"strings"
)

var (
	htmlComment = regexp.MustCompile(`(?s)<!--.*?-->`)
	// fenceTag is anything a model could read as our fence's opening or
	// closing tag, in any case and spacing: "<untrusted", "</UNTRUSTED",
	// "< / Untrusted".
	fenceTag = regexp.MustCompile(`(?i)<(\s*/?\s*untrusted)`)
)

// Clean removes what a person reading the issue cannot see but a model
// would read: HTML comments (after the characters below, so that none can
// split one), zero-width, bidirectional and other invisible
// format characters, and control characters (C0 but tab and newline, DEL,
// C1; a carriage return ends a line). It breaks our fence's tags, in any
// case, so that text cannot close or open a fence.
func Clean(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n':
			return r
		case r == '\r':
			return '\n'
		case r < 0x20 || r == 0x7F || r >= 0x80 && r <= 0x9F: // C0, DEL, C1 (NUL, ESC, CSI …)
			return -1
		case r >= 0x200B && r <= 0x200F, // zero-width space … right-to-left mark
			r >= 0x202A && r <= 0x202E, // bidi embeddings and overrides
			r >= 0x2060 && r <= 0x2064, // word joiner, invisible operators
			r >= 0x2066 && r <= 0x2069, // bidi isolates
			r == 0x061C,                // Arabic letter mark
			r == 0xFEFF, r == 0x00AD, r == 0x180E:
			return -1
		case r >= 0xE0000 && r <= 0xE007F: // tag characters
			return -1
		case r == 0xFFFD: // what invalid UTF-8 became
			return -1
		}
		return r
	}, s)
	s = hideComments(s)
	return fenceTag.ReplaceAllString(s, "&lt;$1")
}

// hideComments removes HTML comments as a forge's Markdown hides them:
// each complete one (again, while removing one completes another), and
// from an unclosed "<!--" to the end.
func hideComments(s string) string {
	for {
		t := htmlComment.ReplaceAllString(s, "")
		if t == s {
			break
		}
		s = t
	}
	if i := strings.Index(s, "<!--"); i >= 0 {
		s = s[:i]
	}
	return s
}

// Line is a one-line value the forge supplies (a title, a branch name):
// cleaned, with every run of white space one space.
func Line(s string) string { return strings.Join(strings.Fields(Clean(s)), " ") }

// Fence marks text written by people or tools as untrusted data for the
// model, after cleaning it. source says where it came from; it is cleaned
// too, and its quotes become apostrophes.
func Fence(source, s string) string {
	return `<untrusted source="` + strings.ReplaceAll(Line(source), `"`, "'") + "\">\n" + Clean(s) + "\n</untrusted>"
}
