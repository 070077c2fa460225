package builtin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/workspace/builtin"
)

// BenchmarkNewServerAndConnect is the cost of the workspace server per
// task: make it, connect a client over in-memory transports, list the
// tools, close.
func BenchmarkNewServerAndConnect(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	b.ReportAllocs()
	for b.Loop() {
		srv, err := builtin.NewServer(builtin.Options{Dir: dir, Runner: &fakeRunner{}})
		if err != nil {
			b.Fatal(err)
		}
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		if err != nil {
			b.Fatal(err)
		}
		cs, err := client.Connect(ctx, ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		res, err := cs.ListTools(ctx, nil)
		if err != nil || len(res.Tools) != 6 {
			b.Fatalf("ListTools: %v, %d tools", err, len(res.Tools))
		}
		_ = cs.Close()
		_ = ss.Wait()
	}
}

// BenchmarkReadFile reads a 16 KiB source file through a connected client.
func BenchmarkReadFile(b *testing.B) {
	dir := b.TempDir()
	content := strings.Repeat("func f() { return \"some go code here\" }\n", 500)[:16<<10]
	writeFiles(b, dir, map[string]string{"src/main.go": content})
	cs := connect(b, builtin.Options{Dir: dir})
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "src/main.go"}}
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatalf("read_file: %v %v", err, res)
		}
	}
}

// BenchmarkNewServer is NewServer alone: the tools' schemas come from the
// package's cache after the first server.
func BenchmarkNewServer(b *testing.B) {
	dir := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := builtin.NewServer(builtin.Options{Dir: dir, Runner: &fakeRunner{}}); err != nil {
			b.Fatal(err)
		}
	}
}
