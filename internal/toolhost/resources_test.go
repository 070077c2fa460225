package toolhost

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// linkServer has one tool, links, whose result links to a readable
// resource, a missing one and a large one.
func linkServer(_ TaskVars) (*mcp.Server, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "links", Version: "1"}, nil)
	s.AddResource(&mcp.Resource{URI: "file:///notes.md", Name: "notes"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, MIMEType: "text/markdown", Text: "The notes say: use tabs."}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "file:///big.txt", Name: "big"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: strings.Repeat("x", 100_000)}}}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "links"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "Here are the files."},
			&mcp.ResourceLink{URI: "file:///notes.md", Name: "notes"},
			&mcp.ResourceLink{URI: "file:///gone.md", Name: "gone"},
			&mcp.ResourceLink{URI: "file:///big.txt", Name: "big"},
		}}, nil, nil
	})
	return s, nil
}

// A tool result's resource links are read and given to the model; one
// that cannot be read says why; the whole is cut to MaxResultBytes with a
// note.
func TestResourceLinksAreRead(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{{Name: "l", InProcess: linkServer}}, MaxResultBytes: 4096})
	res := call(t, h, "l/links", map[string]any{})
	for _, want := range []string{"Here are the files.", "[resource file:///notes.md]\nThe notes say: use tabs.",
		"[resource link file:///gone.md: gone; reading it failed:", "[output truncated:"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("the result lacks %q:\n%.600s", want, res.Text)
		}
	}
	if !res.Truncated || len(res.Text) > 4096 {
		t.Errorf("the result is %d bytes, truncated %v; want at most 4096, cut", len(res.Text), res.Truncated)
	}
}

// A server without resources has its links named, not read.
func TestResourceLinksOfAServerWithoutResources(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{{Name: "n", InProcess: func(TaskVars) (*mcp.Server, error) {
		s := mcp.NewServer(&mcp.Implementation{Name: "n", Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "link"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ResourceLink{URI: "file:///x", Name: "x"}}}, nil, nil
		})
		return s, nil
	}}}})
	if res := call(t, h, "n/link", map[string]any{}); res.Text != "[resource link file:///x: x; not read: the server offers no resources to read]" {
		t.Errorf("result %q", res.Text)
	}
}

// The resources the servers list are found by words and read by URI
// through the host's resources/ tools; a URI no server lists is refused;
// without resources there are no such tools.
func TestResourcesFoundAndRead(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{{Name: "l", InProcess: linkServer}}})
	var names []string
	for _, tool := range h.Tools() {
		names = append(names, tool.FullName())
	}
	if !slices.Contains(names, "resources/find") || !slices.Contains(names, "resources/read") {
		t.Fatalf("tools %q", names)
	}
	found := call(t, h, "resources/find", map[string]any{"query": "notes"})
	if found.IsError || !strings.Contains(found.Text, "file:///notes.md (notes, on l)") || strings.Contains(found.Text, "big.txt") {
		t.Fatalf("find: %+v", found)
	}
	read := call(t, h, "resources/read", map[string]any{"uri": "file:///notes.md"})
	if read.IsError || !strings.Contains(read.Text, "The notes say: use tabs.") {
		t.Fatalf("read: %+v", read)
	}
	if res := call(t, h, "resources/read", map[string]any{"uri": "file:///etc/passwd"}); !res.IsError {
		t.Fatalf("an unlisted URI was read: %+v", res)
	}
	plain := start(t, Options{Servers: []ServerConfig{testServer(t, "t")}})
	for _, tool := range plain.Tools() {
		if tool.Server == ResourceServer {
			t.Fatalf("a host without resources offers %s", tool.FullName())
		}
	}
	if _, err := Start(t.Context(), Options{Servers: []ServerConfig{{Name: ResourceServer, InProcess: linkServer}}}); err == nil {
		t.Fatal("a server took the host's resources name")
	}
	if ResourceServer != config.ResourcesServer {
		t.Fatalf("the host's name %q, the configuration's %q", ResourceServer, config.ResourcesServer)
	}
}
