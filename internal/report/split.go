package report

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// minSplit is the smallest maxLen Split honours: below it the part markers and
// fence repairs would leave no room for the text.
const minSplit = 64

// Split cuts body into pieces of at most maxLen characters (runes), each marked
// "(i/n)" on a line of its own when there is more than one; the marker counts
// towards maxLen. Cuts fall at line breaks where they can; a single line longer
// than a piece is cut between runes. A ``` or ~~~ fence cut in two is closed
// at the end of the piece ("\n" and the fence) and reopened at the top of the
// next (the opening line again, or its fence alone when that line is long),
// so every piece renders. A body of at most maxLen characters comes back as it
// is; a maxLen below 64 counts as 64.
func Split(body string, maxLen int) []string {
	maxLen = max(maxLen, minSplit)
	if utf8.RuneCountInString(body) <= maxLen {
		return []string{body}
	}
	// The marker "(i/n)\n" is at most 2*digits(n)+4 runes; guess the number
	// of digits, and split again with a wider marker when the guess was short.
	for digits := 1; ; digits++ {
		parts := splitPieces(body, maxLen-(2*digits+4))
		if len(strconv.Itoa(len(parts))) > digits {
			continue
		}
		for i := range parts {
			parts[i] = fmt.Sprintf("(%d/%d)\n%s", i+1, len(parts), parts[i])
		}
		return parts
	}
}

// fence is an open code fence: its run of ``` or ~~~ and the line that
// opened it. The zero fence means none is open.
type fence struct{ run, reopen string }

// closeLen is how many runes closing f at the end of a piece takes.
func (f fence) closeLen() int {
	if f.run == "" {
		return 0
	}
	return 1 + len(f.run)
}

// reopenLen is how many runes reopening f at the top of a piece takes.
func (f fence) reopenLen() int {
	if f.run == "" {
		return 0
	}
	return utf8.RuneCountInString(f.reopen) + 1
}

// splitter cuts a body into pieces of at most limit runes, fence repair
// included.
type splitter struct {
	limit int
	parts []string
	cur   strings.Builder
	n     int  // runes in cur
	fresh bool // cur holds nothing but a reopened fence
	open  fence
}

func splitPieces(body string, limit int) []string {
	s := &splitter{limit: limit, fresh: true}
	for _, line := range strings.SplitAfter(body, "\n") {
		s.add(line)
	}
	if !s.fresh || len(s.parts) == 0 {
		s.parts = append(s.parts, s.cur.String())
	}
	return s.parts
}

// add writes one line (with its "\n"), starting a new piece before it when
// it does not fit but would on a fresh piece, and cutting it when it is
// longer than a piece.
func (s *splitter) add(line string) {
	after := fenceAfter(s.open, line)
	for line != "" {
		n := utf8.RuneCountInString(line)
		if s.n+n+after.closeLen() <= s.limit {
			s.write(line, n)
			s.open = after
			return
		}
		if !s.fresh && s.open.reopenLen()+n+after.closeLen() <= s.limit {
			s.flush()
			continue
		}
		// Cut the line, leaving at least one rune for the next piece: the
		// line's effect on the fence counts once it is written whole.
		room := min(s.limit-s.n-s.open.closeLen(), n-1)
		if room <= 0 {
			s.flush()
			continue
		}
		head := prefixRunes(line, room)
		if run, _ := fenceRun(line[len(head):]); run != "" {
			// The rest would start the next piece looking like a fence:
			// cut before the last character that cannot start one.
			if i := strings.LastIndexFunc(head, notFenceRune); i > 0 {
				head = head[:i]
			}
		}
		s.write(head, utf8.RuneCountInString(head))
		line = line[len(head):]
		s.flush()
	}
}

func (s *splitter) write(text string, runes int) {
	s.cur.WriteString(text)
	s.n += runes
	s.fresh = false
}

// flush ends the current piece, closing an open fence, and starts the next,
// reopening it.
func (s *splitter) flush() {
	piece := s.cur.String()
	if s.open.run != "" {
		piece += "\n" + s.open.run
	}
	s.parts = append(s.parts, piece)
	s.cur.Reset()
	s.n = 0
	if s.open.run != "" {
		s.cur.WriteString(s.open.reopen + "\n")
		s.n = s.open.reopenLen()
	}
	s.fresh = true
}

// Fences longer than maxFenceRun are not repaired; an opening line longer
// than maxReopen is reopened with its fence alone. Both keep the repair
// small next to minSplit.
const (
	maxFenceRun = 8
	maxReopen   = 16
)

// fenceAfter returns the fence open after line, given the one open before
// it: a run of three or more ` or ~ (after at most three spaces) opens a
// fence, and a run of the same character at least as long, alone on its
// line, closes it.
func fenceAfter(open fence, line string) fence {
	run, rest := fenceRun(line)
	if open.run != "" {
		if run != "" && run[0] == open.run[0] && len(run) >= len(open.run) && strings.TrimSpace(rest) == "" {
			return fence{}
		}
		return open
	}
	if run == "" || len(run) > maxFenceRun || (run[0] == '`' && strings.Contains(rest, "`")) {
		return fence{}
	}
	reopen := strings.TrimSpace(line)
	if utf8.RuneCountInString(reopen) > maxReopen {
		reopen = run
	}
	return fence{run: run, reopen: reopen}
}

// fenceRun returns the run of ` or ~ a line starts with (three or more,
// after at most three spaces) and the rest of the line.
func fenceRun(line string) (run, rest string) {
	t := strings.TrimRight(line, "\r\n")
	i := 0
	for i < len(t) && t[i] == ' ' {
		i++
	}
	if i > 3 || i == len(t) || (t[i] != '`' && t[i] != '~') {
		return "", ""
	}
	t = t[i:]
	j := 0
	for j < len(t) && t[j] == t[0] {
		j++
	}
	if j < 3 {
		return "", ""
	}
	return t[:j], t[j:]
}

func notFenceRune(r rune) bool { return r != ' ' && r != '`' && r != '~' }

// prefixRunes returns the first n runes of s.
func prefixRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
