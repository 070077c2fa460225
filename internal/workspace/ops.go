package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/coding-agent/coding-agent/internal/report"
)

// Head is the commit id of HEAD.
func (w *Workspace) Head(ctx context.Context) (string, error) {
	out, err := w.git(ctx, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return "", fmt.Errorf("reading the head of %s: %w", w.ref, err)
	}
	return strings.TrimSpace(out), nil
}

// Ahead reports whether the branch holds commits Base lacks: work that a
// pull or merge request can carry (committed here, pushed or not).
func (w *Workspace) Ahead(ctx context.Context) (bool, error) {
	out, err := w.git(ctx, "rev-list", "--count", baseRef+"..HEAD")
	if err != nil {
		return false, fmt.Errorf("comparing %s of %s with %s: %w", w.Branch, w.ref, w.Base, err)
	}
	return strings.TrimSpace(out) != "0", nil
}

// Changes reports whether the checkout has uncommitted changes, untracked
// files included (ignored ones not).
func (w *Workspace) Changes(ctx context.Context) (bool, error) {
	out, err := w.git(ctx, "status", "--porcelain", "-z")
	if err != nil {
		return false, fmt.Errorf("reading the changes of %s: %w", w.ref, err)
	}
	return out != "", nil
}

// Commit stages every change (untracked files included, ignored ones and
// what stage leaves out not; w.LeftOut says which) and makes one commit with
// message, kept as written (a line starting with '#' stays). It returns the
// new commit's id, or "" when nothing changed. A change that holds a secret
// is not committed: a *SecretError.
func (w *Workspace) Commit(ctx context.Context, message string) (string, error) {
	if strings.TrimSpace(message) == "" {
		return "", fmt.Errorf("committing in %s: the message is empty", w.ref)
	}
	return w.commit(ctx, func([]report.FileChange) (string, error) { return message, nil })
}

func (w *Workspace) commit(ctx context.Context, write func(staged []report.FileChange) (string, error)) (string, error) {
	leftOut, err := w.stage(ctx, "")
	if err != nil {
		return "", fmt.Errorf("committing in %s: %w", w.ref, err)
	}
	w.LeftOut = leftOut
	_, err = w.git(ctx, "diff", "--cached", "--quiet")
	var e *Error
	if err == nil {
		return "", nil
	} else if !errors.As(err, &e) || e.Code != 1 {
		return "", fmt.Errorf("committing in %s: %w", w.ref, err)
	}
	if err := w.scanStaged(ctx); err != nil {
		return "", fmt.Errorf("committing in %s: %w", w.ref, err)
	}
	staged, err := w.diffFiles(ctx, "--cached")
	if err != nil {
		return "", fmt.Errorf("committing in %s: listing what is staged: %w", w.ref, err)
	}
	message, err := write(staged)
	if err != nil {
		return "", fmt.Errorf("committing in %s: writing the message: %w", w.ref, err)
	}
	if strings.TrimSpace(message) == "" {
		return "", fmt.Errorf("committing in %s: the message is empty", w.ref)
	}
	if _, err := w.m.run(ctx, command{args: []string{"commit", "-q", "--no-verify", "--cleanup=whitespace", "-F", "-"},
		gitDir: w.gitDir, workTree: w.Dir, stdin: message, redact: w.redact}); err != nil {
		return "", fmt.Errorf("committing in %s: %w", w.ref, err)
	}
	return w.Head(ctx)
}

// Outgoing is what Push would send, for a reader: whether the forge has
// Branch already, and the commits it lacks (or, before it has the branch,
// the commits Base lacks), oldest first, each with its message and the
// files it changes (a diffstat); "" when there are none.
func (w *Workspace) Outgoing(ctx context.Context) (onForge bool, commits string, err error) {
	known, err := w.refSHA(ctx, headRef)
	if err != nil {
		return false, "", fmt.Errorf("reading what %s of %s would push: %w", w.Branch, w.ref, err)
	}
	from := baseRef
	if known != "" {
		from = headRef
	}
	out, err := w.git(ctx, "log", "--reverse", "--no-color", "--no-ext-diff", "--stat=100", "--format=commit %h%n%n%B", from+"..HEAD")
	if err != nil {
		return false, "", fmt.Errorf("reading what %s of %s would push: %w", w.Branch, w.ref, err)
	}
	for strings.Contains(out, "\n\n\n") { // %B's newline, then git's blank line before the diffstat
		out = strings.ReplaceAll(out, "\n\n\n", "\n\n")
	}
	return known != "", strings.TrimSpace(out), nil
}

