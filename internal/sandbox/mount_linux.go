package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The mount view of level Namespaces is built like bubblewrap's: a tmpfs
// becomes the root with the old root at /oldroot, the new root is
// assembled in /newroot from /oldroot's paths (so a Work under /tmp is
// still found), then pivot_root into it drops everything else.
const (
	base    = "/tmp" // any directory that exists; its tmpfs is ours only
	oldRoot = "/oldroot"
	newRoot = "/newroot"
)

// buildRoot makes the command's mount view and moves into it.
func buildRoot(sp *spec) error {
	steps := []struct {
		what string
		do   func(*spec) error
	}{
		{"make mounts private", func(*spec) error { return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") }},
		{"mount base tmpfs", mountBase},
		{"bind tmp", func(sp *spec) error { return bindPath(sp.Tmp, "/tmp", false) }},
		{"bind system dirs", bindSystem},
		{"hide paths", func(sp *spec) error { return hidePaths(sp, false) }},
		{"bind work dirs", bindWork},
		{"hide paths in work dirs", func(sp *spec) error { return hidePaths(sp, true) }},
		{"mount proc", func(*spec) error {
			return mountFS("proc", newRoot+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}},
		{"make dev", makeDev},
		{"pivot root", pivot},
	}
	for _, s := range steps {
		if err := s.do(sp); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

// mountFS mounts after creating the mount point directory.
func mountFS(src, dst, fstype string, flags uintptr, data string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("create mount point: %w", err)
	}
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", fstype, dst, err)
	}
	return nil
}

// mountBase puts a tmpfs at base and pivots into it, the old root at
// /oldroot, an empty tmpfs at /newroot.
func mountBase(*spec) error {
	if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", base, err)
	}
	if err := os.Mkdir(base+oldRoot, 0o755); err != nil {
		return fmt.Errorf("create old root: %w", err)
	}
	if err := mountFS("tmpfs", base+newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m"); err != nil {
		return err
	}
	if err := unix.PivotRoot(base, base+oldRoot); err != nil {
		return fmt.Errorf("pivot_root to tmpfs: %w", err)
	}
	return unix.Chdir("/")
}

// bindSystem binds the system dirs and Policy.ReadOnly read-only, keeping
// symlinks (merged /usr: /bin -> usr/bin) as symlinks.
func bindSystem(sp *spec) error {
	for _, p := range sp.ReadOnly {
		if err := bindPath(p, p, true); err != nil {
			return err
		}
	}
	return nil
}

// bindPath binds oldRoot+src at newRoot+dst, read-only when ro.
func bindPath(src, dst string, ro bool) error {
	from, to := oldRoot+src, newRoot+dst
	fi, err := os.Lstat(from)
	if err != nil {
		return fmt.Errorf("stat %s: %w", src, err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(from)
		if err != nil {
			return fmt.Errorf("read link %s: %w", src, err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return fmt.Errorf("create parent of %s: %w", dst, err)
		}
		if err := os.Symlink(target, to); err != nil && !os.IsExist(err) {
			return fmt.Errorf("link %s: %w", dst, err)
		}
		return nil
	}
	if err := mountPoint(to, fi.IsDir()); err != nil {
		return fmt.Errorf("create mount point %s: %w", dst, err)
	}
	if err := unix.Mount(from, to, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if ro {
		return readOnly(to, true)
	}
	return nil
}

// mountPoint makes a directory, or an empty file for a file, at p.
func mountPoint(p string, dir bool) error {
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	if dir {
		return os.MkdirAll(p, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// readOnly makes the mount at p read-only (with the ones below it when
// rec). mount_setattr changes only that flag, where a remount would have to
// repeat the flags the kernel locked (nosuid, nodev) or fail.
func readOnly(p string, rec bool) error {
	flags := 0
	if rec {
		flags = unix.AT_RECURSIVE
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(-1, p, uint(flags), attr); err != nil {
		return fmt.Errorf("make %s read-only: %w", p, err)
	}
	return nil
}

// bindWork binds Work and Home at their own paths. Tmp was bound at /tmp
// first, so that a Work, Home or read-only path under the host's /tmp is
// not shadowed by it (its mount point is then made in Tmp).
func bindWork(sp *spec) error {
	if err := bindPath(sp.Work, sp.Work, false); err != nil {
		return err
	}
	return bindPath(sp.Home, sp.Home, false)
}

// seen is where host path p appears in the box, "" if it is not under a
// bound dir.
func seen(sp *spec, p string) (string, bool) {
	for _, d := range []string{sp.Work, sp.Home} {
		if within(p, d) {
			return p, true
		}
	}
	if within(p, sp.Tmp) {
		return "/tmp" + strings.TrimPrefix(p, sp.Tmp), true
	}
	return p, false
}

// hidePaths covers each Hide path that the box can see: a tmpfs on a
// directory, /dev/null on a file, both read-only. First pass (inWork
// false): the paths seen through the system dirs, before Work, Home and
// Tmp are bound, so that a hidden dir may still contain them. Second pass:
// the paths inside Work, Home and Tmp, except one that contains another
// of those dirs.
func hidePaths(sp *spec, inWork bool) error {
	for _, h := range sp.Hide {
		p, under := seen(sp, h)
		if under != inWork || (inWork && containsBound(sp, p)) {
			continue
		}
		fi, err := os.Stat(newRoot + p)
		if err != nil {
			continue // not visible
		}
		if err := cover(newRoot+p, fi.IsDir()); err != nil {
			return fmt.Errorf("hide %s: %w", h, err)
		}
		if fi.IsDir() {
			sp.covers = append(sp.covers, p)
		}
	}
	return nil
}

// containsBound reports whether box path p contains another bound dir.
func containsBound(sp *spec, p string) bool {
	for _, d := range []string{sp.Work, sp.Home, "/tmp"} {
		if within(d, p) {
			return true
		}
	}
	return false
}

// cover mounts an empty read-only thing over p.
func cover(p string, dir bool) error {
	if dir {
		// Read-write until pivot: Work or Home may need a mount point in
		// it; makeReadOnlyTop seals it.
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k"); err != nil {
			return err
		}
		return nil
	}
	if err := unix.Mount(oldRoot+"/dev/null", p, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return readOnly(p, false)
}

// makeDev builds a small /dev: the harmless device nodes bound from the
// host, a tmpfs /dev/shm and the /proc/self/fd symlinks.
func makeDev(*spec) error {
	dev := newRoot + "/dev"
	if err := mountFS("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if err := mountPoint(dev+"/"+n, false); err != nil {
			return err
		}
		if err := unix.Mount(oldRoot+"/dev/"+n, dev+"/"+n, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
	}
	links := map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"}
	for n, t := range links {
		if err := os.Symlink(t, dev+"/"+n); err != nil {
			return fmt.Errorf("link /dev/%s: %w", n, err)
		}
	}
	if err := mountFS("tmpfs", dev+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=64m"); err != nil {
		return err
	}
	return readOnly(dev, false)
}

// pivot moves into the new root, drops the old one and seals the tmpfs
// root and the hide covers read-only.
func pivot(sp *spec) error {
	if err := unix.Chdir(newRoot); err != nil {
		return fmt.Errorf("enter new root: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("enter /: %w", err)
	}
	return sealTmpfs(sp)
}

// sealTmpfs makes the tmpfs root and the hide covers read-only.
func sealTmpfs(sp *spec) error {
	for _, p := range append([]string{"/"}, sp.covers...) {
		if err := readOnly(p, false); err != nil {
			return err
		}
	}
	return nil
}

// setupNamespaces names the host, brings loopback up in an own network
// namespace and bounds the pid namespace.
func setupNamespaces(sp *spec) error {
	if err := unix.Sethostname([]byte("sandbox")); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	if !sp.Network {
		if err := loopbackUp(); err != nil {
			return err
		}
	}
	boundPids(sp.Limits.MaxProcesses)
	return nil
}

// loopbackUp brings lo up, so the command's own local servers work.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open socket for lo: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("name lo: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("read lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}

// boundPids caps the pid namespace's pid numbers (Linux 6.14 and later make
// pid_max per pid namespace). RLIMIT_NPROC does not hold for a command
// whose real uid is the host's root (the kernel exempts INIT_USER), so this
// is what stops a fork bomb of a daemon run as root. The kernel's floor is
// 301, so the cap is max(MaxProcesses+1, 301); RLIMIT_NPROC gives the
// exact bound for everyone else. Older kernels refuse the write: ignored.
func boundPids(maxProcs int) {
	n := max(maxProcs+1, 301)
	_ = os.WriteFile("/proc/sys/kernel/pid_max", []byte(strconv.Itoa(n)), 0)
}
