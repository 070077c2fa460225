package workspace

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/coding-agent/coding-agent/internal/sanitize"
)

// Nothing secret leaves in a push: Commit refuses to commit a change whose
// added lines or file names hold a secret, and Push refuses to push
// commits that do (one made by an earlier version, or by hand). A secret is
// what the detectors find: Options.Redact (the configured secrets, in every
// form the redactor knows), the workspace's own credential in every form,
// and tokens of well-known shapes (sanitize.Redactor). Binary files are read
// as text. The refusal is a *SecretError naming file and line, never the
// value; the checkout is left as it is, so the next round can take the
// secret out.

// Hit is where a secret is: a file of the change and the line (in the new
// file) that holds it; Line 0 is the file's name.
type Hit struct {
	Path string // redacted, should the name hold the secret
	Line int
}

// SecretError refuses a commit or push that would carry a secret.
type SecretError struct{ Hits []Hit }

func (e *SecretError) Error() string {
	where := make([]string, len(e.Hits))
	for i, h := range e.Hits {
		where[i] = h.Path + ":" + strconv.Itoa(h.Line)
		if h.Line == 0 {
			where[i] = h.Path + " (its name)"
		}
	}
	return "the change holds a secret, so it is neither committed nor pushed: " + strings.Join(where, ", ")
}

// diffFlags make a diff of what a change adds, for scanning: no context, no
// external program, binary files as text.
var diffFlags = []string{"-U0", "--no-color", "--no-ext-diff", "--no-textconv", "--text", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/"}

// scanStaged refuses (a *SecretError) the index's change against HEAD.
func (w *Workspace) scanStaged(ctx context.Context) error {
	diff, err := w.git(ctx, append(append([]string{"diff", "--cached"}, diffFlags...), "HEAD")...)
	if err != nil {
		return err
	}
	return w.scan(ctx, diff)
}

// scanOutgoing refuses (a *SecretError) the commits a push would send: those
// no ref of the forge's, as last seen, holds.
func (w *Workspace) scanOutgoing(ctx context.Context) error {
	args := append([]string{"log", "-p", "--format=", "--reverse"}, diffFlags...)
	diff, err := w.git(ctx, append(args, "HEAD", "--not", "--glob=refs/workspace/*", "--")...)
	if err != nil {
		return err
	}
	return w.scan(ctx, diff)
}

// scan looks for secrets in diff's added lines and file names.
func (w *Workspace) scan(ctx context.Context, diff string) error {
	if diff == "" {
		return nil
	}
	holds, err := w.detector(ctx)
	if err != nil {
		return err
	}
	if hits := findSecrets(diff, holds); len(hits) > 0 {
		for i := range hits {
			hits[i].Path = w.redact(hits[i].Path)
		}
		return &SecretError{Hits: hits}
	}
	return nil
}

// detector is whether a text holds a secret: one Options.Redact changes,
// or the credential, or a token of a known shape.
func (w *Workspace) detector(ctx context.Context) (func(string) bool, error) {
	var secrets []string
	if w.auth != nil {
		auth, err := w.auth(ctx)
		if err != nil {
			return nil, fmt.Errorf("getting the credential to look for it: %w", err)
		}
		secrets = credentials(auth)
	}
	r := sanitize.NewRedactor(secrets)
	return func(s string) bool { return r.Holds(s) || w.m.redact(s) != s }, nil
}

// findSecrets parses a unified diff (-U0) and returns where holds finds a
// secret: in an added line, in the added lines of a file taken together
// (a secret split over lines: reported at the file's first added line),
// or in a file's name.
func findSecrets(diff string, holds func(string) bool) []Hit {
	var hits []Hit
	var path string
	var added []string
	first, line, lineHit, inHunk := 0, 0, false, false
	flush := func() {
		if !lineHit && len(added) > 0 && holds(strings.Join(added, "\n")) {
			hits = append(hits, Hit{Path: path, Line: first})
		}
		added, lineHit, first = nil, false, 0
	}
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			flush()
			inHunk = false
		case !inHunk && strings.HasPrefix(l, "+++ "):
			path = diffPath(strings.TrimPrefix(l, "+++ "))
			if path != "" && holds(path) {
				hits = append(hits, Hit{Path: path, Line: 0})
			}
		case strings.HasPrefix(l, "@@ "):
			inHunk, line = true, hunkStart(l)
		case inHunk && strings.HasPrefix(l, "+"):
			if first == 0 {
				first = line
			}
			added = append(added, l[1:])
			if holds(l[1:]) {
				hits, lineHit = append(hits, Hit{Path: path, Line: line}), true
			}
			line++
		}
	}
	flush()
	return hits
}

// diffPath is the path of a "+++ " header's name ("" for /dev/null),
// unquoted.
func diffPath(name string) string {
	if strings.HasPrefix(name, `"`) {
		if u, err := strconv.Unquote(name); err == nil {
			name = u
		}
	}
	if name == "/dev/null" {
		return ""
	}
	return strings.TrimPrefix(name, "b/")
}

// hunkStart is the first line of the new side of a hunk header
// "@@ -a,b +c,d @@".
func hunkStart(h string) int {
	_, rest, _ := strings.Cut(h, " +")
	n, _, _ := strings.Cut(rest, " ")
	n, _, _ = strings.Cut(n, ",")
	i, _ := strconv.Atoi(n)
	return i
}
