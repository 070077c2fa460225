//go:build !linux

package workspace

import "os/exec"

// setProcAttr does nothing here: the kernel features it uses are Linux's; a
// timeout kills git alone.
func setProcAttr(*exec.Cmd) {}

func killGroup(int) {}
