//go:build unix

package store

import (
	"errors"
	"syscall"
)

// ProcessAlive reports whether pid names a running process on this host.
// EPERM (the process exists but belongs to someone else) counts as alive.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
