//go:build !linux

package procgroup

import "os/exec"

// Own does nothing here: the kernel features it uses are Linux's.
func Own(*exec.Cmd) {}

// Kill does nothing here: a child is killed alone.
func Kill(int) {}
