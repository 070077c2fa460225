package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/google/go-cmp/cmp"
)

// fakeForge is an in-memory issue implementing report.BoardForge: comments
// by id, in the order they were posted, with failures queued per call.
type fakeForge struct {
	t        *testing.T
	mu       sync.Mutex
	nextID   int64
	ids      []int64
	bodies   map[int64]string // as posted and edited, marked with their keys
	created  map[int64]time.Time
	postErrs []error // the next posts fail with these, in order
	editErrs []error // the next edits fail with these, in order
	posts    int
	edits    int
}

func newFakeForge(t *testing.T) *fakeForge {
	return &fakeForge{t: t, nextID: 100, bodies: map[int64]string{}, created: map[int64]time.Time{}}
}

func (f *fakeForge) PostComment(_ context.Context, ref task.Ref, body string) (task.Comment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checkRef(ref)
	f.posts++
	if len(f.postErrs) > 0 {
		err := f.postErrs[0]
		f.postErrs = f.postErrs[1:]
		return task.Comment{}, err
	}
	f.nextID++
	f.ids = append(f.ids, f.nextID)
	f.bodies[f.nextID] = body
	f.created[f.nextID] = time.Now()
	return task.Comment{ID: f.nextID, Author: "bot", Body: body}, nil
}

// CommentsSince lists the comments as the bot's, in order.
func (f *fakeForge) CommentsSince(_ context.Context, ref task.Ref, since time.Time) ([]task.Comment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checkRef(ref)
	var out []task.Comment
	for _, id := range f.ids {
		if !f.created[id].Before(since) {
			out = append(out, task.Comment{ID: id, Author: "bot", Body: f.bodies[id], CreatedAt: f.created[id]})
		}
	}
	return out, nil
}

func (f *fakeForge) BotUser(context.Context) (string, error) { return "bot", nil }

func (f *fakeForge) EditComment(_ context.Context, ref task.Ref, id int64, body string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checkRef(ref)
	f.edits++
	if len(f.editErrs) > 0 {
		err := f.editErrs[0]
		f.editErrs = f.editErrs[1:]
		return err
	}
	if _, ok := f.bodies[id]; !ok {
		return fmt.Errorf("editing comment %d: %w", id, forge.ErrNotFound)
	}
	f.bodies[id] = body
	return nil
}

func (f *fakeForge) checkRef(ref task.Ref) {
	if ref != ghRef {
		f.t.Errorf("comment call on %v, want %v", ref, ghRef)
	}
}

// remove deletes a comment, as a person on the issue might.
func (f *fakeForge) remove(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.bodies, id)
	f.ids = slices.DeleteFunc(f.ids, func(x int64) bool { return x == id })
}

// comments returns the bodies on the issue, oldest first, without the
// hidden lines of their keys (marked says each has one).
func (f *fakeForge) comments() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, id := range f.ids {
		out = append(out, f.unmarked(id))
	}
	return out
}

func (f *fakeForge) body(id int64) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unmarked(id)
}

func (f *fakeForge) unmarked(id int64) string {
	if _, ok := postonce.KeyOf(f.bodies[id]); !ok && f.bodies[id] != "" {
		f.t.Errorf("comment %d carries no key: %q", id, f.bodies[id])
	}
	return postonce.Unmark(f.bodies[id])
}

// fakeBoard returns a Board on a fake forge.
func fakeBoard(t *testing.T, maxLen int, st report.BoardState) (*report.Board, *fakeForge) {
	f := newFakeForge(t)
	return report.NewBoard(report.BoardOptions{Forge: f, Ref: ghRef, MaxLen: maxLen}, st), f
}

const sep = "\n\n---\n\n"

var ctx = context.Background()

// noErr fails the test on err.
func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantComments(t *testing.T, f *fakeForge, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, f.comments()); diff != "" {
		t.Errorf("comments on the issue (-want +got):\n%s", diff)
	}
}

