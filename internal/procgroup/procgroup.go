// Package procgroup runs a child process in a group of its own that dies
// with us: the tool servers and git both need it, so that a timeout ends a
// child's own children too and no child outlives the process that started
// it (on Linux; elsewhere both are no-ops).
package procgroup
