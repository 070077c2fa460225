package report

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/task"
)

// BoardState is what a Board needs to continue after a restart. Sections
// hold the text as it was posted, redacted.
type BoardState struct {
	ProgressID int64    `json:"progress_id,omitempty"`
	PhaseKey   string   `json:"phase_key,omitempty"` // the phase comment being appended to
	PhaseID    int64    `json:"phase_id,omitempty"`
	Sections   []string `json:"sections,omitempty"` // its sections, in order
	// ProgressMark and PhaseMark are the keys the two comments were posted
	// under (engine.Key): an edit keeps them.
	ProgressMark string `json:"progress_mark,omitempty"`
	PhaseMark    string `json:"phase_mark,omitempty"`
}

// BoardForge is what a Board needs of a forge: posting comments, finding
// one a stopped process posted (Forge), and editing them in place.
type BoardForge interface {
	Forge
	forge.Editor
}

// BoardOptions configure a Board.
type BoardOptions struct {
	Forge  BoardForge
	Ref    task.Ref
	MaxLen int                 // 0 → MaxComment(Ref.Forge) less a key's line; below 64 counts as 64
	Redact func(string) string // nil → identity
	Logger *slog.Logger        // nil → discard
	// Key names each comment the Board posts, what saying what it is
	// (engine.Run.Key); nil → keys of the Board's own, never in doubt.
	Key func(what string) engine.Key
	// EditEvery is the least time between two edits of the progress
	// comment (SetProgress); a body set sooner waits for the next
	// SetProgress past it, or for Flush. 0: every SetProgress edits.
	EditEvery time.Duration
	// Clock is the time EditEvery is measured by; nil → time.Now.
	Clock func() time.Time
	// Lang is the language of the note that says a body was cut.
	Lang Lang
}

// sectionSep joins the sections of a phase comment.
const sectionSep = "\n\n---\n\n"

// cutNotes end a body that was cut to fit in one comment, saying how many
// characters were left out, in each language; shortCutNote when a tiny
// MaxLen leaves no room for it.
var cutNotes = map[Lang]string{English: "\n\n*✂️ %d more characters were cut*", Japanese: "\n\n*✂️ 以降の %d 文字を省略しました*"}

const shortCutNote = "\n\n*✂️*"

// Board keeps what planning mode shows on an issue in few comments: one
// progress comment edited in place, and one comment per phase that grows
// by edits until it would pass the size limit. It owns the comment ids; its
// State goes into the checkpoint so that a restarted task edits the same
// comments. A Board never retries: the forge adapters do. Its methods are
// safe for concurrent use, and run one at a time.
type Board struct {
	o   BoardOptions
	log *slog.Logger

	mu sync.Mutex // held across forge calls, so that updates apply in order
	st BoardState
	// shown is the progress body as last posted or edited, edited when it
	// was; pending is a newer one held back by EditEvery ("": none).
	shown, pending string
	edited         time.Time
}

