package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// What Commit and Patch take from the checkout is every change (untracked
// files included) less:
//   - what the repository's own ignore rules leave out;
//   - untracked build output the repository has no rule for (buildOutput);
//   - a directory holding a .git of its own: a repository the model made or
//     a submodule's checkout. Git would commit it as a gitlink, a pointer to
//     a commit the forge does not have, and look inside it; it is left out
//     and never entered. A submodule's pointer is never changed either: the
//     gitlinks the repository tracks stay as they are;
//   - a file larger than Options.MaxFileBytes.
//
// Commit says what it left out (Workspace.LeftOut) when it is not already
// ignored by the repository.

// LeftOut is a change in the checkout that a commit did not take, and why.
type LeftOut struct {
	Path   string // relative to the checkout, slash-separated; a directory ends with '/'
	Reason string
}

// The reasons of LeftOut.
const (
	ReasonBuildOutput = "build output (coding-agent leaves it out; add it to .gitignore, or a negation to keep it)"
	ReasonRepository  = "a git repository inside the checkout (never committed: it would be a gitlink)"
	ReasonTooLarge    = "larger than the largest file committed"
)

// stage builds the index (index "": the repository's) from the checkout,
// less what is left out, and says what that was.
func (w *Workspace) stage(ctx context.Context, index string) ([]LeftOut, error) {
	c := command{gitDir: w.gitDir, workTree: w.Dir, index: index, redact: w.redact}
	c.args = []string{"status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching", "--no-renames"}
	status, err := w.m.run(ctx, c)
	if err != nil {
		return nil, err
	}
	var out, ignored []LeftOut
	exclude := map[string]bool{}
	for _, e := range strings.Split(status, "\x00") {
		if len(e) < 4 {
			continue
		}
		code, path := e[:2], e[3:]
		switch {
		case code == "!!":
			ignored = append(ignored, LeftOut{Path: path, Reason: ReasonBuildOutput})
		case code == "??" && strings.HasSuffix(path, "/"):
			out = append(out, LeftOut{Path: path, Reason: ReasonRepository})
			exclude[strings.TrimSuffix(path, "/")] = true
		case code[0] != 'D' && code[1] != 'D' && w.tooLarge(path):
			out = append(out, LeftOut{Path: path, Reason: ReasonTooLarge})
			exclude[path] = true
		}
	}
	if err := w.gitlinks(ctx, c, exclude); err != nil {
		return nil, err
	}
	ours, err := w.ourIgnored(ctx, c, ignored)
	if err != nil {
		return nil, err
	}
	spec := []string{"."}
	for p := range exclude {
		spec = append(spec, ":(exclude,literal)"+p)
	}
	c.args = []string{"add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"}
	c.stdin = strings.Join(spec, "\x00")
	if _, err := w.m.run(ctx, c); err != nil {
		return nil, err
	}
	return append(out, ours...), nil
}

// tooLarge reports whether the checkout's file path (not followed if a
// link) is larger than the limit.
func (w *Workspace) tooLarge(path string) bool {
	if w.m.maxBytes < 0 {
		return false
	}
	st, err := os.Lstat(filepath.Join(w.Dir, filepath.FromSlash(path)))
	return err == nil && st.Mode().IsRegular() && st.Size() > w.m.maxBytes
}

// gitlinks adds to exclude the submodules the index tracks: their pointers
// are never changed.
func (w *Workspace) gitlinks(ctx context.Context, c command, exclude map[string]bool) error {
	c.args = []string{"ls-files", "--stage", "-z"}
	out, err := w.m.run(ctx, c)
	if err != nil {
		return err
	}
	for _, e := range strings.Split(out, "\x00") {
		// "<mode> <object> <stage>\t<path>"
		if meta, path, ok := strings.Cut(e, "\t"); ok && strings.HasPrefix(meta, "160000 ") {
			exclude[path] = true
		}
	}
	return nil
}

// ourIgnored keeps of ignored the paths that buildOutput alone leaves out,
// not the repository's own rules.
func (w *Workspace) ourIgnored(ctx context.Context, c command, ignored []LeftOut) ([]LeftOut, error) {
	if len(ignored) == 0 {
		return nil, nil
	}
	paths := make([]string, len(ignored))
	for i, l := range ignored {
		paths[i] = l.Path
	}
	c.args = []string{"check-ignore", "-v", "-z", "--stdin"}
	c.stdin = strings.Join(paths, "\x00") + "\x00"
	out, err := w.m.run(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("finding what the build output rules leave out: %w", err)
	}
	// "<source>\0<line>\0<pattern>\0<path>\0" for each path.
	f := strings.Split(out, "\x00")
	var ours []LeftOut
	for i := 0; i+3 < len(f); i += 4 {
		if f[i] == w.m.excludes && !strings.HasPrefix(f[i+2], "!") {
			ours = append(ours, LeftOut{Path: f[i+3], Reason: ReasonBuildOutput})
		}
	}
	return ours, nil
}