func TestBoardProgressEditsInPlace(t *testing.T) {
	b, f := fakeBoard(t, 0, report.BoardState{})
	noErr(t, b.SetProgress(ctx, "progress v1"))
	id := b.State().ProgressID
	if id == 0 {
		t.Fatal("no progress id after the first SetProgress")
	}
	noErr(t, b.SetProgress(ctx, "progress v2"))
	noErr(t, b.SetProgress(ctx, " \n\t"))
	if got := b.State().ProgressID; got != id {
		t.Errorf("progress id changed from %d to %d", id, got)
	}
	wantComments(t, f, "progress v2")
	if f.posts != 1 || f.edits != 1 {
		t.Errorf("%d posts and %d edits, want 1 and 1 (a blank body is not sent)", f.posts, f.edits)
	}
}

func TestBoardSectionsAppendByEditThenNewKey(t *testing.T) {
	b, f := fakeBoard(t, 0, report.BoardState{})
	noErr(t, b.AddSection(ctx, "planning", "s1"))
	noErr(t, b.AddSection(ctx, "planning", "s2"))
	noErr(t, b.AddSection(ctx, "planning", "   "))
	wantComments(t, f, "s1"+sep+"s2")
	first := b.State().PhaseID
	noErr(t, b.AddSection(ctx, "execution", "s3"))
	wantComments(t, f, "s1"+sep+"s2", "s3")
	st := b.State()
	if st.PhaseKey != "execution" || st.PhaseID == first || st.PhaseID == 0 || !slices.Equal(st.Sections, []string{"s3"}) {
		t.Errorf("state after a new key = %+v, want the execution comment holding s3", st)
	}
	if f.posts != 2 || f.edits != 1 {
		t.Errorf("%d posts and %d edits, want 2 and 1", f.posts, f.edits)
	}
}

func TestBoardOverflowStartsNewComment(t *testing.T) {
	const max = 200
	b, f := fakeBoard(t, max, report.BoardState{})
	s := func(c string) string { return strings.Repeat(c, 80) } // 80+7+80 fits, a third does not
	for _, c := range []string{"a", "b", "c", "d"} {
		noErr(t, b.AddSection(ctx, "execution", s(c)))
	}
	wantComments(t, f, s("a")+sep+s("b"), s("c")+sep+s("d"))
	for i, c := range f.comments() {
		if n := utf8.RuneCountInString(c); n > max {
			t.Errorf("comment %d has %d runes, over %d", i+1, n, max)
		}
	}
	if st := b.State(); st.PhaseKey != "execution" || len(st.Sections) != 2 {
		t.Errorf("state = %+v, want the second comment with its two sections", st)
	}
}

func TestBoardEditNotFoundPostsAgain(t *testing.T) {
	b, f := fakeBoard(t, 0, report.BoardState{})
	noErr(t, b.SetProgress(ctx, "p1"))
	noErr(t, b.AddSection(ctx, "planning", "s1"))
	st := b.State()
	f.remove(st.ProgressID)
	f.remove(st.PhaseID)
	noErr(t, b.SetProgress(ctx, "p2"))
	noErr(t, b.AddSection(ctx, "planning", "s2"))
	wantComments(t, f, "p2", "s1"+sep+"s2")
	got := b.State()
	if got.ProgressID == st.ProgressID || f.body(got.ProgressID) != "p2" {
		t.Errorf("progress id %d after its comment was deleted, want the new comment's", got.ProgressID)
	}
	if got.PhaseID == st.PhaseID || f.body(got.PhaseID) != "s1"+sep+"s2" {
		t.Errorf("phase id %d after its comment was deleted, want the new comment's", got.PhaseID)
	}
	// The new ids are edited from then on.
	noErr(t, b.SetProgress(ctx, "p3"))
	noErr(t, b.AddSection(ctx, "planning", "s3"))
	wantComments(t, f, "p3", "s1"+sep+"s2"+sep+"s3")
}

