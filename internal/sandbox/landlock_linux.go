package sandbox

import (
	"os"
	"path/filepath"

	"github.com/landlock-lsm/go-landlock/landlock"
)

// restrict applies the Landlock domain of the command: read-only access to
// the system dirs, Policy.ReadOnly and /proc, read-write to Work, Home and
// Tmp and a few device nodes, nothing else; TCP (and on ABI 10 UDP) denied
// without Network; abstract unix sockets and signals scoped to the box.
// BestEffort only downgrades to what the kernel has: New already refused a
// Require of Landlock on a host without it. /proc stays readable because
// tools need /proc/self; Landlock's ptrace scoping keeps the environ and
// memory of every process outside the domain (the daemon's) unreadable.
func restrict(sp *spec) error {
	tmp := sp.Tmp
	if sp.Level == Namespaces {
		tmp = "/tmp"
	}
	// At level Namespaces the Hide paths are covered by mounts, which
	// Landlock rules on their parents do not open: no split is needed,
	// and a split dir could not be listed.
	hide := sp.Hide
	if sp.Level == Namespaces {
		hide = nil
	} else if !sp.Network {
		// Landlock below ABI 10 cannot deny UDP: without the resolver's
		// address, at least ordinary name resolution fails (TCP is denied).
		hide = append(append([]string(nil), hide...), "/etc/resolv.conf")
	}
	var rules []landlock.Rule
	for _, p := range sp.ReadOnly {
		if !hidden(p, hide) {
			rules = splitRule(rules, p, false, hide)
		}
	}
	rules = append(rules, landlock.RODirs("/proc").IgnoreIfMissing())
	for _, p := range []string{sp.Work, sp.Home, tmp} {
		rules = splitRule(rules, p, true, hide)
	}
	if sp.Level == Namespaces {
		// Its own tmpfs there; below, the host's /dev/shm would be shared
		// with every process of the daemon's user, other tasks included.
		rules = append(rules, landlock.RWDirs("/dev/shm").WithRefer().IgnoreIfMissing())
	}
	rules = append(rules,
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/tty").WithIoctlDev().IgnoreIfMissing(),
		landlock.ROFiles("/dev/random", "/dev/urandom").IgnoreIfMissing(),
	)
	cfg := landlock.Config{
		HandledAccessFS: landlock.V11.HandledAccessFS,
		Scoped:          landlock.V11.Scoped,
	}
	if !sp.Network {
		cfg.HandledAccessNet = landlock.V11.HandledAccessNet
	}
	return cfg.BestEffort().Restrict(rules...)
}

// hidden reports whether p is a Hide path or under one.
func hidden(p string, hide []string) bool {
	for _, h := range hide {
		if within(p, h) {
			return true
		}
	}
	return false
}

// splitRule allows p, or, when a Hide path is below p, each entry of p on
// the way down but the hidden one: Landlock only allows, so a hidden path
// under an allowed dir stays unreadable only if its parent is not allowed
// as a whole. A split dir itself is then not listable and takes no new
// entries. Symlinks are skipped: access through them is decided at their
// target.
func splitRule(rules []landlock.Rule, p string, rw bool, hide []string) []landlock.Rule {
	fi, err := os.Stat(p)
	if err != nil {
		return rules
	}
	var below []string // only these matter here: a Hide above p does not
	for _, h := range hide {
		if h != p && within(h, p) {
			below = append(below, h)
		}
	}
	if len(below) == 0 || !fi.IsDir() {
		return append(rules, pathRule(p, rw, fi.IsDir()))
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return rules
	}
	for _, e := range entries {
		c := filepath.Join(p, e.Name())
		if e.Type()&os.ModeSymlink != 0 || hidden(c, below) {
			continue
		}
		rules = splitRule(rules, c, rw, below)
	}
	return rules
}

// pathRule is the rule for one path.
func pathRule(p string, rw, dir bool) landlock.Rule {
	switch {
	case rw && dir:
		return landlock.RWDirs(p).WithRefer()
	case rw:
		return landlock.RWFiles(p)
	case dir:
		return landlock.RODirs(p)
	}
	return landlock.ROFiles(p)
}
