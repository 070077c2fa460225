package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The daemon owns each task's git directory. Git always reads
// $GIT_DIR/config (and follows its include directives), consults
// info/attributes, objects/info/alternates and commondir, and would run
// hooks: none of that can be turned off from the command line. So the
// directory's config is the one the daemon wrote, byte for byte, and the
// control files below are absent; both are checked before every git
// command, and a command meets anything else with a *TamperError naming
// the file, run not at all. The checkout's tools cannot reach the directory;
// this is for anything else that can (a third-party server, a person).
//
// What remains: a writer racing the check (changing the directory between
// the check and git's read of it) is not stopped, only one that writes
// before a command starts.

// ownConfig is the whole of a task's $GIT_DIR/config: what `git init
// --bare --template=` writes. The work tree is always named by
// GIT_WORK_TREE, so bare = true does not matter.
const ownConfig = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"

// controlFiles are the paths below a git directory that would let their
// writer run code, redirect git, or change what it reads or commits, and
// that the daemon's git never writes: their presence is tampering.
var controlFiles = []string{
	"commondir",                    // another repository's config, refs and objects
	"config.worktree",              // a second config file
	"hooks",                        // programs git runs (hooks are off too: core.hooksPath)
	"info/attributes",              // filters and diff drivers for every path
	"info/exclude",                 // hides files from a commit
	"info/grafts",                  // rewrites history as git sees it
	"info/sparse-checkout",         // hides files from the checkout
	"objects/info/alternates",      // objects from elsewhere
	"objects/info/http-alternates", // objects from another server
	"remotes", "branches",          // remote names that stand for URLs
	"worktrees", "modules", // other checkouts' and submodules' repositories
}

// ErrTampered: a task's git directory holds what the daemon did not write.
var ErrTampered = errors.New("the workspace's git directory was changed from outside")

// TamperError names the file of a task's git directory that the daemon did
// not write, or that is not as it wrote it. It matches ErrTampered.
type TamperError struct {
	Path   string // the file, absolute
	Reason string // "changed", "not a regular file", "unexpected file"
}

func (e *TamperError) Error() string {
	return fmt.Sprintf("%s: %s: %s", ErrTampered, e.Path, e.Reason)
}

// Unwrap gives ErrTampered.
func (e *TamperError) Unwrap() error { return ErrTampered }

// writeOwnConfig replaces the config git init wrote by ownConfig.
func writeOwnConfig(gitDir string) error {
	if err := os.WriteFile(filepath.Join(gitDir, "config"), []byte(ownConfig), 0o600); err != nil {
		return fmt.Errorf("writing the repository's config: %w", err)
	}
	return nil
}

// verifyGitDir returns a *TamperError when gitDir's config is not
// ownConfig or one of controlFiles exists.
func verifyGitDir(gitDir string) error {
	config := filepath.Join(gitDir, "config")
	st, err := os.Lstat(config)
	switch {
	case err != nil:
		return fmt.Errorf("checking the repository's config: %w", err)
	case !st.Mode().IsRegular():
		return &TamperError{Path: config, Reason: "not a regular file"}
	case st.Size() != int64(len(ownConfig)):
		return &TamperError{Path: config, Reason: "changed"}
	}
	b, err := os.ReadFile(config)
	if err != nil {
		return fmt.Errorf("checking the repository's config: %w", err)
	}
	if !bytes.Equal(b, []byte(ownConfig)) {
		return &TamperError{Path: config, Reason: "changed"}
	}
	for _, name := range controlFiles {
		p := filepath.Join(gitDir, name)
		if _, err := os.Lstat(p); err == nil {
			return &TamperError{Path: p, Reason: "unexpected file"}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checking %s: %w", p, err)
		}
	}
	return nil
}
