package postonce

import (
	"regexp"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
)

// Every comment the daemon posts ends with a hidden line naming its key
// (Mark): a run's id, the comment's number in the run and what it is. The
// key is what identifies a comment that landed, both to a retried POST
// (Landed) and to a run resumed after its process stopped, which looks for
// the comment the stopped process may have posted before posting it again
// (Keyed). Forges render the line as nothing.

const markPrefix, markSuffix = "<!-- coding-agent comment: ", " -->"

// keyChars is what a key may be made of: it must not end the HTML comment
// or spread over lines.
var keyChars = regexp.MustCompile(`^[A-Za-z0-9._/#-]+$`)

var markLine = regexp.MustCompile(`(?m)^<!-- coding-agent comment: ([A-Za-z0-9._/#-]+) -->$`)

// MarkReserve is the room a mark takes at most, in characters: a body cut
// to the forge's limit less this still fits with its mark.
const MarkReserve = 120

// Mark returns body ending with the hidden line that names key; any mark
// body carried is replaced. A key that is empty, too long or holds other
// characters than letters, digits and ._/#- leaves body unmarked.
func Mark(body, key string) string {
	body = Unmark(body)
	if !keyChars.MatchString(key) || len(markPrefix)+len(key)+len(markSuffix)+2 > MarkReserve {
		return body
	}
	return body + "\n\n" + markPrefix + key + markSuffix
}

// Unmark returns body without its mark: the body Mark was given.
func Unmark(body string) string {
	if !strings.Contains(body, markPrefix) {
		return body
	}
	end := markEnd.FindStringIndex(body)
	if end == nil {
		return body
	}
	return body[:end[0]]
}

// markEnd is what Mark appends, as a forge may return it (line ends
// aside).
var markEnd = regexp.MustCompile(`\r?\n\r?\n<!-- coding-agent comment: [A-Za-z0-9._/#-]+ -->\s*$`)

// KeyOf returns the key body is marked with (its last mark line); false
// for a body without one.
func KeyOf(body string) (string, bool) {
	if !strings.Contains(body, markPrefix) {
		return "", false
	}
	m := markLine.FindAllStringSubmatch(strings.ReplaceAll(body, "\r\n", "\n"), -1)
	if m == nil {
		return "", false
	}
	return m[len(m)-1][1], true
}

// Keyed returns the newest of cs that bot created at or after since and
// that is marked with key. System notes, and comments by anyone
// else (who could copy a mark), do not count.
func Keyed(cs []task.Comment, bot, key string, since time.Time) (task.Comment, bool) {
	var found task.Comment
	ok := false
	for _, c := range cs {
		if c.System || c.CreatedAt.Before(since) || !strings.EqualFold(c.Author, bot) {
			continue
		}
		if k, marked := KeyOf(c.Body); !marked || k != key {
			continue
		}
		if !ok || c.CreatedAt.After(found.CreatedAt) || c.CreatedAt.Equal(found.CreatedAt) && c.ID > found.ID {
			found, ok = c, true
		}
	}
	return found, ok
}
