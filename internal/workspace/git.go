package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/procgroup"
)

// Error is a git command that failed: which one, how, and what it said.
type Error struct {
	Command string // git's subcommand: "fetch", "push", …
	Code    int    // its exit code; -1 when it did not exit on its own
	Stderr  string // what it said, redacted
	// Err is the cause: the context's error when the command's time ran
	// out or its caller gave up, else how it ended.
	Err error
	// kind is ErrAuth or ErrRejected when git's message says so.
	kind error
}

func (e *Error) Error() string {
	s := "git " + e.Command + ": "
	if e.kind != nil {
		s += e.kind.Error() + ": "
	}
	s += e.Err.Error()
	if e.Stderr != "" {
		s += ": " + e.Stderr
	}
	return s
}

// Unwrap gives the cause and, when known, the kind of failure, for
// errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.kind != nil {
		return []error{e.Err, e.kind}
	}
	return []error{e.Err}
}

var (
	// ErrAuth: the forge refused the credential (HTTP 401 or 403).
	ErrAuth = errors.New("the forge refused the credential")
	// ErrRejected: the forge refused a push, as when the branch moved on
	// the forge and the push would not fast-forward.
	ErrRejected = errors.New("the push was rejected")
)

// authFailures are how git (LANG=C) reports a refused credential: a 401
// makes it ask for a user name, which it may not do here.
var authFailures = []string{
	"terminal prompts disabled",
	"Authentication failed",
	"The requested URL returned error: 401",
	"The requested URL returned error: 403",
}

// passThrough are the variables of our environment git gets besides those
// it is given: where to find programs and temporary space, how to reach the
// forge through a proxy, and which certificate authorities to trust (a
// self-hosted forge with its own).
var passThrough = []string{"PATH", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR",
	"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"}

// command is one git invocation.
type command struct {
	args     []string
	gitDir   string // GIT_DIR; "" → none (the command needs no repository)
	workTree string // GIT_WORK_TREE
	index    string // GIT_INDEX_FILE; "" → the repository's index
	// cred is what the credential helper answers (helperAnswer), for a
	// command that talks to the forge; it goes through a pipe, never the
	// environment.
	cred string
	// scheme is the transport a command that talks to the forge may use
	// (the clone URL's); every other is off.
	scheme string
	stdin  string
	redact func(string) string // the workspace's redaction; nil → the manager's
}

