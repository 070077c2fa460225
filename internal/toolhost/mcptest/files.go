package mcptest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Arguments of the file tools.
type (
	// PathArgs are the arguments of read_text_file and list_directory.
	PathArgs struct {
		Path string `json:"path" jsonschema:"the file or directory"`
	}
)

// NewFileServer returns an MCP server with the three file tools the
// daemon's end-to-end tests call, under the names and arguments of the npm
// filesystem server (@modelcontextprotocol/server-filesystem): write_file,
// read_text_file and list_directory, each refusing a path outside root (a
// symbolic link is followed before the check). It starts in a few
// milliseconds where node takes half a second of CPU: the tests whose
// subject is not that server run on it (the testserver program's -files).
func NewFileServer(root string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest-files", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Creates or overwrites the file at path with content."},
		func(_ context.Context, _ *mcp.CallToolRequest, in WriteFileArgs) (*mcp.CallToolResult, any, error) {
			p, err := inside(root, in.Path)
			if err != nil {
				return nil, nil, err
			}
			if err := os.WriteFile(p, []byte(in.Content), 0o644); err != nil {
				return nil, nil, fmt.Errorf("write_file: %w", err)
			}
			return text("Successfully wrote to " + in.Path), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read_text_file", Annotations: readOnly, Description: "Returns the text of the file at path."},
		func(_ context.Context, _ *mcp.CallToolRequest, in PathArgs) (*mcp.CallToolResult, any, error) {
			p, err := inside(root, in.Path)
			if err != nil {
				return nil, nil, err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, nil, fmt.Errorf("read_text_file: %w", err)
			}
			return text(string(b)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_directory", Annotations: readOnly, Description: "Lists the entries of the directory at path, [FILE] or [DIR] before each name."},
		func(_ context.Context, _ *mcp.CallToolRequest, in PathArgs) (*mcp.CallToolResult, any, error) {
			p, err := inside(root, in.Path)
			if err != nil {
				return nil, nil, err
			}
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, nil, fmt.Errorf("list_directory: %w", err)
			}
			lines := make([]string, 0, len(entries))
			for _, d := range entries {
				kind := "[FILE]"
				if d.IsDir() {
					kind = "[DIR]"
				}
				lines = append(lines, kind+" "+d.Name())
			}
			return text(strings.Join(lines, "\n")), nil, nil
		})
	return s
}

// inside resolves path (relative paths from root) and refuses it, with the
// npm server's words, unless it lies in root: as written, and again with
// its symbolic links followed (those of its parent for a file not yet
// there).
func inside(root, path string) (string, error) {
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	p = filepath.Clean(p)
	//lint:ignore ST1005 the npm server's words, as the golden files hold them
	denied := fmt.Errorf("Access denied - path outside allowed directories: %s not in %s", path, root)
	if !within(root, p) {
		return "", denied
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("the allowed directory %s: %w", root, err)
	}
	real, err := filepath.EvalSymlinks(p)
	if os.IsNotExist(err) {
		var dir string
		dir, err = filepath.EvalSymlinks(filepath.Dir(p))
		real = filepath.Join(dir, filepath.Base(p))
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if !within(realRoot, real) {
		return "", denied
	}
	return real, nil
}

// within reports whether the clean absolute path p is dir or below it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
