package app_test

import (
	"os"
	"testing"

	"github.com/coding-agent/coding-agent/internal/sandbox"
)

// TestMain lets the test binary be the sandbox helper of the commands the
// tests' tasks run, as the daemon's main does. It puts a secret in the
// daemon's environment for the escape suites to look for (set here, once,
// so that they can run beside the other tests).
func TestMain(m *testing.M) {
	sandbox.Enter()
	os.Setenv(daemonSecretVar, daemonSecret)
	os.Exit(m.Run())
}
