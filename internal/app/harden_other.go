//go:build !linux

package app

// Harden does nothing here: making the process unreadable to its children
// (prctl PR_SET_DUMPABLE) is Linux's.
func Harden() error { return nil }
