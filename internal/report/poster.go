// Package report is what the issue reads: comments posted by the agent, kept
// within the forge's size limit, with secrets redacted, rendered from
// embedded templates.
package report

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/task"
)

// The forges' comment size limits, in characters (task.Forges).
var (
	GitHubMaxComment = task.Forges[task.GitHub].MaxComment
	GitLabMaxComment = task.Forges[task.GitLab].MaxComment
)

// MaxComment returns the comment size limit of a forge (task.Forges;
// GitHub's for a forge it does not know).
func MaxComment(forgeName string) int {
	if f, ok := task.Forges[forgeName]; ok {
		return f.MaxComment
	}
	return task.Forges[task.GitHub].MaxComment
}

// Forge is what posting needs of a forge: posting a comment, and, to find
// the comment a process that stopped may have posted already (a key in
// doubt: engine.Key), the bot's name and the comments since a time.
type Forge interface {
	forge.Commenter
	CommentsSince(ctx context.Context, ref task.Ref, since time.Time) ([]task.Comment, error)
	BotUser(ctx context.Context) (string, error)
}

// PosterOptions configure a Poster.
type PosterOptions struct {
	Commenter Forge
	Ref       task.Ref
	// MaxLen is the longest comment text in characters, the key's hidden
	// line aside; 0 → the forge's limit less the room that line takes.
	MaxLen int
	// Redact removes secrets from a body; nil leaves it as it is.
	Redact func(string) string
	// Logger receives, at debug level, the full text of a comment Post
	// had to cut; nil discards it. It carries the task's attributes.
	Logger *slog.Logger
	// Lang is the language of the note that says a body was cut.
	Lang Lang
}

// Poster posts comments on one task: the one place where comment size and
// redaction are enforced, and where a comment is posted once (postOnce).
// Post gives a body one comment, cut to fit; PostAll gives it as many as it
// needs.
type Poster struct {
	o   PosterOptions
	log *slog.Logger
}

