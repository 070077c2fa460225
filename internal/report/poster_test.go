package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/golden"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/google/go-cmp/cmp"
)

var markerRE = regexp.MustCompile(`^\((\d+)/(\d+)\)\n`)

// checkParts checks what every split must hold: each part at most max runes,
// valid UTF-8, marked (i/n) in order, no fence left open, and the parts
// rejoined (markers and fence repairs removed) equal to body.
func checkParts(t *testing.T, body string, max int, parts []string) {
	t.Helper()
	if len(parts) < 2 {
		t.Fatalf("Split of %d runes with max %d gave %d part(s), want several", utf8.RuneCountInString(body), max, len(parts))
	}
	for i, p := range parts {
		if n := utf8.RuneCountInString(p); n > max {
			t.Errorf("part %d has %d runes, want at most %d:\n%s", i+1, n, max, p)
		}
		if !utf8.ValidString(p) {
			t.Errorf("part %d is not valid UTF-8: %q", i+1, p)
		}
		m := markerRE.FindStringSubmatch(p)
		if m == nil || m[1] != strconv.Itoa(i+1) || m[2] != strconv.Itoa(len(parts)) {
			t.Errorf("part %d does not start with the marker (%d/%d): %q", i+1, i+1, len(parts), head(p))
			continue
		}
		if open := openFence("", p[len(m[0]):]); open != "" {
			t.Errorf("part %d leaves the fence %q open, so it would not render:\n%s", i+1, open, p)
		}
	}
	got, err := unsplit(parts)
	if err != nil {
		t.Fatal(err)
	}
	if got != body {
		t.Errorf("parts rejoined differ from the body (-want +got):\n%s", cmp.Diff(body, got))
	}
}

// unsplit removes the markers and the fence repairs Split adds: a piece that
// ends inside a fence closes it with "\n" and the fence, and the next piece
// reopens it on its first line.
func unsplit(parts []string) (string, error) {
	var out strings.Builder
	for i, p := range parts {
		c := markerRE.ReplaceAllString(p, "")
		if open := openFence("", out.String()); open != "" {
			first, rest, ok := strings.Cut(c, "\n")
			if !ok || !strings.HasPrefix(first, open) {
				return "", fmt.Errorf("part %d does not reopen the fence %q cut at the end of part %d: %q", i+1, open, i, head(c))
			}
			c = rest
		}
		if i < len(parts)-1 {
			j := strings.LastIndexByte(c, '\n')
			if j >= 0 && c[j+1:] != "" && openFence("", out.String()+c[:j]) == c[j+1:] {
				c = c[:j] // the closing repair
			}
		}
		out.WriteString(c)
	}
	return out.String(), nil
}

// openFence returns the fence (its run of ` or ~) open after text, starting
// with open: a simple reading of Markdown fences, enough for these tests.
func openFence(open, text string) string {
	for _, line := range strings.Split(text, "\n") {
		l := strings.TrimSpace(line)
		if open != "" {
			if strings.HasPrefix(l, open) && strings.Trim(l, open[:1]) == "" {
				open = ""
			}
			continue
		}
		for _, f := range []string{"```", "~~~"} {
			if strings.HasPrefix(l, f) {
				open = l[:len(l)-len(strings.TrimLeft(l, f[:1]))]
			}
		}
	}
	return open
}

func head(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

func lines(n int, format string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, format, i+1)
	}
	return b.String()
}

func TestSplitShortBodyUnchanged(t *testing.T) {
	for _, body := range []string{"", "hello", "```go\nx := 1\n", strings.Repeat("é", 100)} {
		got := report.Split(body, 100)
		if len(got) != 1 || got[0] != body {
			t.Errorf("Split(%q, 100) = %q, want the body unchanged", head(body), got)
		}
	}
	// Exactly max runes, multi-byte: still one part.
	body := strings.Repeat("日", 70)
	if got := report.Split(body, 70); len(got) != 1 || got[0] != body {
		t.Errorf("Split of exactly max runes gave %d parts, want the body unchanged", len(got))
	}
}

