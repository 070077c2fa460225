package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

var htmlComment = regexp.MustCompile(`(?s)<!--.*?-->`)

// sanitize removes what a person reading the issue cannot see but a model
// would read: HTML comments, zero-width and bidirectional control
// characters. It also breaks our own fence tags so text cannot close them.
func sanitize(s string) string {
	s = htmlComment.ReplaceAllString(s, "")
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 0x200B && r <= 0x200F, // zero-width space … right-to-left mark
			r >= 0x202A && r <= 0x202E, // bidi embeddings and overrides
			r >= 0x2060 && r <= 0x2064, // word joiner, invisible operators
			r >= 0x2066 && r <= 0x2069, // bidi isolates
			r == 0xFEFF, r == 0x00AD, r == 0x180E:
			return -1
		case r >= 0xE0000 && r <= 0xE007F: // tag characters
			return -1
		}
		return r
	}, s)
	s = strings.ReplaceAll(s, "<untrusted", "&lt;untrusted")
	s = strings.ReplaceAll(s, "</untrusted", "&lt;/untrusted")
	return s
}

// Fence marks text written by people or tools as untrusted data for the
// model, after removing what a reader of the issue cannot see.
func Fence(source, s string) string {
	return "<untrusted source=\"" + source + "\">\n" + sanitize(s) + "\n</untrusted>"
}

// Digest identifies a comment (trimmed) without keeping its text: how a
// policy tells that a step says what the previous one said.
func Digest(comment string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(comment)))
	return hex.EncodeToString(sum[:16])
}
