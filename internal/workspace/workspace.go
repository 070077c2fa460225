// Package workspace gives each task a checkout of its repository: cloned the
// first time, reused after a crash, on resume and in the next conversation
// round, committed and pushed when the task is done, removed when it ends.
//
// Git runs as the system git binary with a clean environment and a config
// (hardening) that turns off whatever a config or attributes file could make
// it run or follow. The forge's credential reaches git only through a pipe
// its credential helper reads (credentialHelper): never in an environment,
// an argument, a config file or any other file, and never in an error or a
// log.
//
// A task's folder below the root holds two directories: work, the checkout
// the model's tools see, and git, its repository. The repository lives
// beside the checkout, not in it, and the daemon owns it: every command
// checks it is as the daemon left it (gitdir.go). A .git inside the checkout
// is never entered nor committed (stage.go), and nothing secret is
// committed or pushed (scan.go).
package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
)

// The default identity of commits, so git never fails for a missing one.
const (
	DefaultName  = "coding-agent"
	DefaultEmail = "coding-agent@users.noreply.example"
)

// DefaultTimeout bounds one git command when Options.Timeout is zero.
const DefaultTimeout = 10 * time.Minute

// Identity is a git author or committer.
type Identity struct{ Name, Email string }

// Options configure a Manager; zero values mean the defaults.
type Options struct {
	Root string // one folder per task below it; "" → "workspaces"
	Git  string // the git binary; "" → "git" from PATH
	// Author and Committer of commits; a zero one is DefaultName and
	// DefaultEmail.
	Author, Committer Identity
	// Timeout bounds every git command; 0 → DefaultTimeout.
	Timeout time.Duration
	Logger  *slog.Logger
	// Redact is applied to everything logged or returned in an error,
	// after the credential of the workspace at hand is taken out; nil →
	// that alone. It is also a detector of secrets: a line of a change it
	// alters holds one, and is neither committed nor pushed (SecretError).
	Redact func(string) string
	// MaxFileBytes: a file larger is not committed; 0 →
	// DefaultMaxFileBytes, negative → no limit.
	MaxFileBytes int64
}

// DefaultMaxFileBytes is the largest file committed when
// Options.MaxFileBytes is zero.
const DefaultMaxFileBytes = 5_000_000

// Manager prepares and removes the workspaces below one root. It is safe for
// concurrent use: two tasks work in two workspaces at once, and the same
// task's workspace is prepared or removed by one call at a time.
type Manager struct {
	root, home string
	git        string
	author     Identity
	committer  Identity
	timeout    time.Duration
	log        *slog.Logger
	redact     func(string) string
	maxBytes   int64  // the largest file committed; < 0: no limit
	excludes   string // core.excludesFile: buildOutput

	mu    sync.Mutex
	locks map[string]*refLock
}

// refLock serialises the calls on one task's folder.
type refLock struct {
	ch    chan struct{}
	users int
}

