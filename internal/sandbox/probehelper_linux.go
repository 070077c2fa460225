package sandbox

import (
	"encoding/json"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// probeHelper runs in every namespace of level Namespaces: it tries what
// the supervisor will do and writes one layer per namespace to fd 3.
func probeHelper() int {
	out := os.NewFile(3, "probe")
	defer out.Close()
	layers := []Layer{
		{Name: "user", OK: true, Detail: fmt.Sprintf("the daemon's uid and gid are root inside, the command is uid %d of a nested namespace", innerID)},
		probeMount(),
		probePid(),
		probeStep("network", "own network namespace with loopback only", loopbackUp),
		{Name: "ipc", OK: true, Detail: "own System V IPC and POSIX message queues"},
		probeStep("uts", "own hostname", func() error { return unix.Sethostname([]byte("sandbox")) }),
	}
	// Last, as it changes this process's root: the pivot the helper makes
	// (a host may allow mounts and refuse pivot_root, as a seccomp filter
	// can).
	if l := probeStep("mount", layers[1].Detail, probePivot); !l.OK && layers[1].OK {
		l.Detail = "pivot_root: " + l.Detail
		layers[1] = l
	}
	if err := json.NewEncoder(out).Encode(layers); err != nil {
		return 1
	}
	return 0
}

// probeStep is a layer from one attempt.
func probeStep(name, gives string, try func() error) Layer {
	if err := try(); err != nil {
		return Layer{Name: name, Detail: err.Error()}
	}
	return Layer{Name: name, OK: true, Detail: gives}
}

// probeMount tries the mount operations of buildRoot on a tmpfs.
func probeMount() Layer {
	return probeStep("mount", "private mount view: read-only system dirs, hidden paths covered, pivot_root", func() error {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("make mounts private: %w", err)
		}
		if err := unix.Mount("tmpfs", base, "tmpfs", 0, "size=1m"); err != nil {
			return fmt.Errorf("mount tmpfs: %w", err)
		}
		if err := mountFS("/etc", base+"/etc", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind mount: %w", err)
		}
		return readOnly(base+"/etc", true)
	})
}

// probePid checks that we are PID 1 and can mount our proc; it also tries
// the per-namespace pid_max.
func probePid() Layer {
	return probeStep("pid", "own pid namespace: its PID 1 takes every process with it", func() error {
		if os.Getpid() != 1 {
			return fmt.Errorf("pid %d, not 1", os.Getpid())
		}
		if err := mountFS("proc", base+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount proc (a masked /proc, as in a container, forbids it): %w", err)
		}
		return nil
	})
}

// probePivot pivots into the tmpfs probeMount put at base.
func probePivot() error {
	if err := os.Mkdir(base+oldRoot, 0o755); err != nil {
		return fmt.Errorf("create old root: %w", err)
	}
	if err := unix.PivotRoot(base, base+oldRoot); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	return nil
}
