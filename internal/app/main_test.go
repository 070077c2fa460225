package app_test

import (
	"os"
	"testing"

	"github.com/coding-agent/coding-agent/internal/sandbox"
)

// TestMain lets the test binary be the sandbox helper of the commands the
// tests' tasks run, as the daemon's main does.
func TestMain(m *testing.M) {
	sandbox.Enter()
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
