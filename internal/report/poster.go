// Package report is what the issue reads: comments posted by the agent, kept
// within the forge's size limit, with secrets redacted, rendered from
// embedded templates.
package report

import (
	"context"
	"fmt"
	"log/slog"
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
	// Logger receives, at debug level, the full text of a comment Post
	// had to cut; nil discards it. It carries the task's attributes.
	Logger *slog.Logger
}

// Poster posts comments on one task: the one place where comment size and
// redaction are enforced. Post gives a body one comment, cut to fit; PostAll
// gives it as many as it needs.
type Poster struct {
	o   PosterOptions
	log *slog.Logger
}

// NewPoster returns a Poster for o.Ref.
func NewPoster(o PosterOptions) *Poster {
	if o.MaxLen <= 0 {
		o.MaxLen = MaxComment(o.Ref.Forge)
	}
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Poster{o: o, log: log}
}

// Post posts body as one comment. A body longer than a comment allows is
// cut (at a line break where one is near, an open code fence closed) with a
// note saying how many characters were left out, and its full text is
// logged at debug level. This is how a step's comment, the model's own
// text, is posted: a 2 MB reply makes one comment, not 33. A body that is
// empty or only white space is not posted: the forges refuse it.
func (p *Poster) Post(ctx context.Context, body string) error {
	if strings.TrimSpace(body) == "" {
		return nil
	}
	body = p.o.Redact(body)
	fitted, cut := cutToFit(body, p.o.MaxLen)
	if cut {
		p.log.DebugContext(ctx, "comment cut to fit one comment; its full text",
			"chars", utf8.RuneCountInString(body), "text", body)
	}
	_, err := p.o.Commenter.PostComment(ctx, p.o.Ref, fitted)
	return err
}

// PostAll posts the whole of body, split into several comments marked
// "(i/n)" when it is too long (see Split). This is how the notices the
// agent composes (a failure with its reason, pause, stop) are posted. A
// blank body is not posted.
func (p *Poster) PostAll(ctx context.Context, body string) error {
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
