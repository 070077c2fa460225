package toolhost

import (
	"testing"

	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// BenchmarkStartTwoFilesystemServers starts and stops a host of two npm
// filesystem servers (node, as npx runs it once the package is cached):
// the time Start takes before the first task can run.
func BenchmarkStartTwoFilesystemServers(b *testing.B) {
	bin := mcptest.NodeModule(b, ".bin/mcp-server-filesystem")
	dir := b.TempDir()
	opts := Options{Servers: []ServerConfig{
		{Name: "fs1", Command: []string{bin, dir}},
		{Name: "fs2", Command: []string{bin, dir}},
	}}
	for b.Loop() {
		h, err := Start(b.Context(), opts)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := h.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