// NewPoster returns a Poster for o.Ref.
func NewPoster(o PosterOptions) *Poster {
	if o.MaxLen <= 0 {
		o.MaxLen = MaxComment(o.Ref.Forge) - postonce.MarkReserve
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

// Post posts body as one comment, named by key (the zero Key: a comment of
// its own, never in doubt). A body longer than a comment allows is cut (at
// a line break where one is near, an open code fence closed) with a note
// saying how many characters were left out, and its full text is logged at
// debug level. This is how a step's comment, the model's own text, is
// posted: a 2 MB reply makes one comment, not 33. A body that is empty or
// only white space is not posted: the forges refuse it.
func (p *Poster) Post(ctx context.Context, key engine.Key, body string) error {
	if strings.TrimSpace(body) == "" {
		return nil
	}
	body = p.o.Redact(body)
	fitted, cut := cutToFit(body, p.o.MaxLen, p.o.Lang)
	if cut {
		p.log.DebugContext(ctx, "comment cut to fit one comment; its full text",
			"chars", utf8.RuneCountInString(body), "text", body)
	}
	key = named(key)
	find, err := look(ctx, p.o.Commenter, p.o.Ref, key)
	if err != nil {
		return err
	}
	_, _, err = postOnce(ctx, p.o.Commenter, p.o.Ref, p.log, find, key.Name, fitted)
	return err
}

// PostAll posts the whole of body, named by key (as in Post), split into
// several comments marked "(i/n)" when it is too long (see Split), each
// part named by key and its number. This is how the notices the agent
// composes (a failure with its reason, pause, stop) are posted. A blank
// body is not posted.
func (p *Poster) PostAll(ctx context.Context, key engine.Key, body string) error {
	if strings.TrimSpace(body) == "" {
		return nil
	}
	parts := Split(p.o.Redact(body), p.o.MaxLen)
	key = named(key)
	find, err := look(ctx, p.o.Commenter, p.o.Ref, key)
	if err != nil {
		return err
	}
	for i, part := range parts {
		name := key.Name
		if len(parts) > 1 {
			name = fmt.Sprintf("%s#%d", key.Name, i+1)
		}
		if _, _, err := postOnce(ctx, p.o.Commenter, p.o.Ref, p.log, find, name, part); err != nil {
			if len(parts) > 1 {
				return fmt.Errorf("part %d of %d: %w", i+1, len(parts), err)
			}
			return err
		}
	}
	return nil
}

// named is key, or for the zero Key the name of a comment of its own.
func named(key engine.Key) engine.Key {
	if key.Name == "" {
		return (&engine.Keys{}).Next("comment")
	}
	return key
}

// finder finds a comment by its key's name among those a process that
// stopped may have posted (look); false when there is none or nothing is
// in doubt.
type finder func(name string) (task.Comment, bool)

// look reads, for a key in doubt, the bot's comments a process that
// stopped may have posted under it: those created since key.Since (less
// the forge's clock skew). A key not in doubt reads nothing. A look that
// fails is an error: posting anyway could post the comment twice.
func look(ctx context.Context, f Forge, ref task.Ref, key engine.Key) (finder, error) {
	if !key.Doubt {
		return func(string) (task.Comment, bool) { return task.Comment{}, false }, nil
	}
	bot, err := f.BotUser(ctx)
	if err != nil {
		return nil, fmt.Errorf("looking for comment %s on %s, which a stopped process may have posted: %w", key.Name, ref, err)
	}
	since := time.Time{}
	if !key.Since.IsZero() {
		since = key.Since.Add(-postonce.ClockSkew)
	}
	cs, err := f.CommentsSince(ctx, ref, since)
	if err != nil {
		return nil, fmt.Errorf("looking for comment %s on %s, which a stopped process may have posted: %w", key.Name, ref, err)
	}
	return func(name string) (task.Comment, bool) { return postonce.Keyed(cs, bot, name, since) }, nil
}

// postOnce posts body marked with the key name (postonce.Mark), unless
// find has it already: then that comment is returned (found), not posted
// again.
func postOnce(ctx context.Context, f forge.Commenter, ref task.Ref, log *slog.Logger, find finder, name, body string) (c task.Comment, found bool, err error) {
	if c, ok := find(name); ok {
		log.InfoContext(ctx, "comment found on the forge, posted before a stop; not posting it again", "key", name, "comment_id", c.ID)
		return c, true, nil
	}
	c, err = f.PostComment(ctx, ref, postonce.Mark(body, name))
	return c, false, err
}

// amendMark starts what Amend adds to a comment: a hidden line of its
// own after a blank one, so that amending again replaces what was added
// rather than adding it twice. Only a whole line counts: the model's text
// in a comment (cleaned of HTML comments) and the commands it ran (code
// in list items) cannot make one.
const amendMark = "<!-- coding-agent: amended -->"

// amendLine is amendMark as Amend writes it.
const amendLine = "\n\n" + amendMark + "\n"

// ErrNotAmended is Amend's error when the comment to amend is not on the
// forge (never posted, or deleted) or the addition would not fit in it:
// the caller posts the addition as a comment of its own.
var ErrNotAmended = errors.New("the comment to amend is not there, or the addition does not fit")

// Amend adds addition at the end of the comment the run keys numbered as
// what ("closing": the newest such comment of the run, its last part when
// it was split), in place: the delivery's pull request link joins the
// closing comment rather than making a comment of its own. What an
// earlier Amend added is replaced, so a delivery done again after a stop
// (whose text may differ: the pull request opened then, updated now) says
// it once. It fails with ErrNotAmended when there is no such comment or
// the whole would not fit, and with the forge's error when it cannot read
// or edit: the addition may then be posted on its own.
func (p *Poster) Amend(ctx context.Context, keys engine.Keys, what, addition string) error {
	ed, ok := p.o.Commenter.(forge.Editor)
	if !ok || keys.Run == "" || strings.TrimSpace(addition) == "" {
		return ErrNotAmended
	}
	bot, err := p.o.Commenter.BotUser(ctx)
	if err != nil {
		return fmt.Errorf("reading the bot's name to amend its %s comment on %s: %w", what, p.o.Ref, err)
	}
	cs, err := p.o.Commenter.CommentsSince(ctx, p.o.Ref, time.Time{})
	if err != nil {
		return fmt.Errorf("reading the %s comment on %s to amend it: %w", what, p.o.Ref, err)
	}
	var c task.Comment
	var key string
	for _, x := range cs {
		k, marked := postonce.KeyOf(x.Body)
		if x.System || !marked || !strings.EqualFold(x.Author, bot) || !strings.HasPrefix(k, keys.Run+"/") {
			continue
		}
		if name := k[strings.LastIndex(k, "/")+1:]; name == what || strings.HasPrefix(name, what+"#") {
			c, key = x, k
		}
	}
	if key == "" {
		return ErrNotAmended
	}
	body := strings.ReplaceAll(postonce.Unmark(c.Body), "\r\n", "\n")
	if i := strings.LastIndex(body, amendLine); i >= 0 {
		body = body[:i]
	}
	body = strings.TrimRight(body, "\n") + amendLine + strings.TrimSpace(p.o.Redact(addition))
	if utf8.RuneCountInString(body) > p.o.MaxLen {
		return ErrNotAmended
	}
	if err := ed.EditComment(ctx, p.o.Ref, c.ID, postonce.Mark(body, key)); err != nil {
		if errors.Is(err, forge.ErrNotFound) {
			return ErrNotAmended
		}
		return fmt.Errorf("amending the %s comment on %s: %w", what, p.o.Ref, err)
	}
	return nil
}
