package workspace

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/sanitize"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Spec says what to check out for a task.
type Spec struct {
	Ref task.Ref
	// CloneURL is the repository's https URL, without credentials (http
	// and file URLs are taken too: emulators and tests).
	CloneURL string
	// Auth gives the value of an Authorization header for CloneURL's
	// host, e.g. "Basic " + base64("x-access-token:" + token); nil → none.
	// It is asked before each command that talks to the forge (a GitHub
	// App's token changes every hour) and reaches git only in that
	// command's environment.
	Auth Credential
	// Base is the branch work starts from: an issue's default branch, a
	// pull or merge request's target.
	Base string
	// Branch is the branch worked on: for an issue, created from Base
	// unless the forge has it already (prefix + "issue-12"); for a pull or
	// merge request, its head branch.
	Branch string
	// ReadOnly marks a pull or merge request from a fork: its head is
	// fetched from the repository itself (refs/pull/N/head,
	// refs/merge-requests/N/head), checked out as Branch, never pushed.
	ReadOnly bool
}

// Where the forge's Base and head stood at the last fetch or push, in each
// workspace's repository. The names are fixed, so a fork's head branch named
// like the base does not collide with it.
const (
	baseRef = "refs/workspace/base"
	headRef = "refs/workspace/head"
	// undescribedRef is where the forge's head stood before the first
	// push that no description of the change covers yet (Undescribed).
	undescribedRef = "refs/workspace/undescribed"
)

// Workspace is one task's checkout. Its methods are for one goroutine at a
// time.
type Workspace struct {
	Dir      string // the checkout: the directory the task's tools work in
	Branch   string // the branch checked out
	Base     string
	ReadOnly bool
	// LeftOut is what the last Commit did not take from the checkout,
	// and why (see stage).
	LeftOut []LeftOut

	m      *Manager
	ref    task.Ref
	gitDir string
	url    string
	scheme string // url's
	auth   Credential
	redact func(string) string
}

