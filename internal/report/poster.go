// Package report is what the issue reads: comments posted by the agent, kept
// within the forge's size limit, with secrets redacted, rendered from
// embedded templates.
package report

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Comment size limits, in characters, of the forges.
const (
	GitHubMaxComment = 65536
	GitLabMaxComment = 1000000
)

// MaxComment returns the comment size limit of a forge.
func MaxComment(forgeName string) int {
	if forgeName == task.GitLab {
		return GitLabMaxComment
	}
	return GitHubMaxComment
}

// PosterOptions configure a Poster.
type PosterOptions struct {
	Commenter forge.Commenter
	Ref       task.Ref
	// MaxLen is the longest comment in characters; 0 → the forge's limit.
	MaxLen int
	// Redact removes secrets from a body; nil leaves it as it is.
	Redact func(string) string
}

// Poster posts comments on one task: the one place where comment size and
// redaction are enforced.
type Poster struct{ o PosterOptions }

// NewPoster returns a Poster for o.Ref.
func NewPoster(o PosterOptions) *Poster {
	if o.MaxLen <= 0 {
		o.MaxLen = MaxComment(o.Ref.Forge)
	}
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	return &Poster{o: o}
}

// Post posts body, split into several comments when it is too long.
func (p *Poster) Post(ctx context.Context, body string) error {
	parts := Split(p.o.Redact(body), p.o.MaxLen)
	for i, part := range parts {
		if _, err := p.o.Commenter.PostComment(ctx, p.o.Ref, part); err != nil {
			if len(parts) > 1 {
				return fmt.Errorf("part %d of %d: %w", i+1, len(parts), err)
			}
			return err
		}
	}
	return nil
}

// Split cuts body into pieces of at most max characters, at line breaks
// where it can, closing and reopening a ``` fence cut in two, and marking
// each piece "(i/n)" when there is more than one.
func Split(body string, max int) []string {
	if utf8.RuneCountInString(body) <= max {
		return []string{body}
	}
	const reserve = 32 // room for the part marker and fence repair
	limit := max - reserve
	if limit < 16 {
		limit = max
	}
	var parts []string
	var cur strings.Builder
	curLen, inFence := 0, false
	flush := func() {
		s := cur.String()
		if inFence {
			s += "\n```"
		}
		parts = append(parts, s)
		cur.Reset()
		curLen = 0
		if inFence {
			cur.WriteString("```\n")
			curLen = 4
		}
	}
	for _, line := range strings.SplitAfter(body, "\n") {
		for utf8.RuneCountInString(line) > 0 {
			room := limit - curLen
			n := utf8.RuneCountInString(line)
			if n <= room {
				cur.WriteString(line)
				curLen += n
				if strings.HasPrefix(strings.TrimSpace(line), "```") {
					inFence = !inFence
				}
				break
			}
			if curLen > 0 && n <= limit-4 {
				flush() // the line fits on a fresh piece
				continue
			}
			head := prefixRunes(line, room)
			cur.WriteString(head)
			line = line[len(head):]
			flush()
		}
	}
	if curLen > 0 || len(parts) == 0 {
		parts = append(parts, cur.String())
	}
	if len(parts) > 1 {
		for i := range parts {
			parts[i] = fmt.Sprintf("(%d/%d)\n%s", i+1, len(parts), parts[i])
		}
	}
	return parts
}

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
