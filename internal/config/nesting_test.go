package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
)

// nestedFiles are 200 KB files nested as deep as their size allows, in
// each way YAML nests, with where the first level past the limit opens:
// the parser took 20 to 35 s on some of them before the limit.
func nestedFiles() []struct {
	name         string
	data         string
	line, column int
} {
	const size = 200 << 10
	limit := config.MaxNesting
	var indented strings.Builder
	for i := 0; indented.Len() < size; i++ {
		indented.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	return []struct {
		name         string
		data         string
		line, column int
	}{
		// The top-level mapping is the first level; a: [ opens the second.
		{"flow lists", "a: " + strings.Repeat("[", size/2) + strings.Repeat("]", size/2), 1, 3 + limit},
		{"flow mappings", "a: " + strings.Repeat("{a: ", size/8) + "1" + strings.Repeat("}", size/8), 1, 4 * limit},
		{"lists and mappings", "a: " + strings.Repeat("[{a: ", size/10) + "1" + strings.Repeat("}]", size/10), 1, 5 * (limit / 2)},
		// The top-level list is the first level; each "- " opens one more.
		{"compact block lists", strings.Repeat("- ", size/2) + "x", 1, 1 + 2*limit},
		// Each line's key opens one more level.
		{"indented mappings", indented.String(), limit + 1, limit + 1},
	}
}

// A file nested deeper than config.MaxNesting levels is refused before it is
// parsed, with one problem that gives the limit and where the level past it
// opens; nothing else is read from it. (BenchmarkDeeplyNested measures
// how fast.)
func TestDeepNestingIsRefused(t *testing.T) {
	for _, f := range nestedFiles() {
		t.Run(f.name, func(t *testing.T) {
			_, _, err := config.Parse([]byte(f.data), nil)
			var ps *config.Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse = %v, want *Problems", err)
			}
			want := config.Problem{Msg: fmt.Sprintf("nested more than %d levels deep (a config is a few levels deep); the file is not read further",
				config.MaxNesting), Line: f.line, Column: f.column}
			if len(*ps) != 1 || (*ps)[0] != want {
				t.Errorf("problems %q, want only %q", *ps, want)
			}
		})
	}
}

// Nesting up to the limit is read as usual: lists nested to the last level
// allowed, in a key that takes a list of strings, are a type error at their
// place, not a refusal.
func TestNestingUpToTheLimitIsRead(t *testing.T) {
	depth := config.MaxNesting - 3 // the top level, mcp_servers' list, the entry's mapping
	src := head + gh + "mcp_servers:\n  - mcp_server_name: a\n    command: " + strings.Repeat("[", depth) + "x" + strings.Repeat("]", depth) + "\n"
	_, _, err := config.Parse([]byte(src), nil)
	var ps *config.Problems
	if !errors.As(err, &ps) || len(*ps) != 1 || (*ps)[0].Path != "mcp_servers[0].command[0]" {
		t.Fatalf("Parse = %v, want one type error at mcp_servers[0].command[0]", err)
	}
}

// A config file larger than config.MaxConfigBytes is refused without being
// read whole (a --config pointing at a device or a log would otherwise be
// read to its end), and so is such data given to Parse.
func TestLargeConfigFileIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	big := "# " + strings.Repeat("x", config.MaxConfigBytes) + "\n"
	if err := os.WriteFile(path, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("larger than %d bytes (1 MiB): a config file is a few kilobytes", config.MaxConfigBytes)
	if _, _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load = %v, want %q", err, want)
	}
	if _, _, err := config.Parse([]byte(big), nil); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Parse = %v, want %q", err, want)
	}
	if _, _, err := config.Load("/dev/zero"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load(/dev/zero) = %v, want %q", err, want)
	}
}

// BenchmarkDeeplyNested parses each 200 KB deeply nested file: refused in
// a few milliseconds, where the parser alone took 20 to 35 s.
func BenchmarkDeeplyNested(b *testing.B) {
	for _, f := range nestedFiles() {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(f.data)))
			for b.Loop() {
				if _, _, err := config.Parse([]byte(f.data), nil); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}
