//go:build !linux

package toolhost

import "os/exec"

// setProcAttr does nothing here: the kernel features it uses are Linux's.
func setProcAttr(*exec.Cmd) {}

func killGroup(int) {}
