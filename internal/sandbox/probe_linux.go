package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

var (
	probeOnce   sync.Once
	probeReport Report
)

// Probe checks the host once per process (later calls return the same
// report): it starts the helper in every namespace and reads what worked,
// asks the kernel for its Landlock ABI and checks no_new_privs and rlimits.
// The namespaces are probed only in a process that called Enter first.
func Probe() Report {
	probeOnce.Do(func() { probeReport = probe() })
	return probeReport
}

// probe does Probe's work.
func probe() Report {
	var r Report
	r.Layers = append(r.Layers, probeNamespaces()...)
	ll := probeLandlock()
	r.Layers = append(r.Layers, ll,
		Layer{Name: "no_new_privs", OK: unix.Prctl(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == nil,
			Detail: "set before the command's exec: setuid and file capabilities give it nothing"},
		probeRlimits())
	r.Best = None
	if ll.OK {
		r.Best = Landlock
	}
	if r.allOK(nsLayers) {
		r.Best = Namespaces
	}
	return r
}

// landlockVersion is LANDLOCK_CREATE_RULESET_VERSION.
const landlockVersion = 1

// probeLandlock asks the kernel for its Landlock ABI.
func probeLandlock() Layer {
	abi, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, landlockVersion)
	l := Layer{Name: "landlock"}
	switch {
	case e == unix.ENOSYS:
		l.Detail = "kernel built without Landlock (needs Linux 5.13+ with CONFIG_SECURITY_LANDLOCK)"
	case e == unix.EOPNOTSUPP:
		l.Detail = "Landlock is built in but not enabled: add landlock to the lsm= kernel parameter"
	case e != 0:
		l.Detail = fmt.Sprintf("landlock_create_ruleset: %v (a container's seccomp profile may block it)", e)
	default:
		l.OK = true
		parts := []string{fmt.Sprintf("ABI %d: fs", abi)}
		if abi >= 4 {
			parts = append(parts, "net (TCP bind/connect denied without network)")
		} else {
			parts = append(parts, "no net rules (ABI < 4: TCP is not denied without namespaces)")
		}
		if abi >= 6 {
			parts = append(parts, "scope (abstract unix sockets, signals)")
		}
		l.Detail = strings.Join(parts, ", ")
	}
	return l
}

// probeRlimits checks that rlimits can be read (they always can on Linux)
// and says where RLIMIT_NPROC does not hold.
func probeRlimits() Layer {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &rl); err != nil {
		return Layer{Name: "rlimits", Detail: fmt.Sprintf("getrlimit: %v", err)}
	}
	d := "nproc, data, cpu, fsize, nofile, core=0 set before the command's exec"
	if os.Getuid() == 0 {
		d += "; the kernel does not enforce RLIMIT_NPROC for the host's root: the helper counts " +
			"the processes every 20ms and kills the tree over MaxProcesses (at level namespaces " +
			"the pid namespace's pid_max is a hard bound too)"
	}
	return Layer{Name: "rlimits", OK: true, Detail: d}
}

// probeNamespaces starts the helper in every namespace of level
// Namespaces; it tries each mechanism and writes the layers back.
func probeNamespaces() []Layer {
	fail := func(why string) []Layer {
		out := make([]Layer, len(nsLayers))
		for i, n := range nsLayers {
			out[i] = Layer{Name: n, Detail: why}
		}
		return out
	}
	if !entered {
		return fail("not probed: " + errNotEntered.Error())
	}
	layers, err := runProbe(nsFlags(false))
	if err == nil {
		return layers
	}
	if _, uerr := runProbe(unix.CLONE_NEWUSER); uerr != nil {
		return fail(fmt.Sprintf("cannot create a user namespace (%v): %s", uerr, usernsHint()))
	}
	return fail(fmt.Sprintf("a user namespace works but not the others with it: %v", err))
}

// runProbe starts the probe helper with flags and reads its layers.
func runProbe(flags uintptr) ([]Layer, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create probe pipe: %w", err)
	}
	defer r.Close()
	cmd := relayCmd(flags, "probe", w)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Start()
	w.Close()
	if err != nil {
		return nil, fmt.Errorf("start probe helper: %w", err)
	}
	var layers []Layer
	derr := json.NewDecoder(r).Decode(&layers)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("run probe helper: %w (%s)", err, strings.TrimSpace(stderr.String()))
	}
	if derr != nil {
		return nil, fmt.Errorf("read probe helper: %w", derr)
	}
	return layers, nil
}

// usernsHint says what usually stops user namespaces on this host.
func usernsHint() string {
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	var hints []string
	if read("/proc/sys/kernel/unprivileged_userns_clone") == "0" {
		hints = append(hints, "kernel.unprivileged_userns_clone=0 (set it to 1)")
	}
	if read("/proc/sys/user/max_user_namespaces") == "0" {
		hints = append(hints, "user.max_user_namespaces=0 (raise it)")
	}
	if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1" {
		hints = append(hints, "kernel.apparmor_restrict_unprivileged_userns=1 (set it to 0 or give the daemon an AppArmor profile with userns)")
	}
	if _, err := os.Stat("/.dockerenv"); err == nil || strings.Contains(read("/proc/1/cgroup"), "docker") {
		hints = append(hints, "docker: --security-opt seccomp=unconfined --security-opt apparmor=unconfined (or a seccomp profile allowing clone/unshare with CLONE_NEWUSER); level landlock needs neither")
	}
	if len(hints) == 0 {
		return "no known cause found (seccomp filter? kernel without CONFIG_USER_NS?)"
	}
	return strings.Join(hints, "; ")
}