func TestSplitAtLineBreaks(t *testing.T) {
	body := lines(40, "line %02d of a long comment\n") // 27 runes a line
	const max = 100
	parts := report.Split(body, max)
	checkParts(t, body, max, parts)
	for i, p := range parts {
		c := markerRE.ReplaceAllString(p, "")
		if !strings.HasSuffix(c, "\n") {
			t.Errorf("part %d was cut inside a line: %q", i+1, c)
		}
		if i < len(parts)-1 && utf8.RuneCountInString(p)+27 <= max {
			t.Errorf("part %d has room for the next line but was ended: %d runes", i+1, utf8.RuneCountInString(p))
		}
	}
}

func TestSplitRepairsCutFence(t *testing.T) {
	body := "Here is the change:\n\n```go\n" + lines(30, "\tx%02d := compute(ctx)\n") + "```\n\nAnd a second block:\n\n~~~\n" +
		lines(10, "plain %d\n") + "~~~\nThat is all.\n"
	const max = 120
	parts := report.Split(body, max)
	checkParts(t, body, max, parts)
	reopened := 0
	for i, p := range parts[:len(parts)-1] {
		if strings.HasSuffix(p, "\n```") && strings.HasPrefix(markerRE.ReplaceAllString(parts[i+1], ""), "```go\n") {
			reopened++
		}
	}
	if reopened == 0 {
		t.Errorf("no part closes the go fence and the next reopens it with its language:\n%s", strings.Join(parts, "\n----\n"))
	}
}

func TestSplitLongLineOnRuneBoundary(t *testing.T) {
	line := strings.Repeat("日本語のテキストü🙂", 40) // 400 runes, 1, 2 and 4 bytes each
	body := "intro\n" + line + "\noutro\n"
	const max = 70
	parts := report.Split(body, max)
	checkParts(t, body, max, parts)
	// A line longer than a part is cut inside: at least one part ends mid-line.
	if n := len(parts); n < 400/max+1 {
		t.Errorf("a 400-rune line at max %d gave %d parts, want at least %d", max, n, 400/max+1)
	}
}

func TestSplitLongLineInsideFence(t *testing.T) {
	body := "```\n" + strings.Repeat("αβγδε", 60) + "\n```\n"
	const max = 80
	checkParts(t, body, max, report.Split(body, max))
}

func TestSplitManyPartsMarkerWidth(t *testing.T) {
	// Over 100 parts: the "(i/n)" marker grows to "(100/1xx)" and must still fit.
	body := lines(700, "row %04d\n")
	const max = 64
	parts := report.Split(body, max)
	checkParts(t, body, max, parts)
	if len(parts) < 100 {
		t.Errorf("got %d parts, want at least 100 for this test to cover three-digit markers", len(parts))
	}
}

func TestSplitSmallMaxRaised(t *testing.T) {
	body := lines(30, "%d abcdefghij\n")
	parts := report.Split(body, 10)
	checkParts(t, body, 64, parts)
}

func TestSplitRandomBodies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"word ", "ünï ", "🙂", "日本", "\n", "\n\n", "```\n", "```python\n", "~~~\n", "  ```\n", "`inline` ",
		strings.Repeat("x", 90), "- [ ] item\n"}
	for n := range 200 {
		var b strings.Builder
		for range rng.IntN(300) + 50 {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		body := b.String()
		if openFence("", body) != "" {
			body += "\n```\n" // a body whose fences balance (the usual case)
			if openFence("", body) != "" {
				continue
			}
		}
		max := 64 + rng.IntN(200)
		if utf8.RuneCountInString(body) <= max {
			continue
		}
		t.Run(strconv.Itoa(n), func(t *testing.T) { checkParts(t, body, max, report.Split(body, max)) })
	}
}

// commenter is a fake report.Forge recording what it is asked to post:
// posted without the hidden lines of the keys, marked as it came.
type commenter struct {
	posted []string
	marked []string
	refs   []task.Ref
	failAt int // 1-based call that fails; 0: none
	err    error
	// listErr fails the listings; lists counts them.
	listErr error
	lists   int
}

func (c *commenter) PostComment(_ context.Context, ref task.Ref, body string) (task.Comment, error) {
	if len(c.posted)+1 == c.failAt {
		c.failAt = -1
		return task.Comment{}, c.err
	}
	c.posted = append(c.posted, postonce.Unmark(body))
	c.marked = append(c.marked, body)
	c.refs = append(c.refs, ref)
	return task.Comment{ID: int64(len(c.posted)), Author: "bot", Body: body, CreatedAt: time.Now()}, nil
}

