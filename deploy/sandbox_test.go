package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// sandboxNamespaces are the namespace types the sandbox's level namespaces
// creates (internal/sandbox: nsFlags, and the command's nested user
// namespace), as RestrictNamespaces names them.
var sandboxNamespaces = []string{"user", "mnt", "pid", "net", "ipc", "uts"}

// sandboxSyscalls are the system calls the sandbox makes at level
// namespaces, as strace -f showed them for internal/sandbox's tests run as
// an unprivileged user with an empty bounding set and no_new_privs: those
// outside @system-service (the mount view, the hostname, Landlock) and the
// ordinary ones it cannot do without (the helper's clone with namespace
// flags, its spec in a memfd, the rlimits, loopback's ioctl, the reaping).
var sandboxSyscalls = []string{
	"mount", "umount2", "pivot_root", "mount_setattr", "sethostname",
	"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
	"clone", "execve", "wait4", "kill", "prctl", "memfd_create", "close_range",
	"prlimit64", "ioctl", "socket", "mkdirat", "symlinkat", "chdir",
}

// allowedNamespaces is the set of namespace types RestrictNamespaces lets
// the service create (systemd.exec(5): a list allows those types, one
// starting with ~ denies them; yes denies all, no or nothing allows all).
func allowedNamespaces(values []string) map[string]bool {
	all := []string{"cgroup", "ipc", "net", "mnt", "pid", "user", "uts", "time"}
	allowed := map[string]bool{}
	for _, n := range all {
		allowed[n] = true
	}
	for i, v := range values {
		v = strings.TrimSpace(v)
		switch {
		case v == "" || v == "no":
			for _, n := range all {
				allowed[n] = true
			}
		case v == "yes":
			clear(allowed)
		case strings.HasPrefix(v, "~"):
			for _, n := range strings.Fields(v[1:]) {
				delete(allowed, n)
			}
		default:
			// The first list sets what is allowed; later lists add to it.
			if i == 0 || len(allowed) == len(all) {
				clear(allowed)
			}
			for _, n := range strings.Fields(v) {
				allowed[n] = true
			}
		}
	}
	return allowed
}

// syscallGroups expands systemd's system-call groups with systemd-analyze
// syscall-filter, caching each group.
type syscallGroups struct {
	t     *testing.T
	cache map[string][]string
}

func (g *syscallGroups) expand(name string) []string {
	if !strings.HasPrefix(name, "@") {
		return []string{name}
	}
	if calls, ok := g.cache[name]; ok {
		return calls
	}
	g.cache[name] = nil // a group listing itself ends here
	out, err := exec.Command(systemdTool, "syscall-filter", "--no-pager", name).Output()
	if err != nil {
		g.t.Fatalf("systemd-analyze syscall-filter %s: %v", name, err)
	}
	var calls []string
	for i, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if i == 0 || line == "" || strings.HasPrefix(line, "#") {
			continue // the group's own name, a comment
		}
		calls = append(calls, g.expand(line)...)
	}
	g.cache[name] = calls
	return calls
}

// allowedSyscalls is what the unit's SystemCallFilter lines let through
// (systemd.exec(5)): the first line decides the mode, an allow list or
// (starting with ~) a deny list; each later line adds to the list or, with
// ~, takes from it; an empty value starts over. The second result is false
// when there is no filter at all.
func allowedSyscalls(g *syscallGroups, values []string) (allow func(string) bool, filtered bool) {
	set := map[string]bool{}
	mode := "" // "allow", "deny", or none yet
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" {
			clear(set)
			mode = ""
			continue
		}
		invert := strings.HasPrefix(v, "~")
		v = strings.TrimPrefix(v, "~")
		if mode == "" {
			mode = map[bool]string{false: "allow", true: "deny"}[invert]
		}
		add := (mode == "allow") != invert
		for _, f := range strings.Fields(v) {
			name, _, _ := strings.Cut(f, ":") // name:errno
			for _, c := range g.expand(name) {
				if add {
					set[c] = true
				} else {
					delete(set, c)
				}
			}
		}
	}
	switch mode {
	case "allow":
		return func(c string) bool { return set[c] }, true
	case "deny":
		return func(c string) bool { return !set[c] }, true
	}
	return func(string) bool { return true }, false
}

// sandboxUnitProblems says what in a unit would keep the sandbox's level
// namespaces (sandbox.require's default) from working under it.
func sandboxUnitProblems(g *syscallGroups, text string) []string {
	k := unitKeys(text)
	last := func(key string) string {
		if v := k[key]; len(v) > 0 {
			return strings.TrimSpace(v[len(v)-1])
		}
		return ""
	}
	var ps []string
	ns := allowedNamespaces(k["Service.RestrictNamespaces"])
	for _, n := range sandboxNamespaces {
		if !ns[n] {
			ps = append(ps, "RestrictNamespaces does not allow "+n+" namespaces, which the sandbox creates")
		}
	}
	allow, _ := allowedSyscalls(g, k["Service.SystemCallFilter"])
	for _, c := range sandboxSyscalls {
		if !allow(c) {
			ps = append(ps, "SystemCallFilter denies "+c+", which the sandbox calls")
		}
	}
	// These mount over parts of /proc, and the kernel then refuses the
	// sandbox's fresh /proc in its pid namespace (a /proc not fully visible
	// cannot be mounted again in a user namespace).
	for _, key := range []string{"ProtectKernelTunables", "ProtectKernelLogs"} {
		if last("Service."+key) == "yes" {
			ps = append(ps, key+"=yes: the sandbox could not mount its own /proc")
		}
	}
	// ProtectHostname=yes also denies sethostname with a seccomp filter.
	if last("Service.ProtectHostname") == "yes" {
		ps = append(ps, "ProtectHostname=yes: sethostname is denied, even in the sandbox's UTS namespace")
	}
	// Loopback is brought up through an AF_INET socket.
	if fams := last("Service.RestrictAddressFamilies"); fams != "" && fams != "none" {
		list := strings.Fields(strings.TrimPrefix(fams, "~"))
		if strings.HasPrefix(fams, "~") == slices.Contains(list, "AF_INET") {
			ps = append(ps, "RestrictAddressFamilies denies AF_INET: the sandbox brings loopback up through one")
		}
	}
	return ps
}

