package builtin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkReadFileHandler is read_file's own work, without the MCP
// round trip that BenchmarkReadFile measures.
func BenchmarkReadFileHandler(b *testing.B) {
	dir := b.TempDir()
	content := strings.Repeat("func f() { return \"some go code here\" }\n", 500)[:16<<10]
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "main.go"), []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
	co, err := newCheckout(dir)
	if err != nil {
		b.Fatal(err)
	}
	s := &server{co: co, maxRead: DefaultMaxReadBytes}
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.readFile(readInput{Path: "src/main.go"}); err != nil {
			b.Fatal(err)
		}
	}
}
