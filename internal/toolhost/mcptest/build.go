package mcptest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/coding-agent/coding-agent/internal/buildtest"
)

// Build returns the path of the test server (testserver/), built once for
// each state of the sources (buildtest.Command).
func Build(t testing.TB) string {
	t.Helper()
	return buildtest.Command(t, "./internal/toolhost/mcptest/testserver")
}

// ModuleRoot returns the directory of this module's go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	return buildtest.ModuleRoot(t)
}

// NodeModule returns the path of rel under the module's node_modules directory
// (for example ".bin/mcp-server-filesystem"). The test fails when it is missing:
// the npm packages are part of the test setup, not optional.
func NodeModule(t testing.TB, rel string) string {
	t.Helper()
	root := ModuleRoot(t)
	p := filepath.Join(root, "node_modules", filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run npm ci in %s (%v)", p, root, err)
	}
	return p
}