// Prepare returns s.Ref's workspace. The first time it is cloned: Base and
// the head (Branch, when the forge has it) are fetched, and Branch is checked
// out from the head, else from Base. Afterwards (after a crash, on resume,
// in the next conversation round) the checkout is kept as it is, with its
// uncommitted changes: Base and the head are fetched, and a checkout with
// no work of its own (clean, and no commit the forge lacks) is
// fast-forwarded to the head, else to Base. A clone cut short (a crash) is
// found and made again. Prepare calls for one ref run one at a time.
func (m *Manager) Prepare(ctx context.Context, s Spec) (*Workspace, error) {
	start := time.Now()
	w, err := m.workspace(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("preparing the workspace of %s: %w", s.Ref, err)
	}
	unlock, err := m.lock(ctx, s.Ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	how, err := w.prepare(ctx)
	if err != nil {
		return nil, fmt.Errorf("preparing the workspace of %s: %w", s.Ref, err)
	}
	m.log.Info("workspace ready", "task", s.Ref.String(), "dir", w.Dir, "branch", w.Branch, "how", how,
		"took", time.Since(start).Round(time.Millisecond))
	return w, nil
}

// workspace checks s and returns its Workspace, not yet prepared.
func (m *Manager) workspace(ctx context.Context, s Spec) (*Workspace, error) {
	u, err := url.Parse(s.CloneURL)
	switch {
	case err != nil:
		return nil, errors.New("the clone URL does not parse") // its text might hold a credential
	case u.User != nil:
		return nil, errors.New("the clone URL carries credentials: they belong in Spec.Auth")
	case u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "file":
		return nil, fmt.Errorf("clone URL scheme %q: want https (or http, file)", u.Scheme)
	case !s.ReadOnly && s.Branch == s.Base:
		return nil, fmt.Errorf("the branch to work on is the base branch %q", s.Base)
	}
	w := &Workspace{
		Dir: m.Dir(s.Ref), Branch: s.Branch, Base: s.Base, ReadOnly: s.ReadOnly,
		m: m, ref: s.Ref, gitDir: filepath.Join(m.folder(s.Ref), gitDir), url: s.CloneURL, scheme: u.Scheme, auth: s.Auth,
		redact: m.redact,
	}
	for _, b := range []string{s.Base, s.Branch} {
		// Refuses "", "-x", "a..b", "HEAD", …: a name is never taken for an option.
		if _, err := m.run(ctx, command{args: []string{"check-ref-format", "--branch", b}}); err != nil {
			return nil, fmt.Errorf("branch name %q: %w", b, err)
		}
	}
	return w, nil
}

// prepare reuses the workspace when it is complete, else clones it, and
// says which it did.
func (w *Workspace) prepare(ctx context.Context) (string, error) {
	base, head, err := w.lsRemote(ctx)
	if err != nil {
		return "", err
	}
	folder := w.m.folder(w.ref)
	complete, err := w.complete(ctx)
	if err != nil {
		return "", err
	}
	if complete {
		if err := w.fetch(ctx, base, head); err != nil {
			return "", err
		}
		return w.settle(ctx)
	}
	if _, err := os.Stat(folder); err == nil {
		w.m.log.Warn("incomplete workspace, cloning it again", "task", w.ref.String(), "dir", folder)
	}
	if err := os.RemoveAll(folder); err != nil {
		return "", fmt.Errorf("removing an incomplete workspace: %w", err)
	}
	return "cloned", w.clone(ctx, base, head)
}

// lsRemote asks the forge where Base and the head stand; head is "" when
// the forge has no such branch yet.
func (w *Workspace) lsRemote(ctx context.Context) (base, head string, err error) {
	out, err := w.remote(ctx, "ls-remote", w.url, "refs/heads/"+w.Base, w.headSource())
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(out, "\n") {
		sha, name, _ := strings.Cut(line, "\t")
		switch name { // ls-remote matches patterns by their tail: take exact names only
		case "refs/heads/" + w.Base:
			base = sha
		case w.headSource():
			head = sha
		}
	}
	switch {
	case base == "":
		return "", "", fmt.Errorf("the base branch %q is not on the forge", w.Base)
	case head == "" && (w.ReadOnly || w.ref.Kind != task.Issue):
		// A request's work is on its head: Base is no stand-in.
		return "", "", fmt.Errorf("the head of the request (%s) is not on the forge", w.headSource())
	}
	return base, head, nil
}

// headSource is the forge's ref of the head: a fork's pull or merge request
// is fetched from the repository's own ref for it.
func (w *Workspace) headSource() string {
	switch {
	case w.ReadOnly && w.ref.Kind == task.PullRequest:
		return "refs/pull/" + strconv.Itoa(w.ref.Number) + "/head"
	case w.ReadOnly && w.ref.Kind == task.MergeRequest:
		return "refs/merge-requests/" + strconv.Itoa(w.ref.Number) + "/head"
	}
	return "refs/heads/" + w.Branch
}

// complete reports whether the folder holds a whole workspace: a clone is
// renamed into place only when done, so anything else is what a crash or a
// hand left. A whole one whose git directory was tampered with is an
// error, not cloned again: the checkout holds work.
func (w *Workspace) complete(ctx context.Context) (bool, error) {
	if st, err := os.Stat(w.Dir); err != nil || !st.IsDir() {
		return false, nil
	}
	_, err := w.git(ctx, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	if errors.Is(err, ErrTampered) {
		return false, err
	}
	return err == nil, nil
}

// clone makes the workspace in a temporary folder and renames it into place.
func (w *Workspace) clone(ctx context.Context, base, head string) error {
	if err := w.m.removeCutShort(w.ref); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Join(w.m.root, tmpDir), folderName(w.ref)+"~")
	if err != nil {
		return fmt.Errorf("cloning: %w", err)
	}
	defer os.RemoveAll(tmp) // nothing left after the rename
	t := *w
	t.gitDir, t.Dir = filepath.Join(tmp, gitDir), filepath.Join(tmp, workDir)
	if err := os.Mkdir(t.Dir, 0o700); err != nil {
		return fmt.Errorf("cloning: %w", err)
	}
	if _, err := w.m.run(ctx, command{args: []string{"init", "-q", "--bare", "--template=", t.gitDir}}); err != nil {
		return err
	}
	if err := writeOwnConfig(t.gitDir); err != nil {
		return err
	}
	if err := t.fetch(ctx, base, head); err != nil {
		return err
	}
	from := baseRef
	if head != "" {
		from = headRef
	}
	if _, err := t.git(ctx, "checkout", "-q", "-B", w.Branch, from, "--"); err != nil {
		return err
	}
	if err := os.Rename(tmp, w.m.folder(w.ref)); err != nil {
		return fmt.Errorf("moving the clone into place: %w", err)
	}
	return nil
}

// fetch brings the tracking refs to base and head (the commits the forge
// named), fetching only what moved; a head the forge no longer has is
// forgotten.
func (w *Workspace) fetch(ctx context.Context, base, head string) error {
	out, err := w.git(ctx, "for-each-ref", "--format=%(objectname) %(refname)", "refs/workspace/")
	if err != nil {
		return err
	}
	local := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		sha, name, _ := strings.Cut(line, " ")
		local[name] = sha
	}
	var specs []string
	if local[baseRef] != base {
		specs = append(specs, "+refs/heads/"+w.Base+":"+baseRef)
	}
	if head != "" && local[headRef] != head {
		specs = append(specs, "+"+w.headSource()+":"+headRef)
	}
	if len(specs) > 0 {
		args := append([]string{"fetch", "-q", "--no-tags", "--no-write-fetch-head", w.url}, specs...)
		if _, err := w.remote(ctx, args...); err != nil {
			return err
		}
	}
	if head == "" && local[headRef] != "" {
		if _, err := w.git(ctx, "update-ref", "-d", headRef); err != nil {
			return err
		}
	}
	return nil
}

