package toolhost

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the server when we die, and puts it in a
// process group of its own (terminal signals reach us only; we stop it).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