func TestBoardPostFailureKeepsSections(t *testing.T) {
	boom := errors.New("forge is down")
	b, f := fakeBoard(t, 0, report.BoardState{})
	f.postErrs = []error{boom, boom}
	if err := b.SetProgress(ctx, "p1"); !errors.Is(err, boom) {
		t.Fatalf("SetProgress error = %v, want %v", err, boom)
	}
	if err := b.AddSection(ctx, "planning", "s1"); !errors.Is(err, boom) {
		t.Fatalf("AddSection error = %v, want %v", err, boom)
	}
	st := b.State()
	if st.ProgressID != 0 || st.PhaseID != 0 {
		t.Errorf("state after failed posts = %+v, want no comment ids", st)
	}
	wantComments(t, f)
	noErr(t, b.AddSection(ctx, "planning", "s2"))
	noErr(t, b.SetProgress(ctx, "p2"))
	wantComments(t, f, "s1"+sep+"s2", "p2")
}

func TestBoardEditFailureKeepsSection(t *testing.T) {
	boom := errors.New("502 bad gateway")
	b, f := fakeBoard(t, 0, report.BoardState{})
	noErr(t, b.SetProgress(ctx, "p1"))
	noErr(t, b.AddSection(ctx, "planning", "s1"))
	before := b.State()
	f.editErrs = []error{boom, boom}
	if err := b.AddSection(ctx, "planning", "s2"); !errors.Is(err, boom) {
		t.Fatalf("AddSection error = %v, want %v", err, boom)
	}
	if err := b.SetProgress(ctx, "p2"); !errors.Is(err, boom) {
		t.Fatalf("SetProgress error = %v, want %v", err, boom)
	}
	after := b.State()
	if after.PhaseID != before.PhaseID || after.ProgressID != before.ProgressID {
		t.Errorf("a failed edit changed the comment ids: %+v → %+v", before, after)
	}
	wantComments(t, f, "p1", "s1")
	noErr(t, b.AddSection(ctx, "planning", "s3"))
	wantComments(t, f, "p1", "s1"+sep+"s2"+sep+"s3")
	if f.posts != 2 {
		t.Errorf("%d posts, want 2: a failed edit must not turn into a new comment", f.posts)
	}
}

func TestBoardRedacts(t *testing.T) {
	const secret = "ghp_SECRETSECRETSECRET"
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") }
	f := newFakeForge(t)
	b := report.NewBoard(report.BoardOptions{Forge: f, Ref: ghRef, MaxLen: 100, Redact: redact}, report.BoardState{})
	noErr(t, b.SetProgress(ctx, "token "+secret))
	noErr(t, b.SetProgress(ctx, "still "+secret))
	noErr(t, b.AddSection(ctx, "k", "a "+secret))
	noErr(t, b.AddSection(ctx, "k", "b "+secret))
	noErr(t, b.Post(ctx, strings.Repeat("x", 90)+secret+strings.Repeat("y", 200))) // split into several
	cs := f.comments()
	if len(cs) < 4 {
		t.Fatalf("got %d comments, want the progress, the phase and a split final", len(cs))
	}
	for i, c := range cs {
		if strings.Contains(c, "SECRET") {
			t.Errorf("comment %d carries (part of) the secret: %q", i+1, c)
		}
	}
	if !strings.Contains(cs[0], "still [redacted]") || !strings.Contains(cs[1], "a [redacted]"+sep+"b [redacted]") {
		t.Errorf("redacted bodies not as expected: %q", cs[:2])
	}
	raw, _ := json.Marshal(b.State())
	if strings.Contains(string(raw), "SECRET") {
		t.Errorf("state carries the secret: %s", raw)
	}
}