// CommentsSince lists every comment posted, as the bot's.
func (c *commenter) CommentsSince(context.Context, task.Ref, time.Time) ([]task.Comment, error) {
	c.lists++
	if c.listErr != nil {
		return nil, c.listErr
	}
	var out []task.Comment
	for i, b := range c.marked {
		out = append(out, task.Comment{ID: int64(i + 1), Author: "bot", Body: b, CreatedAt: time.Now()})
	}
	return out, nil
}

func (c *commenter) BotUser(context.Context) (string, error) { return "bot", nil }

var ghRef = task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 12}

func TestPosterRedactsThenSplitsInOrder(t *testing.T) {
	const secret = "ghp_SECRETSECRETSECRET"
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") }
	// The secret sits where a cut falls: redacting after splitting would
	// leave pieces of it in two comments.
	body := strings.Repeat("a", 90) + secret + strings.Repeat("b", 200) + "\n" + lines(10, "line %d\n")
	c := &commenter{}
	p := report.NewPoster(report.PosterOptions{Commenter: c, Ref: ghRef, MaxLen: 100, Redact: redact})
	if err := p.PostAll(context.Background(), engine.Key{}, body); err != nil {
		t.Fatalf("PostAll: %v", err)
	}
	want := report.Split(redact(body), 100)
	if diff := cmp.Diff(want, c.posted); diff != "" {
		t.Errorf("posted parts differ from Split of the redacted body (-want +got):\n%s", diff)
	}
	for i, b := range c.posted {
		if strings.Contains(b, "SECRET") {
			t.Errorf("part %d carries (part of) the secret: %q", i+1, b)
		}
		if c.refs[i] != ghRef {
			t.Errorf("part %d posted on %v, want %v", i+1, c.refs[i], ghRef)
		}
	}
	checkParts(t, redact(body), 100, c.posted)
}

func TestPosterShortBodyOneComment(t *testing.T) {
	c := &commenter{}
	p := report.NewPoster(report.PosterOptions{Commenter: c, Ref: ghRef})
	if err := p.Post(context.Background(), engine.Key{}, "done: token abc"); err != nil {
		t.Fatalf("Post: %v", err)
	}
	if diff := cmp.Diff([]string{"done: token abc"}, c.posted); diff != "" {
		t.Errorf("posted (-want +got):\n%s", diff)
	}
}

func TestPosterErrorNamesPart(t *testing.T) {
	boom := errors.New("forge said no")
	c := &commenter{failAt: 2, err: boom}
	p := report.NewPoster(report.PosterOptions{Commenter: c, Ref: ghRef, MaxLen: 100})
	body := lines(9, "this is line number %d of it\n") // 3 parts at max 100
	if n := len(report.Split(body, 100)); n != 3 {
		t.Fatalf("test body splits into %d parts, want 3", n)
	}
	err := p.PostAll(context.Background(), engine.Key{}, body)
	if !errors.Is(err, boom) {
		t.Fatalf("PostAll error = %v, want it to wrap %v", err, boom)
	}
	if !strings.Contains(err.Error(), "part 2 of 3") {
		t.Errorf("PostAll error %q does not name part 2 of 3", err)
	}
	if len(c.posted) != 1 || !strings.HasPrefix(c.posted[0], "(1/3)\n") {
		t.Errorf("posted %q, want only part 1 (part 3 must not follow a failed part 2)", c.posted)
	}
}

func TestPosterSingleCommentErrorUnchanged(t *testing.T) {
	boom := errors.New("forge said no")
	p := report.NewPoster(report.PosterOptions{Commenter: &commenter{failAt: 1, err: boom}, Ref: ghRef})
	if err := p.Post(context.Background(), engine.Key{}, "short"); !errors.Is(err, boom) || strings.Contains(err.Error(), "part") {
		t.Errorf("Post error = %v, want %v without a part number", err, boom)
	}
	p = report.NewPoster(report.PosterOptions{Commenter: &commenter{failAt: 1, err: boom}, Ref: ghRef})
	if err := p.PostAll(context.Background(), engine.Key{}, "short"); !errors.Is(err, boom) || strings.Contains(err.Error(), "part") {
		t.Errorf("PostAll error = %v, want %v without a part number", err, boom)
	}
}

