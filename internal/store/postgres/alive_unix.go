//go:build unix

package postgres

import (
	"errors"
	"syscall"
)

// processAlive reports whether pid names a running process on this host.
// EPERM (the process exists but belongs to someone else) counts as alive.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