func TestBoardStateRoundTrip(t *testing.T) {
	b1, f := fakeBoard(t, 0, report.BoardState{})
	noErr(t, b1.SetProgress(ctx, "p1"))
	noErr(t, b1.AddSection(ctx, "execution:a1", "s1"))
	raw, err := json.Marshal(b1.State())
	noErr(t, err)
	var st report.BoardState
	noErr(t, json.Unmarshal(raw, &st))
	if diff := cmp.Diff(b1.State(), st); diff != "" {
		t.Fatalf("state through JSON (-want +got):\n%s", diff)
	}
	b2 := report.NewBoard(report.BoardOptions{Forge: f, Ref: ghRef}, st)
	noErr(t, b2.SetProgress(ctx, "p2"))
	noErr(t, b2.AddSection(ctx, "execution:a1", "s2"))
	wantComments(t, f, "p2", "s1"+sep+"s2")
	if f.posts != 2 {
		t.Errorf("%d posts, want 2: the restarted board must edit the same comments", f.posts)
	}
	// The new board's state is its own: changing it leaves the old one alone.
	if got := b1.State().Sections; !slices.Equal(got, []string{"s1"}) {
		t.Errorf("first board's sections changed to %q", got)
	}
	// The zero state marshals to an empty object.
	if raw, _ := json.Marshal(report.BoardState{}); string(raw) != "{}" {
		t.Errorf("zero state marshals to %s, want {}", raw)
	}
}

func TestBoardCutsInsteadOfSplitting(t *testing.T) {
	const max = 300
	body := "## progress\n\n```text\n" + strings.Repeat("日本語のログ行 🙂\n", 60) + "```\n"
	b, f := fakeBoard(t, max, report.BoardState{})
	noErr(t, b.SetProgress(ctx, body))
	noErr(t, b.AddSection(ctx, "k", body))
	cs := f.comments()
	if len(cs) != 2 {
		t.Fatalf("got %d comments, want 2: a long progress or section is cut, never split", len(cs))
	}
	for i, c := range cs {
		if n := utf8.RuneCountInString(c); n > max {
			t.Errorf("comment %d has %d runes, over %d", i+1, n, max)
		}
		if !utf8.ValidString(c) {
			t.Errorf("comment %d is not valid UTF-8", i+1)
		}
		if open := openFence("", c); open != "" {
			t.Errorf("comment %d leaves the fence %q open:\n%s", i+1, open, c)
		}
		if !strings.Contains(c, "✂️") || !strings.HasPrefix(c, "## progress\n\n```text\n日本語のログ行 🙂\n") {
			t.Errorf("comment %d is not the start of the body with a cut note:\n%s", i+1, c)
		}
	}
	// A body that fits is left as it is.
	noErr(t, b.SetProgress(ctx, "short"))
	if got := f.comments()[0]; got != "short" {
		t.Errorf("short progress = %q", got)
	}
}

func TestBoardPostSplits(t *testing.T) {
	b, f := fakeBoard(t, 100, report.BoardState{})
	body := lines(9, "this is line number %d of it\n")
	noErr(t, b.Post(ctx, body))
	noErr(t, b.Post(ctx, "\n"))
	wantComments(t, f, report.Split(body, 100)...)
	if st := b.State(); st.ProgressID != 0 || st.PhaseID != 0 {
		t.Errorf("Post changed the state: %+v", st)
	}
	boom := errors.New("refused")
	f.postErrs = []error{boom}
	if err := b.Post(ctx, "final"); !errors.Is(err, boom) {
		t.Errorf("Post error = %v, want %v", err, boom)
	}
}

func TestBoardLogsFailures(t *testing.T) {
	var buf bytes.Buffer
	f := newFakeForge(t)
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	b := report.NewBoard(report.BoardOptions{Forge: f, Ref: ghRef, Logger: log}, report.BoardState{})
	f.postErrs = []error{errors.New("boom")}
	if err := b.AddSection(ctx, "planning", "s1"); err == nil {
		t.Fatal("AddSection hid the post failure")
	}
	var rec map[string]any
	noErr(t, json.Unmarshal(buf.Bytes(), &rec))
	if rec["level"] != "WARN" || rec["ref"] != ghRef.String() || !strings.Contains(fmt.Sprint(rec["doing"]), "planning") || rec["err"] != "boom" {
		t.Errorf("log record = %v, want a warning naming the ref, what was done and the error", rec)
	}
}

