//go:build unix

package main

import "syscall"

// hang stops the whole process, as a server stuck in a busy loop is: it
// reads and answers nothing more, and only SIGKILL ends it. The call never
// returns: the process may run on for a moment before every thread stops.
func hang() {
	_ = syscall.Kill(syscall.Getpid(), syscall.SIGSTOP)
	select {}
}