// The unit lets the default sandbox.require (namespaces) work: a future
// tightening that would make serve refuse to start fails here.
func TestSystemdUnitAllowsTheSandbox(t *testing.T) {
	if _, err := os.Stat(systemdTool); err != nil {
		t.Skipf("%s is not installed (Debian's systemd package): %v", systemdTool, err)
	}
	g := &syscallGroups{t: t, cache: map[string][]string{}}
	text := readUnit(t)
	if ps := sandboxUnitProblems(g, text); len(ps) != 0 {
		t.Errorf("%s:\n%s", unitFile, strings.Join(ps, "\n"))
	}
	// The unit still denies what the sandbox does not need.
	allow, filtered := allowedSyscalls(g, unitKeys(text)["Service.SystemCallFilter"])
	if !filtered {
		t.Fatal("no system-call filter")
	}
	for _, c := range []string{"capset", "setuid", "setresuid", "setgroups", "chroot", "fsopen", "move_mount", "open_tree", "init_module", "reboot", "syslog", "_sysctl"} {
		if allow(c) {
			t.Errorf("SystemCallFilter allows %s, which the sandbox does not need", c)
		}
	}
	ns := allowedNamespaces(unitKeys(text)["Service.RestrictNamespaces"])
	for _, n := range []string{"cgroup", "time"} {
		if ns[n] {
			t.Errorf("RestrictNamespaces allows %s namespaces, which the sandbox does not create", n)
		}
	}
	// Each tightening that would break the sandbox is found.
	for _, tc := range []struct{ old, new, want string }{
		{"RestrictNamespaces=user mnt pid net ipc uts", "RestrictNamespaces=yes", "does not allow user"},
		{"RestrictNamespaces=user mnt pid net ipc uts", "RestrictNamespaces=user mnt pid net ipc", "does not allow uts"},
		{"RestrictNamespaces=user mnt pid net ipc uts", "RestrictNamespaces=~user", "does not allow user"},
		{"SystemCallFilter=mount umount2 pivot_root mount_setattr sethostname\n", "", "denies pivot_root"},
		{"SystemCallFilter=landlock_create_ruleset landlock_add_rule landlock_restrict_self\n", "", "denies landlock_restrict_self"},
		{"SystemCallErrorNumber=EPERM", "SystemCallFilter=~@mount\nSystemCallErrorNumber=EPERM", "denies mount"},
		{"SystemCallErrorNumber=EPERM", "SystemCallFilter=~sethostname\nSystemCallErrorNumber=EPERM", "denies sethostname"},
		{"ProtectKernelTunables=no", "ProtectKernelTunables=yes", "could not mount its own /proc"},
		{"ProtectKernelLogs=no", "ProtectKernelLogs=yes", "could not mount its own /proc"},
		{"ProtectHostname=no", "ProtectHostname=yes", "sethostname is denied"},
		{"RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6", "RestrictAddressFamilies=AF_UNIX AF_INET6", "denies AF_INET"},
	} {
		bad := strings.Replace(text, tc.old, tc.new, 1)
		if bad == text {
			t.Fatalf("the mutation %q did not apply", tc.old)
		}
		ps := sandboxUnitProblems(g, bad)
		if !slices.ContainsFunc(ps, func(p string) bool { return strings.Contains(p, tc.want) }) {
			t.Errorf("%q → %q: problems %q, want one saying %q", tc.old, tc.new, ps, tc.want)
		}
	}
}

// The merge of SystemCallFilter lines follows systemd.exec(5).
func TestAllowedSyscalls(t *testing.T) {
	if _, err := os.Stat(systemdTool); err != nil {
		t.Skipf("%s is not installed: %v", systemdTool, err)
	}
	g := &syscallGroups{t: t, cache: map[string][]string{}}
	for _, tc := range []struct {
		lines []string
		call  string
		want  bool
	}{
		{[]string{"@system-service"}, "read", true},
		{[]string{"@system-service"}, "pivot_root", false},
		{[]string{"@system-service", "~@privileged"}, "setuid", false},
		{[]string{"@system-service", "~@privileged", "pivot_root"}, "pivot_root", true},
		{[]string{"@system-service", "pivot_root", "~@privileged"}, "pivot_root", false},
		{[]string{"~@mount"}, "read", true},
		{[]string{"~@mount"}, "mount", false},
		{[]string{"~@mount", "mount"}, "mount", true},
		{[]string{"@system-service", "", "~@mount"}, "reboot", true},
		{[]string{"@system-service", "mount:EPERM"}, "mount", true},
	} {
		allow, _ := allowedSyscalls(g, tc.lines)
		if got := allow(tc.call); got != tc.want {
			t.Errorf("%q: %s allowed %v, want %v", tc.lines, tc.call, got, tc.want)
		}
	}
	if got := fmt.Sprint(allowedNamespaces([]string{"user mnt"})["pid"], allowedNamespaces([]string{"~user"})["pid"],
		allowedNamespaces([]string{"yes"})["user"], allowedNamespaces(nil)["time"]); got != "false true false true" {
		t.Errorf("allowedNamespaces: %s", got)
	}
}
