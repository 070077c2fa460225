package toolhost

import (
	"context"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/sanitize"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A secret of no known shape: only the configured-secret redaction finds it.
const leakSecret = "Zq8xR2mN5vB7kL3pW9tY4hJ6cD1fG0sQ"

// A server process that prints a secret from its environment in every
// encoding, names it in its tool descriptions and quotes it in an error:
// none of it comes out of the host.
func TestWhatAServerSaysIsRedacted(t *testing.T) {
	cfg := testServer(t, "leaky")
	cfg.Env = map[string]string{"LEAK_ME": leakSecret, "MCPTEST_BANNER": "(built with key " + leakSecret + ")"}
	h := start(t, Options{Servers: []ServerConfig{cfg}, Redact: sanitize.NewRedactor([]string{leakSecret}).Redact})

	for _, tool := range h.Tools() {
		if w := mcptest.Leaked(tool.Description+string(tool.InputSchema), leakSecret); w != "" {
			t.Errorf("tool %s is described with %q: %s", tool.FullName(), w, tool.Description)
		}
		if !strings.Contains(tool.Description, "(built with key "+sanitize.Redacted+")") {
			t.Errorf("tool %s: the banner was not redacted in place: %q", tool.FullName(), tool.Description)
		}
	}
	r := call(t, h, "leaky/leak_env", map[string]string{"name": "LEAK_ME"})
	if w := mcptest.Leaked(r.Text, leakSecret); w != "" || r.IsError {
		t.Errorf("leak_env result holds %q:\n%s", w, r.Text)
	}
	for _, form := range []string{"plain: ", "upper: ", "truncated: ", "spaced: ", "base64: ", "hex: ", "percent: %", "query: ",
		"base32: ", "base32hex: ", "json: ", "jsonmixed: ", "html: ", "htmlhex: "} {
		if !strings.Contains(r.Text, form+sanitize.Redacted) {
			t.Errorf("leak_env result lacks %q[REDACTED]:\n%s", form, r.Text)
		}
	}
	// A tool error quoting the secret (the server's own error text).
	r = call(t, h, "leaky/write_file", map[string]string{"path": "/nonexistent/" + leakSecret + "/x", "content": "x"})
	if w := mcptest.Leaked(r.Text, leakSecret); w != "" || !r.IsError {
		t.Errorf("tool error holds %q: %+v", w, r)
	}
}

// A schema whose redaction would not be JSON is replaced by a plain object
// schema; a tool whose name is a secret is not offered.
func TestSchemaAndNameHoldingASecret(t *testing.T) {
	connect := func(ctx context.Context, _ ServerConfig) (mcp.Transport, error) {
		serverT, clientT := mcp.NewInMemoryTransports()
		s := mcp.NewServer(&mcp.Implementation{Name: "odd", Version: "1"}, nil)
		// Encoded, {"0":"<11 of the secret>","<the next 11>":{},...}: the
		// secret runs from a value into the next key, too little of it in
		// either to be redacted alone.
		s.AddTool(&mcp.Tool{Name: "split", InputSchema: map[string]any{"type": "object",
			"0": leakSecret[:11], leakSecret[11:22]: map[string]any{}}}, noop)
		s.AddTool(&mcp.Tool{Name: "quoted", InputSchema: map[string]any{"type": "object", "description": "key " + leakSecret}}, noop)
		s.AddTool(&mcp.Tool{Name: "t" + leakSecret, InputSchema: map[string]any{"type": "object"}}, noop)
		ss, err := s.Connect(ctx, serverT, nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { _ = ss.Close() })
		return clientT, nil
	}
	h := start(t, Options{Servers: []ServerConfig{{Name: "odd"}}, Connect: connect,
		Redact: sanitize.NewRedactor([]string{leakSecret}).Redact})
	got := map[string]string{}
	for _, tool := range h.Tools() {
		got[tool.Name] = string(tool.InputSchema)
	}
	want := map[string]string{"split": `{"type":"object"}`, "quoted": `{"description":"key [REDACTED]","type":"object"}`}
	if len(got) != len(want) || got["split"] != want["split"] || got["quoted"] != want["quoted"] {
		t.Errorf("tools %v, want %v", got, want)
	}
}

func noop(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{}, nil
}
