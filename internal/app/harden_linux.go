package app

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Harden makes the process non-dumpable (prctl PR_SET_DUMPABLE 0): another
// process of the same user, an MCP server among them, can no longer read
// its environment or memory through /proc/<pid>/environ, /proc/<pid>/mem
// or ptrace, and the kernel writes no core dump holding its secrets. Only
// a process with CAP_SYS_PTRACE (root, unless a container drops it, as
// Docker does by default) still can. A child starts dumpable again, so the
// MCP servers themselves are unaffected. Call it first thing in main.
func Harden() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making the process non-dumpable: %w", err)
	}
	return nil
}