// settle fast-forwards a reused checkout with no work of its own to its
// upstream, and says what it did.
func (w *Workspace) settle(ctx context.Context) (string, error) {
	branch, err := w.git(ctx, "symbolic-ref", "-q", "--short", "HEAD")
	if err != nil {
		return "", err
	}
	if b := strings.TrimSpace(branch); b != w.Branch {
		return "", fmt.Errorf("the workspace is on branch %q, not %q", b, w.Branch)
	}
	up, err := w.upstream(ctx)
	if err != nil {
		return "", err
	}
	head, err := w.Head(ctx)
	if err != nil || head == up {
		return "reused", err
	}
	if dirty, err := w.Changes(ctx); err != nil || dirty {
		return "reused with its uncommitted changes", err
	}
	_, err = w.git(ctx, "merge-base", "--is-ancestor", head, up)
	var e *Error
	if errors.As(err, &e) && e.Code == 1 {
		return "reused with its own commits", nil
	} else if err != nil {
		return "", err
	}
	if _, err := w.git(ctx, "merge", "-q", "--ff-only", up); err != nil {
		return "", err
	}
	return "fast-forwarded", nil
}

// upstream is the commit the branch builds on: the forge's head, or Base
// when the forge has no head yet.
func (w *Workspace) upstream(ctx context.Context) (string, error) {
	if sha, err := w.refSHA(ctx, headRef); sha != "" || err != nil {
		return sha, err
	}
	return w.refSHA(ctx, baseRef)
}

// refSHA is the commit ref names, "" when there is no such ref.
func (w *Workspace) refSHA(ctx context.Context, ref string) (string, error) {
	out, err := w.git(ctx, "rev-parse", "-q", "--verify", ref+"^{commit}")
	var e *Error
	if errors.As(err, &e) && e.Code == 1 {
		return "", nil
	}
	return strings.TrimSpace(out), err
}

// git runs a command in the workspace.
func (w *Workspace) git(ctx context.Context, args ...string) (string, error) {
	return w.m.run(ctx, command{args: args, gitDir: w.gitDir, workTree: w.Dir, redact: w.redact})
}

// remote runs a command that talks to the forge, its transport the clone
// URL's alone, the credential in a pipe (credentialHelper).
func (w *Workspace) remote(ctx context.Context, args ...string) (string, error) {
	c := command{args: args, redact: w.redact, scheme: w.scheme}
	if w.auth != nil {
		auth, err := w.auth(ctx)
		if err != nil {
			return "", fmt.Errorf("getting the credential for git %s: %w", args[0], err)
		}
		if c.cred, err = helperAnswer(auth); err != nil {
			return "", fmt.Errorf("getting the credential for git %s: %w", args[0], err)
		}
		redactor := sanitize.NewRedactor(credentials(auth))
		c.redact = func(t string) string { return w.redact(redactor.Redact(t)) }
	}
	if args[0] != "ls-remote" {
		c.gitDir, c.workTree = w.gitDir, w.Dir
	}
	return w.m.run(ctx, c)
}