// Push sends Branch to the forge when it holds commits the forge's branch
// lacks (or, before the forge has the branch, commits Base lacks), and
// reports whether the forge's branch changed. It never forces: a branch that
// moved on the forge meanwhile is an ErrRejected. Repeating it is safe. A
// read-only workspace is never pushed (ErrReadOnly), nor commits that hold
// a secret (a *SecretError).
func (w *Workspace) Push(ctx context.Context) (bool, error) {
	if w.ReadOnly {
		return false, ErrReadOnly
	}
	pushed, err := w.push(ctx)
	if err != nil {
		return false, fmt.Errorf("pushing %s of %s: %w", w.Branch, w.ref, err)
	}
	return pushed, nil
}

func (w *Workspace) push(ctx context.Context) (bool, error) {
	local, err := w.Head(ctx)
	if err != nil {
		return false, err
	}
	known, err := w.refSHA(ctx, headRef)
	if err != nil || known == local {
		return false, err
	}
	if known == "" {
		ahead, err := w.git(ctx, "rev-list", "--count", baseRef+"..HEAD")
		if err != nil || strings.TrimSpace(ahead) == "0" {
			return false, err
		}
	}
	if err := w.scanOutgoing(ctx); err != nil {
		return false, err
	}
	ref := "refs/heads/" + w.Branch
	out, err := w.remote(ctx, "push", "--porcelain", w.url, ref+":"+ref)
	changed := false
	for _, line := range strings.Split(out, "\n") {
		// --porcelain: "<flag>\t<from>:<to>\t<summary>"; ' ' fast-forward,
		// '*' new branch, '=' up to date, '!' rejected.
		if len(line) < 2 || line[1] != '\t' {
			continue
		}
		switch line[0] {
		case ' ', '*', '+':
			changed = true
		case '!':
			var e *Error
			if errors.As(err, &e) {
				e.kind = ErrRejected
				e.Stderr = strings.TrimSpace(e.Stderr + "\n" + w.redact(line))
			}
		}
	}
	if err != nil {
		return false, err
	}
	if _, err := w.git(ctx, "update-ref", headRef, local); err != nil {
		return false, err
	}
	return changed, nil
}

// Patch is the work in the checkout, committed and not (untracked files
// included), as a patch against the commit it builds on: the forge's head as
// fetched, or Base before the forge has the branch. For a fork's pull
// request it is what a comment offers; `git apply` applies it on that head.
// "" when there is no work.
func (w *Workspace) Patch(ctx context.Context) (string, error) {
	p, err := w.patch(ctx)
	if err != nil {
		return "", fmt.Errorf("making the patch of %s: %w", w.ref, err)
	}
	return p, nil
}

func (w *Workspace) patch(ctx context.Context) (string, error) {
	up, err := w.upstream(ctx)
	if err != nil {
		return "", err
	}
	base, err := w.git(ctx, "merge-base", "HEAD", up)
	if err != nil {
		return "", err
	}
	// The checkout's tree is written through an index of its own, so the
	// real index stays as it is.
	tmp, err := os.MkdirTemp(w.m.folder(w.ref), "patch~")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	index := command{gitDir: w.gitDir, workTree: w.Dir, index: filepath.Join(tmp, "index"), redact: w.redact}
	index.args = []string{"read-tree", "HEAD"}
	if _, err := w.m.run(ctx, index); err != nil {
		return "", err
	}
	if _, err := w.stage(ctx, index.index); err != nil {
		return "", err
	}
	index.args = []string{"write-tree"}
	tree, err := w.m.run(ctx, index)
	if err != nil {
		return "", err
	}
	return w.git(ctx, "diff", "--binary", "--no-color", "--no-ext-diff", "--no-textconv", strings.TrimSpace(base), strings.TrimSpace(tree))
}
