package toolhost

import (
	"fmt"
	"testing"
	"time"

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

// BenchmarkForTaskFilesystem is the start cost of a task's instances of
// task-scoped npm filesystem servers (node, as npx runs it once the package
// is cached), one or two at once: ms/op is ForTask, close-ms/op the
// session's Close.
func BenchmarkForTaskFilesystem(b *testing.B) {
	bin := mcptest.NodeModule(b, ".bin/mcp-server-filesystem")
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			var servers []ServerConfig
			for i := range n {
				servers = append(servers, ServerConfig{Name: fmt.Sprintf("fs%d", i), Scope: ScopeTask, Command: []string{bin, "${WORKSPACE}"}})
			}
			h, err := Start(b.Context(), Options{Servers: servers})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			vars := TaskVars{Workspace: b.TempDir(), TaskRef: "github:acme/app#1", Branch: "coding-agent/1"}
			var closing time.Duration
			for b.Loop() {
				s, err := h.ForTask(b.Context(), vars)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				began := time.Now()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				closing += time.Since(began)
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
			b.ReportMetric(float64(closing.Microseconds())/1000/float64(b.N), "close-ms/op")
		})
	}
}
