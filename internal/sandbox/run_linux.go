package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// marker is argv[1] of a helper process; Enter looks for it.
const marker = "__coding-agent-sandbox"

// selfExe is the running binary, as the helper is started.
const selfExe = "/proc/self/exe"

// spec is what the daemon tells the helper, as JSON on fd 3.
type spec struct {
	Level    Level
	Argv     []string
	Env      []string
	Work     string
	Home     string
	Tmp      string
	Hide     []string
	ReadOnly []string // system dirs that exist plus Policy.ReadOnly
	Network  bool
	Limits   Limits
	Status   bool // fd 4 takes the helper's status as JSON
	HostUID  int  // the daemon's uid: inside a user namespace ours is 0

	covers []string // the helper's hide covers, sealed after pivot_root
	path   string   // the command's executable, found on its PATH
}

// status is what the supervisor reports on fd 4 when asked.
type status struct {
	Started bool   // the command was started
	Err     string // why the sandbox could not start
	Exit    int    // the command's exit code, -1 for a signal
	Signal  int    // the signal that ended it
}

// spec builds the helper's spec for one command.
func (s *Sandbox) spec(d Dirs, network bool, argv []string, env map[string]string) (*spec, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command")
	}
	for _, p := range []*string{&d.Work, &d.Home, &d.Tmp} {
		if *p == "" || !filepath.IsAbs(*p) {
			return nil, fmt.Errorf("directory %q is not absolute (work, home and tmp are required)", *p)
		}
		*p = filepath.Clean(*p)
	}
	if fi, err := os.Stat(d.Work); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("work directory %s: not a directory (%v)", d.Work, err)
	}
	for _, p := range []string{d.Home, d.Tmp} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", p, err)
		}
	}
	var ro []string
	for _, p := range append(append([]string(nil), systemDirs...), s.policy.ReadOnly...) {
		if _, err := os.Stat(p); err == nil {
			ro = append(ro, filepath.Clean(p))
		}
	}
	hide := make([]string, 0, len(d.Hide))
	for _, h := range d.Hide {
		if filepath.IsAbs(h) {
			hide = append(hide, filepath.Clean(h))
		}
	}
	tmpSeen := d.Tmp
	if s.level == Namespaces {
		tmpSeen = "/tmp"
	}
	return &spec{
		Level: s.level, Argv: argv, Env: s.environ(d, tmpSeen, env),
		Work: d.Work, Home: d.Home, Tmp: d.Tmp, Hide: hide, ReadOnly: ro,
		Network: network, Limits: s.limits, HostUID: os.Getuid(),
	}, nil
}

// helperCmd is the supervisor's exec.Cmd for sp, its spec already in a
// memfd at fd 3 (so nothing blocks however the caller starts it) and
// status, if not nil, at fd 4. At level Namespaces the relay starts it in
// its namespaces (relayCmd says why).
func helperCmd(sp *spec, status *os.File) (*exec.Cmd, error) {
	f, err := specFile(sp)
	if err != nil {
		return nil, err
	}
	files := []*os.File{f}
	if status != nil {
		files = append(files, status)
	}
	var cmd *exec.Cmd
	if sp.Level == Namespaces {
		cmd = relayCmd(nsFlags(sp.Network), "run", files...)
	} else {
		// /proc/self/exe, not os.Executable's path: the forked child
		// execs the very binary that is running, even one replaced or
		// deleted since.
		cmd = &exec.Cmd{
			Path:       selfExe,
			Args:       []string{os.Args[0], marker, "run"},
			Env:        []string{}, // empty, not nil: nothing of the daemon's
			Dir:        "/",
			ExtraFiles: files,
		}
	}
	// A session of its own (so a group of its own too, for the kill):
	// without a controlling terminal, /dev/tty cannot reach the daemon's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// nsFlags are the namespaces of level Namespaces.
func nsFlags(network bool) uintptr {
	f := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if !network {
		f |= unix.CLONE_NEWNET
	}
	return f
}

// specFile writes sp into an anonymous memory file positioned at its start.
func specFile(sp *spec) (*os.File, error) {
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, fmt.Errorf("encode sandbox spec: %w", err)
	}
	fd, err := unix.MemfdCreate("sandbox-spec", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create spec memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "sandbox-spec")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("write sandbox spec: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("rewind sandbox spec: %w", err)
	}
	return f, nil
}