// New prepares the root (created when missing) and the empty directory git
// gets as its HOME.
func New(o Options) (*Manager, error) {
	if o.Root == "" {
		o.Root = "workspaces"
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, fmt.Errorf("workspace root %q: %w", o.Root, err)
	}
	m := &Manager{
		root: root, home: filepath.Join(root, homeDir), git: o.Git,
		author: orDefault(o.Author), committer: orDefault(o.Committer),
		timeout: o.Timeout, log: o.Logger, redact: o.Redact, locks: map[string]*refLock{},
		maxBytes: o.MaxFileBytes, excludes: filepath.Join(root, excludesFile),
	}
	if m.maxBytes == 0 {
		m.maxBytes = DefaultMaxFileBytes
	}
	if m.git == "" {
		m.git = "git"
	}
	if m.timeout <= 0 {
		m.timeout = DefaultTimeout
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.redact == nil {
		m.redact = func(s string) string { return s }
	}
	for _, d := range []string{root, m.home, filepath.Join(root, tmpDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating workspace directory: %w", err)
		}
	}
	if err := os.WriteFile(m.excludes, []byte(buildOutput), 0o600); err != nil {
		return nil, fmt.Errorf("writing the excludes file: %w", err)
	}
	return m, nil
}

func orDefault(id Identity) Identity {
	if id.Name == "" {
		id.Name = DefaultName
	}
	if id.Email == "" {
		id.Email = DefaultEmail
	}
	return id
}

// Names below the root. A task's folder name is made of letters, digits,
// '.', '_' and '-' only, so neither can be one.
const (
	homeDir      = ".home"    // git's HOME: empty, so no ~/.gitconfig, ~/.git-credentials or ~/.netrc is read
	tmpDir       = ".tmp"     // clones in progress, renamed into place when complete
	excludesFile = ".exclude" // core.excludesFile of every command: buildOutput
	workDir      = "work"     // in a task's folder: the checkout
	gitDir       = "git"      // in a task's folder: the repository
)

// Dir is the checkout of ref's workspace: the directory the task's tools
// work in. It is stable for a ref, and different refs never share it.
func (m *Manager) Dir(ref task.Ref) string {
	return filepath.Join(m.folder(ref), workDir)
}

// folder is ref's folder below the root; it holds the checkout and the
// repository.
func (m *Manager) folder(ref task.Ref) string { return filepath.Join(m.root, folderName(ref)) }

// folderName is readable, and unique because it ends with a hash of the
// exact ref (a_b/c and a/b_c differ).
func folderName(ref task.Ref) string {
	sum := sha256.Sum256([]byte(ref.String()))
	readable := unsafeFileChars.ReplaceAllString(ref.Repo, "_")
	if len(readable) > maxReadableName {
		readable = readable[:maxReadableName] // the hash keeps the name unique
	}
	return fmt.Sprintf("%s_%s_%s_%d_%s", unsafeFileChars.ReplaceAllString(ref.Forge, "_"), readable,
		ref.Kind, ref.Number, hex.EncodeToString(sum[:4]))
}

// maxReadableName keeps names well under the usual 255-byte limit.
const maxReadableName = 100

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Remove deletes ref's workspace, checkout and repository (and what a
// crash left of a clone); removing one that does not exist is no error. It
// waits for a Prepare of the same ref in progress. Whether a failed task's
// workspace is kept for inspection is the caller's choice.
func (m *Manager) Remove(ctx context.Context, ref task.Ref) error {
	unlock, err := m.lock(ctx, ref)
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.RemoveAll(m.folder(ref)); err != nil {
		return fmt.Errorf("removing the workspace of %s: %w", ref, err)
	}
	return m.removeCutShort(ref)
}

// removeCutShort removes what clones of ref cut short by a crash left in
// the temporary folder. The caller holds ref's lock.
func (m *Manager) removeCutShort(ref task.Ref) error {
	stale, _ := filepath.Glob(filepath.Join(m.root, tmpDir, folderName(ref)+"~*")) // '~' is in no folder name
	for _, s := range stale {
		if err := os.RemoveAll(s); err != nil {
			return fmt.Errorf("removing a clone of %s cut short: %w", ref, err)
		}
	}
	return nil
}

// lock takes ref's lock, waiting at most until ctx ends.
func (m *Manager) lock(ctx context.Context, ref task.Ref) (unlock func(), err error) {
	key := folderName(ref)
	m.mu.Lock()
	l := m.locks[key]
	if l == nil {
		l = &refLock{ch: make(chan struct{}, 1)}
		m.locks[key] = l
	}
	l.users++
	m.mu.Unlock()
	release := func() {
		m.mu.Lock()
		if l.users--; l.users == 0 {
			delete(m.locks, key)
		}
		m.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, fmt.Errorf("waiting for the workspace of %s: %w", ref, ctx.Err())
	}
}

// ErrReadOnly is returned by Push on a read-only workspace (a pull request
// from a fork): its work is offered as a Patch instead.
var ErrReadOnly = errors.New("read-only workspace: nothing is pushed to a fork")