func TestBoardConcurrentUse(t *testing.T) {
	b, f := fakeBoard(t, 0, report.BoardState{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_ = b.SetProgress(ctx, fmt.Sprintf("p%d", i))
			_ = b.AddSection(ctx, "k", fmt.Sprintf("s%d", i))
		})
	}
	wg.Wait()
	cs := f.comments()
	if len(cs) != 2 || strings.Count(cs[0]+cs[1], "s") != 8 {
		t.Errorf("after concurrent updates: %q, want one progress comment and one comment with all 8 sections", cs)
	}
}

// A section is replaced in place in the current phase comment; a section
// that is not in it (another key, or never posted) is not, and nothing
// changes.
func TestBoardReplaceSection(t *testing.T) {
	b, f := fakeBoard(t, 0, report.BoardState{})
	noErr(t, b.AddSection(ctx, "execution", "s1"))
	noErr(t, b.AddSection(ctx, "execution", "s2"))
	ok, err := b.ReplaceSection(ctx, "execution", "s1", "s1 (×2)")
	if !ok || err != nil {
		t.Fatalf("ReplaceSection = %v, %v", ok, err)
	}
	wantComments(t, f, "s1 (×2)"+sep+"s2")
	for _, tc := range []struct{ key, old string }{{"planning", "s2"}, {"execution", "s9"}} {
		if ok, err := b.ReplaceSection(ctx, tc.key, tc.old, "x"); ok || err != nil {
			t.Errorf("ReplaceSection(%s, %s) = %v, %v; want false", tc.key, tc.old, ok, err)
		}
	}
	wantComments(t, f, "s1 (×2)"+sep+"s2")
	if got := b.State().Sections; len(got) != 2 || got[0] != "s1 (×2)" {
		t.Errorf("sections %q", got)
	}
}

// A Board restarted from a state saved before its last comments landed
// (its process stopped after posting them) takes those comments, found by
// their keys, instead of posting them again: the progress comment and the
// phase comment are edited up to date in place, the closing comment is
// left as it is. Edits keep each comment's key.
func TestBoardTakesTheCommentsAStoppedProcessPosted(t *testing.T) {
	f := newFakeForge(t)
	keys := &engine.Keys{Run: "r"}
	b1 := report.NewBoard(report.BoardOptions{Forge: f, Ref: ghRef, Key: keys.Next}, report.BoardState{})
	noErr(t, b1.SetProgress(ctx, "progress 0/1"))
	noErr(t, b1.AddSection(ctx, "execution-1", "a1 started"))
	noErr(t, b1.Post(ctx, "Done."))
	// The checkpoint held none of it: the restarted board numbers the
	// same comments the same way, in doubt.
	again := &engine.Keys{Run: "r", Doubt: true}
	b2 := report.NewBoard(report.BoardOptions{Forge: f, Ref: ghRef, Key: again.Next}, report.BoardState{})
	noErr(t, b2.SetProgress(ctx, "progress 1/1"))
	noErr(t, b2.AddSection(ctx, "execution-1", "a1 started again"))
	noErr(t, b2.Post(ctx, "Done, again."))
	wantComments(t, f, "progress 1/1", "a1 started again", "Done.")
	if f.posts != 3 {
		t.Errorf("%d posts, want the first board's 3 only", f.posts)
	}
	st := b2.State()
	if st.ProgressID != f.ids[0] || st.PhaseID != f.ids[1] {
		t.Errorf("state %+v, want the comments found, %v", st, f.ids)
	}
	noErr(t, b2.AddSection(ctx, "execution-1", "a1 done"))
	for _, id := range f.ids[:2] {
		if key, ok := postonce.KeyOf(f.bodies[id]); !ok || !strings.HasPrefix(key, "r/") {
			t.Errorf("comment %d lost its key on an edit: %q", id, f.bodies[id])
		}
	}
}