// A model's 2 MB reply is posted once, cut to the forge's limit with a
// note saying how much was left out; the full text is in the log at debug
// level (redacted, as the comment is).
func TestPostCutsALongReplyToOneComment(t *testing.T) {
	const secret = "ghp_SECRETSECRETSECRET"
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") }
	line := "fmt.Println(\"ü\") // " + secret + "\n"
	reply := "Here is the whole file:\n```go\n" + strings.Repeat(line, 2<<20/len(line)+1) + "```\nDone."
	for _, ref := range []task.Ref{ghRef, {Forge: task.GitLab, Repo: "grp/app", Kind: task.Issue, Number: 3}} {
		c, logs := &commenter{}, &bytes.Buffer{}
		p := report.NewPoster(report.PosterOptions{Commenter: c, Ref: ref, Redact: redact,
			Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err := p.Post(context.Background(), engine.Key{}, reply); err != nil {
			t.Fatalf("Post: %v", err)
		}
		if len(c.posted) != 1 {
			t.Fatalf("%s: posted %d comments, want 1", ref.Forge, len(c.posted))
		}
		got, full := c.posted[0], redact(reply)
		n, total := utf8.RuneCountInString(got), utf8.RuneCountInString(full)
		if n > report.MaxComment(ref.Forge) || !utf8.ValidString(got) {
			t.Errorf("%s: the comment has %d runes, over the limit, or is not valid UTF-8", ref.Forge, n)
		}
		m := regexp.MustCompile("\n```\n\n\\*✂️ (\\d+) more characters were cut\\*$").FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("%s: the comment does not end with the closed fence and the cut note: %q", ref.Forge, got[max(len(got)-200, 0):])
		}
		shown := strings.TrimSuffix(got, m[0])
		if left, _ := strconv.Atoi(m[1]); left != total-utf8.RuneCountInString(shown) || !strings.HasPrefix(full, shown) {
			t.Errorf("%s: the note says %s characters were left out; %d were", ref.Forge, m[1], total-utf8.RuneCountInString(shown))
		}
		if strings.Contains(got, "SECRET") || strings.Contains(logs.String(), "SECRET") {
			t.Errorf("%s: the secret reached the comment or the log", ref.Forge)
		}
		var rec struct {
			Level, Msg, Text string
			Chars            int
		}
		if err := json.Unmarshal(logs.Bytes(), &rec); err != nil || rec.Level != "DEBUG" || rec.Text != full || rec.Chars != total {
			t.Errorf("%s: the full text is not logged at debug level (%v): %s %q %d", ref.Forge, err, rec.Level, rec.Msg, rec.Chars)
		}
		t.Logf("%s: a %d-byte reply: one comment of %d characters", ref.Forge, len(reply), n)
	}
}

func TestPosterForgeLimits(t *testing.T) {
	if report.MaxComment(task.GitHub) != 65536 || report.MaxComment(task.GitLab) != 1000000 {
		t.Fatalf("MaxComment: github %d, gitlab %d; want 65536 and 1000000",
			report.MaxComment(task.GitHub), report.MaxComment(task.GitLab))
	}
	glRef := task.Ref{Forge: task.GitLab, Repo: "grp/app", Kind: task.MergeRequest, Number: 7}
	tests := []struct {
		name      string
		ref       task.Ref
		runes     int
		wantParts int
	}{
		// At the limit: the room a key's hidden line takes left.
		{"github at its limit", ghRef, report.GitHubMaxComment - postonce.MarkReserve, 1},
		{"github over its limit", ghRef, report.GitHubMaxComment - postonce.MarkReserve + 1, 2},
		{"gitlab over the github limit", glRef, report.GitHubMaxComment * 2, 1},
		{"gitlab at its limit", glRef, report.GitLabMaxComment - postonce.MarkReserve, 1},
		{"gitlab over its limit", glRef, report.GitLabMaxComment - postonce.MarkReserve + 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := strings.Repeat(strings.Repeat("ü", 99)+"\n", tt.runes/100) + strings.Repeat("x", tt.runes%100)
			c := &commenter{}
			p := report.NewPoster(report.PosterOptions{Commenter: c, Ref: tt.ref})
			if err := p.PostAll(context.Background(), engine.Key{}, body); err != nil {
				t.Fatalf("PostAll: %v", err)
			}
			if len(c.posted) != tt.wantParts {
				t.Fatalf("PostAll posted %d comments, want %d", len(c.posted), tt.wantParts)
			}
			if err := p.Post(context.Background(), engine.Key{}, body); err != nil {
				t.Fatalf("Post: %v", err)
			}
			if len(c.posted) != tt.wantParts+1 || (tt.wantParts == 1) != (c.posted[len(c.posted)-1] == body) {
				t.Fatalf("Post posted %d comments, want one, whole when it fits", len(c.posted)-tt.wantParts)
			}
			for i, b := range c.marked {
				if n := utf8.RuneCountInString(b); n > report.MaxComment(tt.ref.Forge) {
					t.Errorf("comment %d has %d runes, over the %s limit", i+1, n, tt.ref.Forge)
				}
			}
		})
	}
}