// NewBoard returns a Board for o.Ref continuing from st (the zero state for
// a new task).
func NewBoard(o BoardOptions, st BoardState) *Board {
	if o.MaxLen <= 0 {
		o.MaxLen = MaxComment(o.Ref.Forge) - postonce.MarkReserve
	}
	o.MaxLen = max(o.MaxLen, minSplit)
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Key == nil {
		keys := &engine.Keys{}
		o.Key = keys.Next
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st.Sections = slices.Clone(st.Sections)
	return &Board{o: o, log: log.With("ref", o.Ref.String()), st: st}
}

// State returns a copy of what the Board needs to continue after a restart.
func (b *Board) State() BoardState {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.st
	st.Sections = slices.Clone(st.Sections)
	return st
}

// SetProgress posts the progress comment the first time and edits it in
// place after; if the edit answers forge.ErrNotFound (someone deleted it) it
// posts a new one and remembers its id. A body longer than MaxLen is cut
// safely (valid UTF-8, a note that it was cut), never split. A blank body
// is not posted, nor one the comment shows already. With EditEvery, an
// edit sooner than that after the last one is held back (the newest body
// waits for the next SetProgress past it, or Flush).
func (b *Board) SetProgress(ctx context.Context, body string) error {
	return b.setProgress(ctx, body, false)
}

// Live shows v as the living comment, in the board's language: at once
// when it is the round's last edit (v.Last), else at the board's pace
// (SetProgress). A comment that cannot be rendered is logged, not
// returned: the run goes on without that edit.
func (b *Board) Live(ctx context.Context, v Live) error {
	body, err := b.o.Lang.Living(v, MaxComment(b.o.Ref.Forge)-200)
	if err != nil {
		b.log.ErrorContext(ctx, "rendering the living comment", "error", err)
		return nil
	}
	if v.Last() {
		return b.Flush(ctx, body)
	}
	return b.SetProgress(ctx, body)
}

// Flush makes the edit SetProgress held back, if any; and with body not
// blank, shows body at once whatever EditEvery says: the last edit of a
// round.
func (b *Board) Flush(ctx context.Context, body string) error {
	if strings.TrimSpace(body) == "" {
		b.mu.Lock()
		body = b.pending
		b.mu.Unlock()
	}
	return b.setProgress(ctx, body, true)
}

func (b *Board) setProgress(ctx context.Context, body string, now bool) error {
	if strings.TrimSpace(body) == "" {
		return nil
	}
	body, _ = cutToFit(b.o.Redact(body), b.o.MaxLen, b.o.Lang)
	b.mu.Lock()
	defer b.mu.Unlock()
	if id := b.st.ProgressID; id != 0 {
		if body == b.shown {
			b.pending = ""
			return nil
		}
		if !now && b.o.EditEvery > 0 && b.o.Clock().Sub(b.edited) < b.o.EditEvery {
			b.pending = body
			return nil
		}
		err := b.edit(ctx, id, postonce.Mark(body, b.st.ProgressMark), "editing the progress comment")
		if err == nil {
			b.shown, b.pending, b.edited = body, "", b.o.Clock()
		}
		if !errors.Is(err, forge.ErrNotFound) {
			return err
		}
		b.st.ProgressID = 0
	}
	c, mark, err := b.post(ctx, "progress", body, "posting the progress comment")
	if err != nil {
		return err
	}
	b.st.ProgressID, b.st.ProgressMark = c.ID, mark
	b.shown, b.pending, b.edited = body, "", b.o.Clock()
	return nil
}

// AddSection appends section to the current phase comment when key equals
// the current PhaseKey and the joined body (sections joined with
// "\n\n---\n\n") fits in MaxLen, by editing that comment; otherwise it
// starts a new comment for key holding this section. ErrNotFound on edit →
// a new comment holding all the sections. A section longer than MaxLen is
// cut like a progress body; a blank one is not posted.
//
// State changes only as far as the forge call succeeded: when the edit
// fails the section stays in Sections, so the next successful edit includes
// it; when the post of a new comment fails, PhaseID stays unset and the
// sections are kept, so the next AddSection with the same key posts them
// all (as many of the newest as fit).
func (b *Board) AddSection(ctx context.Context, key, section string) error {
	if strings.TrimSpace(section) == "" {
		return nil
	}
	full := b.o.Redact(section)
	section, cut := cutToFit(full, b.o.MaxLen, b.o.Lang)
	if cut {
		b.log.DebugContext(ctx, "phase comment section cut to fit one comment; its full text", "key", key, "text", full)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if key == b.st.PhaseKey && b.st.PhaseID != 0 {
		all := append(slices.Clone(b.st.Sections), section)
		if body := strings.Join(all, sectionSep); b.fits(body) {
			err := b.edit(ctx, b.st.PhaseID, postonce.Mark(body, b.st.PhaseMark), "appending to the "+key+" comment")
			if !errors.Is(err, forge.ErrNotFound) { // edited, or kept for the next edit
				b.st.Sections = all
				return err
			}
			return b.startPhase(ctx, key, all)
		}
		return b.startPhase(ctx, key, []string{section})
	}
	if key == b.st.PhaseKey {
		// A comment for key whose post failed: try again with its sections.
		return b.startPhase(ctx, key, append(slices.Clone(b.st.Sections), section))
	}
	return b.startPhase(ctx, key, []string{section})
}

// ReplaceSection edits the current phase comment for key, replacing its
// newest section equal to old (as AddSection would have posted it) with
// section. It reports false, changing nothing, when there is no such
// section in the comment (another phase, a comment that could not be
// posted, or one whose older sections were dropped) or the result would
// not fit: the caller then adds section instead. A comment that is gone
// (ErrNotFound on edit) is posted again with the sections.
func (b *Board) ReplaceSection(ctx context.Context, key, old, section string) (bool, error) {
	old, _ = cutToFit(b.o.Redact(old), b.o.MaxLen, b.o.Lang)
	section, _ = cutToFit(b.o.Redact(section), b.o.MaxLen, b.o.Lang)
	b.mu.Lock()
	defer b.mu.Unlock()
	if key != b.st.PhaseKey || b.st.PhaseID == 0 {
		return false, nil
	}
	i := len(b.st.Sections) - 1
	for i >= 0 && b.st.Sections[i] != old {
		i--
	}
	if i < 0 {
		return false, nil
	}
	all := slices.Clone(b.st.Sections)
	all[i] = section
	body := strings.Join(all, sectionSep)
	if !b.fits(body) {
		return false, nil
	}
	err := b.edit(ctx, b.st.PhaseID, postonce.Mark(body, b.st.PhaseMark), "updating the "+key+" comment")
	if errors.Is(err, forge.ErrNotFound) {
		return true, b.startPhase(ctx, key, all)
	}
	b.st.Sections = all // edited, or kept for the next edit
	return true, err
}

// startPhase posts a new phase comment for key holding the newest of
// sections that fit (at least the last one), and makes it the current one.
func (b *Board) startPhase(ctx context.Context, key string, sections []string) error {
	keep := len(sections) - 1
	for keep > 0 && b.fits(strings.Join(sections[keep-1:], sectionSep)) {
		keep--
	}
	if keep > 0 {
		b.log.WarnContext(ctx, "phase comment sections dropped: too long for one comment",
			"key", key, "dropped", keep)
	}
	sections = sections[keep:]
	c, mark, err := b.post(ctx, "phase-"+key, strings.Join(sections, sectionSep), "posting the "+key+" comment")
	b.st.PhaseKey, b.st.Sections, b.st.PhaseID = key, sections, 0
	if err != nil {
		return err
	}
	b.st.PhaseID, b.st.PhaseMark = c.ID, mark
	return nil
}

// Post posts a standalone comment (the closing one), all of it, split with
// Split when too long: its every part, the receipt at the end included, is
// the record of the run. A blank body is not posted.
func (b *Board) Post(ctx context.Context, body string) error {
	if strings.TrimSpace(body) == "" {
		return nil
	}
	p := NewPoster(PosterOptions{Commenter: b.o.Forge, Ref: b.o.Ref, MaxLen: b.o.MaxLen, Redact: b.o.Redact, Logger: b.log, Lang: b.o.Lang})
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := p.PostAll(ctx, b.o.Key("closing"), body); err != nil {
		b.log.WarnContext(ctx, "comment not posted", "doing", "posting a comment", "err", err)
		return fmt.Errorf("posting a comment on %s: %w", b.o.Ref, err)
	}
	return nil
}

func (b *Board) fits(body string) bool { return utf8.RuneCountInString(body) <= b.o.MaxLen }

// post posts body as one comment under the next key, what saying what it
// is, and returns it and the key's name; a failure is logged. A comment a
// stopped process posted under that key is taken instead, its body brought
// up to date.
func (b *Board) post(ctx context.Context, what, body, doing string) (task.Comment, string, error) {
	key := b.o.Key(what)
	find, err := look(ctx, b.o.Forge, b.o.Ref, key)
	var c task.Comment
	found := false
	if err == nil {
		c, found, err = postOnce(ctx, b.o.Forge, b.o.Ref, b.log, find, key.Name, body)
	}
	if err != nil {
		b.log.WarnContext(ctx, "comment not posted", "doing", doing, "err", err)
		return task.Comment{}, "", fmt.Errorf("%s on %s: %w", doing, b.o.Ref, err)
	}
	if marked := postonce.Mark(body, key.Name); found && c.Body != marked {
		// As the stopped process wrote it: brought up to date (a failed
		// edit is only logged: the next one brings it).
		_ = b.edit(ctx, c.ID, marked, doing)
	}
	return c, key.Name, nil
}

// edit replaces the body of comment id, logging a failure. A comment that
// is gone (ErrNotFound) is logged as such: the caller posts a new one.
func (b *Board) edit(ctx context.Context, id int64, body, doing string) error {
	err := b.o.Forge.EditComment(ctx, b.o.Ref, id, body)
	if err == nil {
		return nil
	}
	if errors.Is(err, forge.ErrNotFound) {
		b.log.WarnContext(ctx, "comment gone, posting a new one", "doing", doing, "comment_id", id, "err", err)
	} else {
		b.log.WarnContext(ctx, "comment not edited", "doing", doing, "comment_id", id, "err", err)
	}
	return fmt.Errorf("%s (comment %d) on %s: %w", doing, id, b.o.Ref, err)
}

// cutToFit returns body when it has at most maxLen characters (runes), and
// otherwise its beginning, cut at a line break where one is near, with an
// open code fence closed and a note saying how many characters were left
// out (in l): valid UTF-8 of at most maxLen characters. cut reports
// whether it cut. A maxLen below 64 counts as 64, as in Split.
func cutToFit(body string, maxLen int, l Lang) (fitted string, cut bool) {
	maxLen = max(maxLen, minSplit)
	total := utf8.RuneCountInString(body)
	if total <= maxLen {
		return body, false
	}
	// The note for total is at least as long as the note for what is left.
	note := func(left int) string { return fmt.Sprintf(cutNotes[l.norm()], left) }
	room := maxLen - utf8.RuneCountInString(note(total)) - (1 + maxFenceRun)
	if room < 8 {
		note = func(int) string { return shortCutNote }
		room = max(maxLen-utf8.RuneCountInString(shortCutNote)-(1+maxFenceRun), 1)
	}
	head := prefixRunes(body, room)
	if i := strings.LastIndexByte(head, '\n'); i > 0 && i >= len(head)/2 {
		head = head[:i]
	}
	head = strings.TrimRight(head, " \t\r\n")
	left := total - utf8.RuneCountInString(head)
	var open fence
	for _, line := range strings.SplitAfter(head, "\n") {
		open = fenceAfter(open, line)
	}
	if open.run != "" {
		head += "\n" + open.run
	}
	return head + note(left), true
}
