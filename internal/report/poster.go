// Package report is what the issue reads: comments posted by the agent, kept
// within the forge's size limit, with secrets redacted, rendered from
// embedded templates.
package report

import (
	"context"
	"fmt"
	"strings"

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
// A body that is empty or only white space is not posted: the forges refuse
// it.
func (p *Poster) Post(ctx context.Context, body string) error {
	if strings.TrimSpace(body) == "" {
		return nil
	}
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