// Command returns a long-lived confined process (a task's MCP server over
// stdio) running argv in d.Work: the caller sets Stdin, Stdout and Stderr
// and starts it. There is no timeout. SIGTERM to the returned process kills
// the whole tree before it exits. SIGKILL to it: at level Namespaces the
// tree dies with it, moments later (the relay's child, PID 1 of the
// namespace, has it as its death signal); at the lower levels SIGKILL
// leaves to the kernel only what stayed in its process group. Its
// environment is env (the server's own) on top of PATH, HOME, TMPDIR and
// LANG: Policy.Env is the model's commands', not a server's.
func (s *Sandbox) Command(d Dirs, network bool, argv []string, env map[string]string) (*exec.Cmd, error) {
	sp, err := s.spec(d, network, argv, env)
	if err != nil {
		return nil, fmt.Errorf("prepare sandboxed command: %w", err)
	}
	// No timeout, so no CPU limit derived from one: a server may live
	// for hours. An explicit CPUSeconds still holds.
	sp.Limits.Timeout = 0
	cmd, err := helperCmd(sp, nil)
	if err != nil {
		return nil, fmt.Errorf("prepare sandboxed command: %w", err)
	}
	return cmd, nil
}

// Run runs r.Command to its end, or to the timeout or ctx's end, which kill
// the whole tree. The error is only for a sandbox that could not start; a
// failing, killed or timed-out command is a Result. A ctx that ends first
// gives ExitCode -1 and Signal "killed" with TimedOut false.
func (s *Sandbox) Run(ctx context.Context, r Run) (Result, error) {
	start := time.Now()
	sp, err := s.spec(r.Dirs, r.Network, []string{"/bin/sh", "-c", r.Command}, s.policy.Env)
	if err != nil {
		return Result{}, fmt.Errorf("prepare sandboxed run: %w", err)
	}
	sp.Status = true
	if r.Timeout > 0 {
		sp.Limits.Timeout = r.Timeout // RLIMIT_CPU follows this run's timeout
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("create status pipe: %w", err)
	}
	defer statR.Close()
	cmd, err := helperCmd(sp, statW)
	if err != nil {
		statW.Close()
		return Result{}, fmt.Errorf("prepare sandboxed run: %w", err)
	}
	defer cmd.ExtraFiles[0].Close()
	out, errb := newHeadTail(s.limits.MaxOutputBytes), newHeadTail(s.limits.MaxOutputBytes)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r.Stdin, out, errb
	cmd.WaitDelay = 5 * time.Second // backstop for a pipe someone still holds
	if err := cmd.Start(); err != nil {
		statW.Close()
		return Result{}, fmt.Errorf("start sandbox helper: %w", err)
	}
	statW.Close()
	timedOut, stop := s.watch(ctx, cmd, r.Timeout)
	werr := cmd.Wait()
	stop()
	st, serr := readStatus(statR)
	res := Result{ExitCode: -1, TimedOut: timedOut.Load(), Duration: time.Since(start)}
	res.Stdout, res.StdoutDropped = out.bytes()
	res.Stderr, res.StderrDropped = errb.bytes()
	switch {
	case serr == nil && st.Err != "" && !st.Started:
		return res, fmt.Errorf("start sandboxed command: %s", st.Err)
	case serr == nil && st.Started && !res.TimedOut && ctx.Err() == nil:
		res.ExitCode = st.Exit
		if st.Signal > 0 {
			res.Signal = syscall.Signal(st.Signal).String()
		}
	case res.TimedOut || ctx.Err() != nil:
		res.Signal = syscall.SIGKILL.String()
	default:
		return res, fmt.Errorf("run sandbox helper: no status (%v, %v)", werr, serr)
	}
	return res, nil
}

// readStatus reads the supervisor's status report.
func readStatus(r io.Reader) (status, error) {
	var st status
	b, err := io.ReadAll(io.LimitReader(r, 1<<16))
	if err != nil {
		return st, fmt.Errorf("read helper status: %w", err)
	}
	if len(b) == 0 {
		return st, errors.New("read helper status: none")
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("decode helper status: %w", err)
	}
	return st, nil
}

// watch ends the helper at the timeout or when ctx ends: SIGTERM asks the
// supervisor (through the relay at level Namespaces) to kill every
// descendant and exit, so that the tree is gone when the helper is; SIGKILL
// to the process group follows if it has not exited within a grace period.
func (s *Sandbox) watch(ctx context.Context, cmd *exec.Cmd, timeout time.Duration) (*atomic.Bool, func()) {
	if timeout <= 0 {
		timeout = s.limits.Timeout
	}
	var timedOut atomic.Bool
	done := make(chan struct{})
	pid := cmd.Process.Pid
	go func() {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-ctx.Done():
		case <-t.C:
			timedOut.Store(true)
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		g := time.NewTimer(2 * time.Second)
		defer g.Stop()
		select {
		case <-done:
		case <-g.C:
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}()
	return &timedOut, func() {
		close(done)
		// Whatever still runs in the helper's group goes with it.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
