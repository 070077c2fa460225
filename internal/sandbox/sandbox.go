// Package sandbox confines the commands the model runs (and the task-scoped
// MCP servers marked sandbox: true): a private mount view, no network, no
// privileges, resource limits and a wall-clock timeout that ends the whole
// process tree.
//
// The confinement is done by a helper: the daemon's own executable started
// again with a marker argument, which [Enter] recognises. The helper (the
// supervisor) sets the namespaces up, starts the command through a second
// helper stage that drops privileges, applies Landlock and the rlimits and
// then execs the command, and reaps everything the command leaves behind.
// The spec travels on an inherited file (fd 3), never in the environment,
// and the helper's environment is empty, so no token of the daemon reaches
// the command.
package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Level is how much isolation a command gets. Levels are ordered:
// Namespaces is the most isolation.
type Level int

const (
	// None runs the command with a clean environment, its own process
	// group, rlimits and the timeout, nothing more.
	None Level = iota
	// Landlock adds Landlock's file-system (and, on ABI 4 and later, TCP)
	// confinement and no_new_privs; no namespaces.
	Landlock
	// Namespaces adds user, mount, pid, network, ipc and uts namespaces
	// around the command on top of Landlock (when the kernel has it).
	Namespaces
)

// ParseLevel reads a level's name: "none", "landlock" or "namespaces".
func ParseLevel(s string) (Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "none":
		return None, nil
	case "landlock":
		return Landlock, nil
	case "namespaces":
		return Namespaces, nil
	}
	return None, fmt.Errorf("parse sandbox level %q: want none, landlock or namespaces", s)
}

// String is the level's name as ParseLevel reads it.
func (l Level) String() string {
	switch l {
	case None:
		return "none"
	case Landlock:
		return "landlock"
	case Namespaces:
		return "namespaces"
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// Limits bound what one command may use. Zero fields take the defaults.
type Limits struct {
	// Timeout is the wall clock per Run; it kills the whole tree
	// (default 300s).
	Timeout time.Duration
	// MemoryMB bounds each process's data segment (RLIMIT_DATA, which
	// counts heap and private writable mappings, anonymous mmap included,
	// since Linux 4.7). RLIMIT_AS is not used: it also counts PROT_NONE
	// reservations and file mappings, so Go programs, JVMs and V8, which
	// reserve large address ranges they never touch, would fail far below
	// the limit. Default 2048.
	MemoryMB int
	// MaxProcesses bounds the processes (threads included) of one command
	// tree: RLIMIT_NPROC, counted per user namespace at level Namespaces.
	// The kernel exempts the host's root from it; for a daemon run as root
	// the helper counts the tree every 20ms and kills it when over, and at
	// level Namespaces the pid namespace's pid_max (floor 301) is a hard
	// bound. Default 256.
	MaxProcesses int
	// MaxOutputBytes is what is kept of each stream: its head and its
	// tail, the middle dropped and counted. Default 65536.
	MaxOutputBytes int
	// CPUSeconds is RLIMIT_CPU; 0 means the timeout's seconds.
	CPUSeconds int
	// FileSizeMB is RLIMIT_FSIZE; 0 means 1024.
	FileSizeMB int
	// OpenFiles is RLIMIT_NOFILE; 0 means 1024.
	OpenFiles int
}

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = 300 * time.Second
	}
	if l.MemoryMB <= 0 {
		l.MemoryMB = 2048
	}
	if l.MaxProcesses <= 0 {
		l.MaxProcesses = 256
	}
	if l.MaxOutputBytes <= 0 {
		l.MaxOutputBytes = 65536
	}
	if l.FileSizeMB <= 0 {
		l.FileSizeMB = 1024
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = 1024
	}
	return l
}

// Policy is what every command of a Sandbox gets.
type Policy struct {
	// Require is the least isolation acceptable: New fails when the host
	// gives less.
	Require Level
	// Env holds extra variables the commands see.
	Env map[string]string
	// ReadOnly lists extra read-only paths (toolchains outside the system
	// directories).
	ReadOnly []string
	// Limits bound each command.
	Limits Limits
}

// Dirs are the directories one command works with.
type Dirs struct {
	// Work is the checkout: writable, the working directory, seen at the
	// same path.
	Work string
	// Home is a private HOME, writable, kept between runs of a task
	// (created if missing).
	Home string
	// Tmp is a private temporary folder, writable, seen as TMPDIR
	// (created if missing). At level Namespaces it is also seen at /tmp;
	// below that the host's /tmp cannot be replaced, so it is seen at its
	// own path and /tmp is not writable.
	Tmp string
	// Hide lists paths that are never readable nor writable, even when
	// under an allowed path (the daemon's config file, state dir, log dir,
	// workspace root, the daemon's home, ...). A Hide path that contains
	// Work, Home or Tmp hides everything of it but those.
	Hide []string
}

