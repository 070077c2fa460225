package toolhost

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestTruncateCutsOnRuneBoundaryWithNote(t *testing.T) {
	text := strings.Repeat("é", 100) // 200 bytes, 2 per rune
	for limit := 60; limit <= 70; limit++ {
		r := truncate(text, limit)
		if !r.Truncated || r.Bytes != 200 {
			t.Fatalf("limit %d: %+v, want Truncated and Bytes 200", limit, r)
		}
		if len(r.Text) > limit {
			t.Errorf("limit %d: text is %d bytes", limit, len(r.Text))
		}
		if !utf8.ValidString(r.Text) {
			t.Errorf("limit %d: text is not valid UTF-8: %q", limit, r.Text)
		}
		kept, note, ok := strings.Cut(r.Text, "\n[output truncated: ")
		if !ok || strings.Trim(kept, "é") != "" {
			t.Fatalf("limit %d: text %q, want kept runes then a note", limit, r.Text)
		}
		wantNote := "the last " + strconv.Itoa(200-len(kept)) + " of 200 bytes were cut]"
		if note != wantNote {
			t.Errorf("limit %d: note %q, want %q", limit, note, wantNote)
		}
	}
}

func TestTruncateLeavesShortTextAlone(t *testing.T) {
	r := truncate("héllo", 6)
	if r != (Result{Text: "héllo", Bytes: 6}) {
		t.Errorf("truncate = %+v", r)
	}
	// A limit smaller than the note keeps only the note.
	r = truncate(strings.Repeat("x", 100), 5)
	if !r.Truncated || !strings.HasPrefix(r.Text, "\n[output truncated: the last 100 of 100") {
		t.Errorf("truncate to 5 = %+v", r)
	}
}

func TestRenderContent(t *testing.T) {
	size := int64(7)
	tests := []struct {
		name string
		res  *mcp.CallToolResult
		want string
	}{
		{"texts joined", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b"}}}, "a\nb"},
		{"image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, 1234)}}}, "[image image/png, 1234 bytes]"},
		{"audio", &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 3)}}}, "[audio audio/wav, 3 bytes]"},
		{"link", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ResourceLink{URI: "file:///a", Name: "a", Size: &size}}}, "[resource link file:///a: a]"},
		{"text resource", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///r", Text: "body"}}}}, "[resource file:///r]\nbody"},
		{"blob resource", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///b", MIMEType: "application/zip", Blob: make([]byte, 9)}}}}, "[resource file:///b, application/zip, 9 bytes]"},
		{"structured only", &mcp.CallToolResult{StructuredContent: map[string]any{"n": 1}}, `{"n":1}`},
		{"text wins over structured", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "t"}}, StructuredContent: map[string]any{"n": 1}}, "t"},
		{"nothing", &mcp.CallToolResult{}, ""},
	}
	for _, tt := range tests {
		if got := renderContent(tt.res); got != tt.want {
			t.Errorf("%s: renderContent = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestResultKeepsIsErrorAndCaps(t *testing.T) {
	h := &Host{opts: Options{MaxResultBytes: 64}.withDefaults()}
	r := h.result(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("ж", 100)}}}, false)
	if !r.IsError || !r.Truncated || r.Bytes != 200 || len(r.Text) > 64 || !utf8.ValidString(r.Text) {
		t.Errorf("result = %+v", r)
	}
}

func TestParseArgs(t *testing.T) {
	for _, ok := range []string{``, ` `, `null`, `{}`, ` {"a": 1.5e300, "b": [1]} `} {
		if _, err := parseArgs(json.RawMessage(ok)); err != nil {
			t.Errorf("parseArgs(%q): %v", ok, err)
		}
	}
	m, err := parseArgs(json.RawMessage(`{"n": 12345678901234567890}`))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(m); string(b) != `{"n":12345678901234567890}` {
		t.Errorf("big number re-encoded as %s", b)
	}
	for _, bad := range []string{`[]`, `"s"`, `1`, `{`, `{"a":1}x`, `{"a":1}{}`} {
		if _, err := parseArgs(json.RawMessage(bad)); err == nil {
			t.Errorf("parseArgs(%q) succeeded, want an error", bad)
		}
	}
}
