package workspace

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/coding-agent/coding-agent/internal/report"
)

// CommitWith is Commit with the message written from what is staged: the
// files the commit changes, renames found. message is not called when
// nothing changed.
func (w *Workspace) CommitWith(ctx context.Context, message func(staged []report.FileChange) (string, error)) (string, error) {
	return w.commit(ctx, message)
}

// Files lists the files changed from commit from to commit to, renames
// found, in the order git gives them.
func (w *Workspace) Files(ctx context.Context, from, to string) ([]report.FileChange, error) {
	files, err := w.diffFiles(ctx, from, to)
	if err != nil {
		return nil, fmt.Errorf("listing the files changed in %s from %.12s to %.12s: %w", w.ref, from, to, err)
	}
	return files, nil
}

// ForkPoint is where the branch left Base: the merge base of HEAD and Base
// as fetched.
func (w *Workspace) ForkPoint(ctx context.Context) (string, error) {
	out, err := w.git(ctx, "merge-base", baseRef, "HEAD")
	if err != nil {
		return "", fmt.Errorf("finding where %s of %s left %s: %w", w.Branch, w.ref, w.Base, err)
	}
	return strings.TrimSpace(out), nil
}

// Forge is the commit the forge's branch was at when last fetched or
// pushed; "" before the forge has the branch.
func (w *Workspace) Forge(ctx context.Context) (string, error) { return w.refSHA(ctx, headRef) }

// Undescribed is where the forge's branch stood before the first push
// that no description of the change covers yet: the forge's head now
// (Forge), which it records for a push to come, unless a push before it
// was left undescribed (its process stopped between the push and the
// description, or the description failed), whose start it returns; ""
// before the forge has the branch. Kept in the workspace's own git
// directory, beyond the tools' reach, until Described.
func (w *Workspace) Undescribed(ctx context.Context) (string, error) {
	start, err := w.refSHA(ctx, undescribedRef)
	if err != nil || start != "" {
		return start, err
	}
	before, err := w.Forge(ctx)
	if err != nil || before == "" {
		return "", err
	}
	if _, err := w.git(ctx, "update-ref", undescribedRef, before); err != nil {
		return "", err
	}
	return before, nil
}

// Described says the change's description covers the branch's head:
// the next push starts anew (Undescribed).
func (w *Workspace) Described(ctx context.Context) error {
	_, err := w.git(ctx, "update-ref", "-d", undescribedRef)
	return err
}

// Commits are the short ids of the commits in from..to, oldest first.
func (w *Workspace) Commits(ctx context.Context, from, to string) ([]string, error) {
	out, err := w.git(ctx, "log", "--reverse", "--format=%h", from+".."+to)
	if err != nil {
		return nil, fmt.Errorf("listing the commits of %s from %.12s to %.12s: %w", w.ref, from, to, err)
	}
	return strings.Fields(out), nil
}

// Subject is the subject of commit rev.
func (w *Workspace) Subject(ctx context.Context, rev string) (string, error) {
	out, err := w.git(ctx, "log", "-1", "--format=%s", rev)
	if err != nil {
		return "", fmt.Errorf("reading the subject of %.12s in %s: %w", rev, w.ref, err)
	}
	return strings.TrimSpace(out), nil
}

// IsAncestor reports whether commit a is an ancestor of (or is) commit b;
// false also when a is not in the repository.
func (w *Workspace) IsAncestor(ctx context.Context, a, b string) bool {
	if a == "" {
		return false
	}
	_, err := w.git(ctx, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// diffFiles runs git diff over revs ("--cached": what is staged) and reads
// each file's status and line counts.
func (w *Workspace) diffFiles(ctx context.Context, revs ...string) ([]report.FileChange, error) {
	base := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "-M", "-z"}
	status, err := w.git(ctx, append(append(base, "--name-status"), revs...)...)
	if err != nil {
		return nil, err
	}
	counts, err := w.git(ctx, append(append(base, "--numstat"), revs...)...)
	if err != nil {
		return nil, err
	}
	files, err := parseNameStatus(status)
	if err != nil {
		return nil, err
	}
	byPath, err := parseNumstat(counts)
	if err != nil {
		return nil, err
	}
	for i := range files {
		if c, ok := byPath[files[i].Path]; ok {
			files[i].Added, files[i].Deleted, files[i].Binary = c.Added, c.Deleted, c.Binary
		}
	}
	return files, nil
}

// parseNameStatus reads `git diff --name-status -z`: "M\0path\0", and for a
// rename or copy "R100\0old\0new\0".
func parseNameStatus(out string) ([]report.FileChange, error) {
	f := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	var files []report.FileChange
	for i := 0; i < len(f) && f[i] != ""; {
		code := f[i]
		two := code[0] == 'R' || code[0] == 'C'
		if i+1 >= len(f) || (two && i+2 >= len(f)) {
			return nil, errors.New("git diff --name-status: the output ends early")
		}
		fc := report.FileChange{Path: f[i+1], Status: report.FileModified}
		switch code[0] {
		case 'A', 'C':
			fc.Status = report.FileAdded
		case 'D':
			fc.Status = report.FileDeleted
		case 'R':
			fc.Status = report.FileRenamed
		}
		if two {
			fc.From, fc.Path = f[i+1], f[i+2]
			if code[0] == 'C' {
				fc.From = ""
			}
			i += 3
		} else {
			i += 2
		}
		files = append(files, fc)
	}
	return files, nil
}

// parseNumstat reads `git diff --numstat -z`: "added\tdeleted\tpath\0", and
// for a rename or copy "added\tdeleted\t\0old\0new\0"; "-" counts are a
// binary file's. The result is by the file's (new) path.
func parseNumstat(out string) (map[string]report.FileChange, error) {
	f := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	byPath := map[string]report.FileChange{}
	for i := 0; i < len(f) && f[i] != ""; i++ {
		parts := strings.SplitN(f[i], "\t", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("git diff --numstat: unexpected line %q", f[i])
		}
		path := parts[2]
		if path == "" { // a rename: old and new follow
			if i+2 >= len(f) {
				return nil, errors.New("git diff --numstat: the output ends early")
			}
			path = f[i+2]
			i += 2
		}
		var c report.FileChange
		if parts[0] == "-" {
			c.Binary = true
		} else {
			c.Added, _ = strconv.Atoi(parts[0])
			c.Deleted, _ = strconv.Atoi(parts[1])
		}
		byPath[path] = c
	}
	return byPath, nil
}
