package procgroup

import (
	"os/exec"
	"syscall"
)

// Own puts cmd (before it starts) in a process group of its own, so that
// terminal signals reach us only and Kill ends its helpers too, and makes
// the kernel kill it when we die.
func Own(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// Kill ends every process of the group led by pgid (a child started with
// Own: its pid).
func Kill(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
