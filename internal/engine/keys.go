package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// A comment is posted at most once, even across a crash. Every comment the
// daemon posts for a task carries its key (a hidden line,
// postonce.Mark): the run's id, the comment's number in the run and what
// it is. The checkpoint holds the run's id and how many comments it has
// numbered, so a comment's key is fixed by the checkpoint saved before it
// is posted. A run resumed from a checkpoint goes again through what the
// stopped process did after saving it, numbering the same comments the
// same way; until it saves a checkpoint of its own, each comment it is
// about to post may be on the forge already, and it looks for the key
// there first (report.Poster, report.Board). After that save, the
// comments are new.

// Key names one comment and says whether to look for it before posting.
type Key struct {
	Name string
	// Doubt: a process that stopped may have posted this very comment
	// after saving the checkpoint this run resumed. It is looked for on
	// the forge, among the bot's comments created since Since (less the
	// forge's clock skew; zero: all of them), before it is posted.
	Doubt bool
	Since time.Time
}

// Keys numbers the comments of one run (one round of a task). The zero
// value is ready to use: it takes an id of its own at its first comment.
type Keys struct {
	Run string `json:"run"`
	Seq int    `json:"seq"`
	// Doubt and Since are a resumed run's, until it saves (see Key).
	Doubt bool      `json:"-"`
	Since time.Time `json:"-"`
}

// Next names the next comment; what says what it is ("step", "closing",
// "delivery"; other characters than ASCII letters, digits and -_. become
// -): a stopped process that went another way numbered another comment,
// which is not taken for this one.
func (k *Keys) Next(what string) Key {
	if k.Run == "" {
		k.Run = newRunID()
	}
	k.Seq++
	what = strings.Map(func(r rune) rune {
		if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.') {
			return r
		}
		return '-'
	}, what)
	return Key{Name: fmt.Sprintf("%s/%d/%s", k.Run, k.Seq, what), Doubt: k.Doubt, Since: k.Since}
}

// newRunID is a run's id: unique among the runs of a task.
func newRunID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Key names the run's next comment (see Keys.Next).
func (r *Run) Key(what string) Key { return r.st.Keys.Next(what) }

// Post posts a comment on the task through the run's Poster (Input.Post),
// named by the run's next key.
func (r *Run) Post(ctx context.Context, what, body string) error {
	if r.in.Post == nil {
		return errors.New("engine: the run has no Poster")
	}
	return r.in.Post.Post(ctx, r.Key(what), body)
}