func TestTemplates(t *testing.T) {
	failed, err := report.English.Failed("The model server answered 503 four times.", "coding agent failed", "coding agent", "", "", "")
	if err != nil {
		t.Fatalf("Failed: %v", err)
	}
	interrupted, err := report.English.Interrupted(7)
	if err != nil {
		t.Fatalf("Interrupted: %v", err)
	}
	storeFailed, err := report.English.StoreFailed(3, "state store: saving checkpoint of github:acme/app#12: disk I/O error (778)")
	if err != nil {
		t.Fatalf("StoreFailed: %v", err)
	}
	storeLost, err := report.English.StoreLost(2, "state store: saving checkpoint of github:acme/app#12: the state database /srv/data/coding-agent.db was removed while running")
	if err != nil {
		t.Fatalf("StoreLost: %v", err)
	}
	for name, got := range map[string]string{"failed": failed, "interrupted": interrupted, "storefailed": storeFailed, "storelost": storeLost} {
		t.Run(name, func(t *testing.T) { golden.Check(t, name, got) })
	}
	for _, want := range []string{"The model server answered 503 four times.", "`coding agent failed`", "add `coding agent`"} {
		if !strings.Contains(failed, want) {
			t.Errorf("Failed comment lacks %q:\n%s", want, failed)
		}
	}
	if !strings.Contains(storeFailed, "after step 3 ") || !strings.Contains(storeFailed, "disk I/O error (778)") {
		t.Errorf("StoreFailed comment lacks the step or the reason:\n%s", storeFailed)
	}
	if !strings.Contains(interrupted, "after step 7.") {
		t.Errorf("Interrupted comment lacks the step number:\n%s", interrupted)
	}
	// A reason is data, never a template.
	odd, err := report.English.Failed("{{.BotLabel}} <!-- x -->", "F", "B", "", "", "")
	if err != nil || !strings.Contains(odd, "{{.BotLabel}} <!-- x -->") {
		t.Errorf("Failed with template text in the reason = %q, %v; want the reason verbatim", odd, err)
	}
}

func TestDeliveryTemplates(t *testing.T) {
	got := map[string]string{}
	for name, d := range map[string]report.Delivery{
		"delivered_opened": {Commit: "0123456789abcdef0123456789abcdef01234567", Branch: "coding-agent/issue-12",
			Kind: "pull request", ChangeURL: "https://github.com/acme/app/pull/13", Opened: true, Draft: true},
		"delivered_updated": {Commit: "89abcdef", Branch: "coding-agent/issue-12", Kind: "merge request",
			ChangeURL: "https://gitlab.com/acme/app/-/merge_requests/4"},
		"delivered_nothing": {Branch: "feature/x", Kind: "pull request"},
	} {
		body, err := report.English.Delivered(d)
		if err != nil {
			t.Fatal(err)
		}
		got[name] = body
	}
	failedKept, err := report.English.Failed("The tests fail.", "coding agent failed", "coding agent", "workspaces/github/acme/app/issue-12", "", "")
	if err != nil {
		t.Fatal(err)
	}
	got["failed_kept"] = failedKept
	kept, err := report.English.Kept("workspaces/github/acme/app/issue-12")
	if err != nil {
		t.Fatal(err)
	}
	got["kept"] = kept
	patch, err := report.English.Patch("pull request", "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+```b\n+````c\n")
	if err != nil {
		t.Fatal(err)
	}
	got["patch"] = patch
	for name, body := range got {
		t.Run(name, func(t *testing.T) { golden.Check(t, name, body) })
	}
}