// Run is one command to run to its end.
type Run struct {
	Dirs
	// Command is run with /bin/sh -c in Work.
	Command string
	// Network false means no network at all: an own network namespace
	// with only loopback; with Landlock alone, TCP connect and bind are
	// denied (ABI 4 and later).
	Network bool
	// Timeout is the wall clock for this run; 0 means Limits.Timeout.
	Timeout time.Duration
	// Stdin is the command's standard input; nil means empty.
	Stdin io.Reader
}

// Result is how a command ended and what it printed.
type Result struct {
	// ExitCode is the command's exit status, -1 when it did not exit on
	// its own (a signal, the timeout, the context).
	ExitCode int
	// Signal names the signal that ended it ("killed", "segmentation
	// fault", ...), empty when it exited.
	Signal string
	// TimedOut is true when the timeout ended it.
	TimedOut bool
	// Stdout and Stderr hold at most MaxOutputBytes each: the head and
	// the tail of the stream, the middle dropped.
	Stdout, Stderr []byte
	// StdoutDropped and StderrDropped count the bytes dropped.
	StdoutDropped, StderrDropped int64
	// Duration is the wall clock the run took.
	Duration time.Duration
}

// Sandbox runs commands under one Policy at the best level the host gives.
type Sandbox struct {
	policy Policy
	limits Limits
	level  Level
	path   []string // PATH entries the commands see
}

// errNotEntered guards against starting the daemon's main again as a
// helper: without Enter in main the marker argument would reach main.
var errNotEntered = errors.New("sandbox.Enter was not called first in main (or TestMain)")

// entered is set by Enter when this process is not a helper.
var entered bool

// New checks the host once (the probe is cached process-wide) and returns a
// Sandbox at the best level the host gives. It fails when that is less than
// p.Require, naming what is missing and why.
func New(p Policy) (*Sandbox, error) {
	if !entered {
		return nil, fmt.Errorf("create sandbox: %w", errNotEntered)
	}
	if p.Require < None || p.Require > Namespaces {
		return nil, fmt.Errorf("create sandbox: unknown level %d", int(p.Require))
	}
	rep := Probe()
	if rep.Best < p.Require {
		return nil, fmt.Errorf("create sandbox: level %s required, host gives %s: %s",
			p.Require, rep.Best, rep.missing(p.Require))
	}
	return newAt(p, rep.Best)
}

// newAt is New at a given level (tests run each level the host gives).
func newAt(p Policy, lvl Level) (*Sandbox, error) {
	s := &Sandbox{policy: p, limits: p.Limits.withDefaults(), level: lvl}
	for _, d := range p.ReadOnly {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("create sandbox: read-only path %q is not absolute", d)
		}
	}
	s.path = s.commandPath(os.Getenv("PATH"))
	return s, nil
}

// Level is the isolation the commands get on this host.
func (s *Sandbox) Level() Level { return s.level }

// defaultPath is the PATH every command gets.
var defaultPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// systemDirs are bound read-only (or allowed read-only) when they exist.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// commandPath is the default PATH plus the daemon's entries that the box
// can read (under a system dir or Policy.ReadOnly).
func (s *Sandbox) commandPath(daemonPath string) []string {
	out := append([]string(nil), defaultPath...)
	seen := map[string]bool{}
	for _, d := range out {
		seen[d] = true
	}
	ro := append(append([]string(nil), systemDirs...), s.policy.ReadOnly...)
	for _, d := range filepath.SplitList(daemonPath) {
		if d == "" || !filepath.IsAbs(d) || seen[d] {
			continue
		}
		for _, r := range ro {
			if within(filepath.Clean(d), filepath.Clean(r)) {
				out = append(out, d)
				seen[d] = true
				break
			}
		}
	}
	return out
}

// environ is the command's whole environment: PATH, HOME, TMPDIR, LANG and
// PYTHONDONTWRITEBYTECODE, and extra (Policy.Env for Run, a server's own
// env for Command). Python trusts its bytecode cache while the source's
// size and modification time in whole seconds are unchanged: a model that
// fixes a file within the second the tests imported it, to the same size
// (a swapped pair of words), would have the tests run the old code, and
// the caches would litter the checkout besides.
func (s *Sandbox) environ(d Dirs, tmpSeen string, extra map[string]string) []string {
	lang := os.Getenv("LANG")
	if lang == "" {
		lang = "C.UTF-8"
	}
	env := map[string]string{
		"PATH":                    strings.Join(s.path, ":"),
		"HOME":                    d.Home,
		"TMPDIR":                  tmpSeen,
		"LANG":                    lang,
		"PYTHONDONTWRITEBYTECODE": "1",
	}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// within reports whether p is dir or under it (both clean and absolute).
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}
