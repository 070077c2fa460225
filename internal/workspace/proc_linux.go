package workspace

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts git in a process group of its own, so that a timeout
// ends its helpers too (git-remote-https, index-pack), and makes the kernel
// kill it when we die, so no git goes on writing into a workspace that the
// next process cleans up.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
