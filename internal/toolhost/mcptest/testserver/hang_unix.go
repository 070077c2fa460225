//go:build unix

package main

import "syscall"

// hang stops the whole process, as a server stuck in a busy loop is: it
// reads and answers nothing more, and only SIGKILL ends it.
func hang() {
	_ = syscall.Kill(syscall.Getpid(), syscall.SIGSTOP)
}
