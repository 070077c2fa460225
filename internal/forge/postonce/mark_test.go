package postonce_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/task"
)

// A marked body names its key in a last hidden line, which Unmark takes
// off again; marking again replaces the key; a key that could break out of
// the HTML comment or spread over lines marks nothing.
func TestMark(t *testing.T) {
	body := "Writing hello.txt.\n\n```\ncode\n```\n"
	marked := postonce.Mark(body, "3f9a0c1b2d4e/2/step")
	if !strings.HasSuffix(marked, "\n\n<!-- coding-agent comment: 3f9a0c1b2d4e/2/step -->") {
		t.Errorf("marked body ends %q", marked[max(0, len(marked)-60):])
	}
	if key, ok := postonce.KeyOf(marked); !ok || key != "3f9a0c1b2d4e/2/step" {
		t.Errorf("KeyOf = %q, %v", key, ok)
	}
	if got := postonce.Unmark(marked); got != body {
		t.Errorf("Unmark = %q, want the body as it was", got)
	}
	// As a forge may store it: CRLF line ends, a blank after.
	stored := strings.ReplaceAll(marked, "\n", "\r\n") + "\r\n"
	if key, ok := postonce.KeyOf(stored); !ok || key != "3f9a0c1b2d4e/2/step" {
		t.Errorf("KeyOf of the stored body = %q, %v", key, ok)
	}
	again := postonce.Mark(marked, "3f9a0c1b2d4e/3/closing#2")
	if key, _ := postonce.KeyOf(again); key != "3f9a0c1b2d4e/3/closing#2" || strings.Count(again, "coding-agent comment") != 1 {
		t.Errorf("marking again gave %q", again)
	}
	for _, bad := range []string{"", "a -->b", "a\nb", "ünï", strings.Repeat("k", postonce.MarkReserve)} {
		if got := postonce.Mark(body, bad); got != body {
			t.Errorf("Mark with key %q changed the body: %q", bad, got)
		}
	}
	if _, ok := postonce.KeyOf(body); ok {
		t.Error("KeyOf found a key in a body without one")
	}
	if n := len(postonce.Mark("", strings.Repeat("k", 60))); n > postonce.MarkReserve {
		t.Errorf("a mark of a 60-character key takes %d characters, more than MarkReserve", n)
	}
}

// A comment is found by its key: the bot's newest marked with it, created
// in the window, whatever its words (a resumed run's body may differ from
// the stopped process's, a receipt's duration for one). A mark copied by
// someone else is not taken.
func TestKeyed(t *testing.T) {
	since := t0.Add(-postonce.ClockSkew)
	key := "run1/4/closing"
	cs := []task.Comment{
		{ID: 1, Author: "bot", Body: postonce.Mark("done", key), CreatedAt: since.Add(-time.Second)},    // before the window
		{ID: 2, Author: "alice", Body: postonce.Mark("done", key), CreatedAt: t0},                       // someone else
		{ID: 3, Author: "bot", Body: postonce.Mark("done", key), CreatedAt: t0, System: true},           // a system note
		{ID: 4, Author: "bot", Body: postonce.Mark("done", "run1/5/closing"), CreatedAt: t0},            // another key
		{ID: 5, Author: "bot", Body: "done", CreatedAt: t0},                                             // no key
		{ID: 6, Author: "Bot", Body: postonce.Mark("done in 3s", key), CreatedAt: t0.Add(time.Second)},  // ours
		{ID: 7, Author: "bot", Body: postonce.Mark("done in 2s", key), CreatedAt: t0.Add(-time.Second)}, // ours, older
	}
	if got, ok := postonce.Keyed(cs, "bot", key, since); !ok || got.ID != 6 {
		t.Errorf("Keyed = %+v, %v; want comment 6", got, ok)
	}
	if _, ok := postonce.Keyed(cs[:5], "bot", key, since); ok {
		t.Error("Keyed took a comment outside the window, someone else's, a system note, or one of another key or none")
	}
	// A retried POST finds a marked comment by its key too.
	if got, ok := postonce.Landed(cs, "bot", postonce.Mark("done in 4s", key), since); !ok || got.ID != 6 {
		t.Errorf("Landed of a marked body = %+v, %v; want comment 6", got, ok)
	}
}