// run runs c within the command timeout and returns its standard output. A
// failure is an *Error carrying git's standard error, redacted. A command in
// a repository first checks that the repository is as the daemon left it
// (a *TamperError, and nothing run, if not).
func (m *Manager) run(ctx context.Context, c command) (string, error) {
	if c.gitDir != "" {
		if err := verifyGitDir(c.gitDir); err != nil {
			return "", fmt.Errorf("git %s: %w", c.args[0], err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.git, c.args...)
	cmd.Env = m.env(c)
	cmd.Dir = m.home // a command without a repository finds none above it (GIT_CEILING_DIRECTORIES)
	if c.gitDir != "" {
		cmd.Dir = c.workTree
	}
	if c.cred != "" {
		r, err := credentialPipe(c.cred)
		if err != nil {
			return "", fmt.Errorf("git %s: %w", c.args[0], err)
		}
		defer r.Close()
		cmd.ExtraFiles = []*os.File{r} // descriptor 3: see credentialHelper
	}
	cmd.Stdin = strings.NewReader(c.stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	procgroup.Own(cmd)
	cmd.Cancel = func() error {
		procgroup.Kill(cmd.Process.Pid)
		return cmd.Process.Kill()
	}
	cmd.WaitDelay = 5 * time.Second // past the kill, stop waiting for its output
	start := time.Now()
	err := cmd.Run()
	m.log.Debug("git", "command", c.args[0], "took", time.Since(start))
	if err == nil {
		return stdout.String(), nil
	}
	return stdout.String(), m.failure(ctx, c, err, stderr.String())
}

// credentialPipe returns the read end of a pipe that holds cred and is
// closed for writing: the helper reads it to its end.
func credentialPipe(cred string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("making the credential pipe: %w", err)
	}
	_, err = w.WriteString(cred) // far below a pipe's capacity
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("filling the credential pipe: %w", err)
	}
	return r, nil
}

// failure is the *Error of c, which ended with err and said stderr.
func (m *Manager) failure(ctx context.Context, c command, err error, stderr string) error {
	redact := c.redact
	if redact == nil {
		redact = m.redact
	}
	e := &Error{Command: c.args[0], Code: -1, Stderr: redact(strings.TrimSpace(stderr)), Err: err}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.Exited() {
		e.Code = exit.ExitCode()
	}
	if ctx.Err() != nil {
		e.Err = ctx.Err()
	} else {
		e.Err = errors.New(redact(err.Error()))
	}
	for _, s := range authFailures {
		if strings.Contains(stderr, s) {
			e.kind = ErrAuth
		}
	}
	return e
}

// env is c's whole environment: nothing of ours but passThrough. Git reads
// no system or global config and an empty HOME, asks no one for a password,
// and opens no pager or editor; the identity of commits is given, so git
// never looks for one. hardening turns off, for every command, what a
// config or attributes file could make git run or follow. The credential,
// when c talks to the forge, is in no variable: see credentialHelper.
func (m *Manager) env(c command) []string {
	env := []string{
		"HOME=" + m.home, "GIT_CEILING_DIRECTORIES=" + m.root, "LANG=C", "LC_ALL=C", "GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_PAGER=cat", "GIT_EDITOR=:",
		"GIT_AUTHOR_NAME=" + m.author.Name, "GIT_AUTHOR_EMAIL=" + m.author.Email,
		"GIT_COMMITTER_NAME=" + m.committer.Name, "GIT_COMMITTER_EMAIL=" + m.committer.Email,
	}
	for _, k := range passThrough {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if c.gitDir != "" {
		env = append(env, "GIT_DIR="+c.gitDir, "GIT_WORK_TREE="+c.workTree)
	}
	if c.index != "" {
		env = append(env, "GIT_INDEX_FILE="+c.index)
	}
	config := append(hardening(), [2]string{"core.excludesFile", m.excludes})
	if c.scheme != "" {
		config = append(config, [2]string{"protocol." + c.scheme + ".allow", "always"})
	}
	if c.cred != "" {
		config = append(config, [2]string{"credential.helper", credentialHelper})
	}
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(config)))
	for i, kv := range config {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	return env
}

// hardening is the config every command runs with. Given in the
// environment, it overrides any repository's config, a nested one's too.
func hardening() [][2]string {
	return [][2]string{
		{"credential.helper", ""}, // no helper but ours
		{"credential.useHttpPath", "true"},
		{"core.askPass", ""},
		{"core.hooksPath", os.DevNull},
		{"core.fsmonitor", "false"},
		{"core.untrackedCache", "false"},
		{"core.attributesFile", os.DevNull},
		{"core.sparseCheckout", "false"},
		{"core.pager", "cat"},
		{"core.editor", ":"},
		{"commit.gpgSign", "false"},
		// No transport but the clone URL's (command.scheme): no ssh, no
		// ext::, no git://, whatever a URL is rewritten to.
		{"protocol.allow", "never"},
		// Submodules are never entered, fetched, pushed or summarised: a
		// submodule's repository is the model's to write.
		{"submodule.recurse", "false"},
		{"fetch.recurseSubmodules", "false"},
		{"push.recurseSubmodules", "no"},
		{"diff.ignoreSubmodules", "all"},
		{"status.submoduleSummary", "false"},
		// Housekeeping after a fetch or commit runs within the command and
		// its timeout, not in a process left behind.
		{"gc.autoDetach", "false"},
		// A fetched pack is kept as it came, as a clone keeps it: unpacked
		// into loose objects (git does so below 100 objects), every object
		// is compressed again, 5 s for 50 MiB of large files.
		{"transfer.unpackLimit", "1"},
		// The credential goes to the clone URL's host and nowhere else.
		{"http.followRedirects", "false"},
	}
}
