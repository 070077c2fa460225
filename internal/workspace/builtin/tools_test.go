package builtin_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/workspace/builtin"
)

// schemaOf is the part of a tool's input schema the test looks at.
type schemaOf struct {
	Type       string                     `json:"type"`
	Required   []string                   `json:"required"`
	Properties map[string]json.RawMessage `json:"properties"`
}

func TestTools(t *testing.T) {
	want := map[string]struct {
		readOnly bool
		required []string
		optional []string
	}{
		"read_file":   {true, []string{"path"}, []string{"offset_line", "max_lines"}},
		"write_file":  {false, []string{"content", "path"}, nil},
		"edit_file":   {false, []string{"new_text", "old_text", "path"}, []string{"replace_all"}},
		"list_files":  {true, nil, []string{"path", "recursive", "max_entries"}},
		"search":      {true, []string{"pattern"}, []string{"path", "regex", "glob", "max_results"}},
		"run_command": {false, []string{"command"}, []string{"timeout_seconds"}},
	}
	cs := connect(t, builtin.Options{Dir: t.TempDir(), Runner: &fakeRunner{}})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		w, known := want[tool.Name]
		if !known {
			t.Errorf("unexpected tool %q", tool.Name)
			continue
		}
		if len(tool.Description) < 40 || len(tool.Description) > 400 {
			t.Errorf("%s: description of %d bytes: %q", tool.Name, len(tool.Description), tool.Description)
		}
		if tool.Annotations == nil || tool.Annotations.ReadOnlyHint != w.readOnly {
			t.Errorf("%s: annotations %+v, want readOnlyHint %v", tool.Name, tool.Annotations, w.readOnly)
		}
		b, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s schemaOf
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		got := slices.Sorted(slices.Values(s.Required))
		if s.Type != "object" || !slices.Equal(got, w.required) {
			t.Errorf("%s: schema type %q, required %q; want object, %q", tool.Name, s.Type, got, w.required)
		}
		for _, p := range append(slices.Clone(w.required), w.optional...) {
			if !strings.Contains(string(s.Properties[p]), `"description"`) {
				t.Errorf("%s: property %q has no description: %s", tool.Name, p, s.Properties[p])
			}
		}
		if len(s.Properties) != len(w.required)+len(w.optional) {
			t.Errorf("%s: properties %s", tool.Name, b)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"edit_file", "list_files", "read_file", "run_command", "search", "write_file"}) {
		t.Errorf("tools %q", names)
	}
}

func TestNoRunnerNoRunCommand(t *testing.T) {
	cs := connect(t, builtin.Options{Dir: t.TempDir()})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == "run_command" {
			t.Error("run_command is offered without a Runner")
		}
	}
	if len(res.Tools) != 5 {
		t.Errorf("%d tools without a Runner, want 5", len(res.Tools))
	}
}

func TestNewServerDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"", filepath.Join(t.TempDir(), "missing"), file} {
		if _, err := builtin.NewServer(builtin.Options{Dir: dir}); err == nil {
			t.Errorf("NewServer with Dir %q: no error", dir)
		}
	}
	// A relative Dir, and one reached through a symbolic link, are the same checkout.
	real := t.TempDir()
	writeFiles(t, real, map[string]string{"f.txt": "hi"})
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, builtin.Options{Dir: link})
	for _, p := range []string{"f.txt", filepath.Join(link, "f.txt"), filepath.Join(real, "f.txt")} {
		if got := ok(t, cs, "read_file", map[string]any{"path": p}); got != "hi" {
			t.Errorf("read_file %s = %q", p, got)
		}
	}
	if _, err := builtin.NewServer(builtin.Options{Dir: "."}); err != nil {
		t.Errorf("NewServer with Dir \".\": %v", err)
	}
}

// TestArgumentsChecked: arguments of the wrong type are a tool error, not a
// failed call.
func TestArgumentsChecked(t *testing.T) {
	cs := connect(t, builtin.Options{Dir: t.TempDir()})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": 3}})
	if err != nil {
		t.Fatalf("a bad argument is a protocol error: %v", err)
	}
	if !res.IsError {
		t.Error("a bad argument is not a tool error")
	}
}
