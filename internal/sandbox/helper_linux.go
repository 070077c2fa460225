package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Enter must be called first in main() and in TestMain of any package whose
// tests run sandboxed commands: when this process was started as the
// sandbox helper it does the helper's work and exits; otherwise it returns
// at once.
func Enter() {
	if len(os.Args) < 3 || os.Args[1] != marker {
		entered = true
		return
	}
	// unix.Exit, not os.Exit: a helper has no exit hooks to run, and the
	// race detector's would sleep a second at every exit.
	switch os.Args[2] {
	case "ns":
		unix.Exit(relay())
	case "run":
		unix.Exit(supervise())
	case "exec":
		execCommand() // returns only on failure
		unix.Exit(127)
	case "probe":
		unix.Exit(probeHelper())
	}
	fmt.Fprintf(os.Stderr, "sandbox helper: unknown stage %q\n", os.Args[2])
	unix.Exit(127)
}

// readSpec reads the spec from fd 3 and closes it.
func readSpec() (*spec, error) {
	f := os.NewFile(3, "spec")
	defer f.Close()
	var sp spec
	if err := json.NewDecoder(io.LimitReader(f, 16<<20)).Decode(&sp); err != nil {
		return nil, fmt.Errorf("read sandbox spec: %w", err)
	}
	return &sp, nil
}

// supervise is the helper's first stage: it sets the namespaces up (PID 1
// of its own pid namespace at level Namespaces, a child subreaper below),
// starts the command's stage, reaps everything, kills what the command
// leaves behind and exits with the command's status.
func supervise() int {
	sp, err := readSpec()
	var stat *os.File
	if err == nil && sp.Status {
		stat = os.NewFile(4, "status")
	}
	report := func(st status) {
		if stat != nil {
			_ = json.NewEncoder(stat).Encode(st)
			stat.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		return 127
	}
	// Everything below stays on one thread: mounts, pivot_root and chdir
	// belong to the process, but keeping one thread is simplest to reason.
	runtime.LockOSThread()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	child, err := startStage(sp)
	if err != nil {
		report(status{Err: err.Error()})
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		return 127
	}
	// The kernel does not enforce RLIMIT_NPROC for the host's root (user
	// namespaces map the command back to it): then we count. At level
	// Namespaces the pid namespace's pid_max is a hard, coarser bound.
	limit := 0
	if sp.HostUID == 0 {
		limit = sp.Limits.MaxProcesses
	}
	st := reap(child.Process.Pid, sp.Level != Namespaces, limit, sigs)
	st.Started = true
	report(st)
	if st.Signal > 0 {
		return 128 + st.Signal
	}
	return st.Exit
}

// startStage prepares this process's namespaces and starts the command's
// stage (execCommand) in them.
func startStage(sp *spec) (*exec.Cmd, error) {
	exe, err := os.Open(selfExe)
	if err != nil {
		return nil, fmt.Errorf("open own executable: %w", err)
	}
	defer exe.Close()
	if sp.Level == Namespaces {
		if err := buildRoot(sp); err != nil {
			return nil, err
		}
		if err := setupNamespaces(sp); err != nil {
			return nil, err
		}
	} else if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become child subreaper: %w", err)
	}
	f, err := specFile(sp)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The executable is reached through its descriptor: after pivot_root
	// its path may not exist in the box.
	cmd := &exec.Cmd{
		Path:       "/proc/self/fd/4",
		Args:       []string{"sandbox", marker, "exec"},
		Env:        []string{},
		Dir:        sp.Work,
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{f, exe},
	}
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if sp.Level == Namespaces {
		// The command runs as uid/gid 1000 of a user namespace of its own,
		// mapped to our root: it execs as a non-root user, so the kernel
		// gives it no capability, and it holds none over our namespaces
		// (mounts, the network, the hostname).
		attr.Cloneflags = unix.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: innerID, HostID: 0, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: innerID, HostID: 0, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start command stage: %w", err)
	}
	return cmd, nil
}

// innerID is the uid and gid the command has at level Namespaces.
const innerID = 1000

// countProcs reports on over when our descendants outnumber limit,
// looking every 20ms until stop closes.
func countProcs(limit int, over chan<- int, stop <-chan struct{}) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	self := os.Getpid()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if n := len(descendants(self)); n > limit {
			over <- n
			return
		}
	}
}

// reap waits for every child until the command (pid) ends, then kills
// whatever is left and reaps it. At level Namespaces leaving is enough (the
// kernel kills the pid namespace with its PID 1), but killing first keeps
// the order of things plain. A signal to us kills the whole tree.
func reap(pid int, subreaper bool, limit int, sigs <-chan os.Signal) status {
	st := status{Exit: -1}
	done := make(chan status, 1)
	over := make(chan int, 1)
	stop := make(chan struct{})
	defer close(stop)
	if limit > 0 {
		go countProcs(limit, over, stop)
	}
	go func() {
		for {
			var ws unix.WaitStatus
			p, err := unix.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return // ECHILD: nothing left
			}
			if p == pid {
				done <- fromWait(ws)
			}
		}
	}()
	select {
	case st = <-done:
	case <-sigs:
		st.Signal = int(syscall.SIGKILL)
	case n := <-over:
		fmt.Fprintf(os.Stderr, "sandbox: %d processes, over the limit of %d: killed\n", n, limit)
		st.Signal = int(syscall.SIGKILL)
	}
	killTree(subreaper)
	return st
}

// fromWait turns a wait status into the command's status.
func fromWait(ws unix.WaitStatus) status {
	if ws.Signaled() {
		return status{Exit: -1, Signal: int(ws.Signal())}
	}
	return status{Exit: ws.ExitStatus()}
}