func TestTakenOverTemplates(t *testing.T) {
	for name, to := range map[string]report.TakeOver{
		"takenover_lapsed": {From: "host-a, pid 1, instance 0a1b2c3d4e5f", To: "host-b",
			Until: "2026-11-24 08:30:00 UTC"},
		"takenover_released": {From: "host-a, pid 1, instance 0a1b2c3d4e5f", To: "host-b",
			Released: true},
	} {
		body, err := report.English.TakenOver(to)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) { golden.Check(t, name, body) })
	}
}

// TestDeliveredSaysWhatWasLeftOut: the comment lists each file the commit
// did not take and why, each name a code span that no backtick or line
// break in it can end.
func TestDeliveredSaysWhatWasLeftOut(t *testing.T) {
	body, err := report.English.Delivered(report.Delivery{Commit: "89abcdef", Branch: "b", Kind: "pull request",
		LeftOut: []report.LeftOut{{Path: "src/__pycache__/", Reason: "build output"}, {Path: "a`b\nc.bin", Reason: "too large"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"These files were not committed:", "- `src/__pycache__/`: build output", "- ``a`b ⏎ c.bin``: too large"} {
		if !strings.Contains(body, want) {
			t.Errorf("the comment lacks %q:\n%s", want, body)
		}
	}
}

// A comment whose key is in doubt (a stopped process may have posted it)
// is looked for first, by its key: found, it is not posted again; missing,
// it is. A key not in doubt reads nothing. Of a comment split in parts,
// only the parts missing are posted.
func TestPosterLooksForAKeyInDoubt(t *testing.T) {
	c := &commenter{}
	p := report.NewPoster(report.PosterOptions{Commenter: c, Ref: ghRef, MaxLen: 100})
	ctx := context.Background()
	noErr(t, p.Post(ctx, engine.Key{Name: "r/1/step"}, "Writing hello.txt."))
	if c.lists != 0 || len(c.posted) != 1 {
		t.Fatalf("%d listings, %d posts; want none and 1", c.lists, len(c.posted))
	}
	if key, _ := postonce.KeyOf(c.marked[0]); key != "r/1/step" {
		t.Errorf("posted under key %q, want r/1/step", key)
	}
	// Resumed: the same step again, in doubt, in other words (a model's
	// reply is the same, a receipt's duration may not be).
	noErr(t, p.Post(ctx, engine.Key{Name: "r/1/step", Doubt: true}, "Writing hello.txt now."))
	if c.lists != 1 || len(c.posted) != 1 {
		t.Errorf("%d listings, %d posts; want 1 and still 1: the comment was there", c.lists, len(c.posted))
	}
	noErr(t, p.Post(ctx, engine.Key{Name: "r/2/step", Doubt: true}, "Writing bye.txt."))
	if len(c.posted) != 2 {
		t.Errorf("%d posts, want 2: a key in doubt that is not there is posted", len(c.posted))
	}

	// A notice split in three, the process stopped after the first part.
	long := lines(20, "line %d of the notice\n")
	c.failAt, c.err = len(c.posted)+2, errors.New("killed")
	if err := p.PostAll(ctx, engine.Key{Name: "r/3/failed"}, long); err == nil {
		t.Fatal("PostAll did not fail")
	}
	before := len(c.posted)
	noErr(t, p.PostAll(ctx, engine.Key{Name: "r/3/failed", Doubt: true}, long))
	parts := report.Split(long, 100)
	if got := c.posted[before-1:]; len(parts) < 3 || !slices.Equal(got, parts) {
		t.Errorf("the parts on the forge %q, want each of %d once, in order", got, len(parts))
	}

	// A look that fails posts nothing: posting blind could post twice.
	c.listErr = errors.New("502")
	n := len(c.posted)
	if err := p.Post(ctx, engine.Key{Name: "r/4/closing", Doubt: true}, "Done."); err == nil || len(c.posted) != n {
		t.Errorf("error %v after a failed look, %d posts; want an error and none", err, len(c.posted)-n)
	}
	// The zero Key is a comment of its own.
	c.listErr = nil
	noErr(t, p.Post(ctx, engine.Key{}, "Taken over."))
	if key, ok := postonce.KeyOf(c.marked[len(c.marked)-1]); !ok || key == "" {
		t.Errorf("a comment posted with the zero Key carries no key: %q", c.marked[len(c.marked)-1])
	}
}
