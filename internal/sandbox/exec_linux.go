package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// execCommand is the helper's second stage, already in the command's
// namespaces and working directory: it sets the rlimits, drops every
// privilege, applies Landlock and execs the command. It returns only when
// one of these fails, having said why on stderr.
func execCommand() {
	// Capabilities, securebits and no_new_privs are per thread: set them
	// and exec on this one.
	runtime.LockOSThread()
	sp, err := readSpec()
	if err == nil {
		_ = unix.Close(4) // our executable
		err = resolve(sp)
	}
	if err == nil {
		err = confine(sp)
	}
	if err == nil {
		err = execve(sp)
	}
	fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
}

// confine applies everything but the limits and the exec (execve sets the
// limits last: the helper itself, and the race detector's runtime in tests,
// should not run under the command's memory limit).
func confine(sp *spec) error {
	if err := dropPrivileges(); err != nil {
		return err
	}
	if sp.Level >= Landlock {
		if err := restrict(sp); err != nil {
			return fmt.Errorf("apply landlock: %w", err)
		}
	}
	// Nothing of ours but 0, 1 and 2 reaches the command.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("mark descriptors close-on-exec: %w", err)
	}
	return nil
}

// setRlimits sets the command's limits. syscall.Setrlimit, not unix's: it
// also stops the runtime from restoring its own RLIMIT_NOFILE at exec.
func setRlimits(l Limits) error {
	cpu := uint64(l.CPUSeconds)
	switch {
	case cpu > 0:
	case l.Timeout > 0:
		cpu = uint64(l.Timeout.Seconds()) + 1 // whole seconds, never 0
	default:
		cpu = unix.RLIM_INFINITY // Command: no timeout to follow
	}
	lims := []struct {
		name string
		res  int
		v    uint64
	}{
		{"core", unix.RLIMIT_CORE, 0},
		{"nofile", unix.RLIMIT_NOFILE, uint64(l.OpenFiles)},
		{"fsize", unix.RLIMIT_FSIZE, uint64(l.FileSizeMB) << 20},
		{"cpu", unix.RLIMIT_CPU, cpu},
		{"data", unix.RLIMIT_DATA, uint64(l.MemoryMB) << 20},
		{"nproc", unix.RLIMIT_NPROC, uint64(l.MaxProcesses)},
	}
	for _, x := range lims {
		if err := syscall.Setrlimit(x.res, &syscall.Rlimit{Cur: x.v, Max: x.v}); err != nil {
			return fmt.Errorf("set rlimit %s to %d: %w", x.name, x.v, err)
		}
	}
	return nil
}

// dropPrivileges sets no_new_privs and, when this thread still is root
// (level Landlock or None with a daemon run as root), locks the securebits
// so that the exec gives uid 0 no capability and empties the bounding and
// ambient sets. At level Namespaces the command's stage already is uid
// 1000 of its own user namespace, which exec leaves without capabilities.
func dropPrivileges() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if os.Geteuid() != 0 && os.Getuid() != 0 {
		return nil
	}
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	bits := secNoRoot | secNoRootLocked | secNoSetuidFixup | secNoSetuidFixupLocked |
		secKeepCapsLocked | secNoCapAmbientRaise | secNoCapAmbientRaiseLocked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
		return fmt.Errorf("lock securebits: %w", err)
	}
	return nil
}

// execve sets the command's limits and replaces this process with the
// command, found on its own PATH. Everything execve needs is made before
// the limits: under RLIMIT_DATA a helper whose own heap already reaches
// memory_mb (a Go runtime's arena, the race detector's shadow memory) may
// get no new memory, and the exec must not ask for any.
func execve(sp *spec) error {
	path, err := syscall.BytePtrFromString(sp.path)
	if err != nil {
		return fmt.Errorf("exec %s: %w", sp.path, err)
	}
	argv, err := syscall.SlicePtrFromStrings(sp.Argv)
	if err != nil {
		return fmt.Errorf("exec %s: %w", sp.path, err)
	}
	envv, err := syscall.SlicePtrFromStrings(sp.Env)
	if err != nil {
		return fmt.Errorf("exec %s: %w", sp.path, err)
	}
	if err := setRlimits(sp.Limits); err != nil {
		return err
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(path)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	return fmt.Errorf("exec %s: %w", sp.path, errno)
}

// resolve finds the command on its own PATH, before Landlock and the
// rlimits.
func resolve(sp *spec) error {
	prog := sp.Argv[0]
	sp.path = prog
	if strings.Contains(prog, "/") {
		return nil
	}
	p, err := lookPath(prog, sp.Env)
	if err != nil {
		return err
	}
	sp.path = p
	return nil
}

// lookPath finds prog in the PATH of env.
func lookPath(prog string, env []string) (string, error) {
	for _, kv := range env {
		path, ok := strings.CutPrefix(kv, "PATH=")
		if !ok {
			continue
		}
		for _, d := range filepath.SplitList(path) {
			p := filepath.Join(d, prog)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("find %s: not in the sandbox's PATH", prog)
}

// The securebits of linux/securebits.h (x/sys/unix lacks them).
const (
	secNoRoot = 1 << iota
	secNoRootLocked
	secNoSetuidFixup
	secNoSetuidFixupLocked
	_ // SECBIT_KEEP_CAPS
	secKeepCapsLocked
	secNoCapAmbientRaise
	secNoCapAmbientRaiseLocked
)
