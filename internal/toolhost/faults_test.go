package toolhost

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool faults that must not wedge the daemon (issue 10): a hung server, a
// banner on stdout, arguments of the wrong type.

// A server that stops answering is replaced after the call that timed out:
// the model is told so, and the next call, from the same task or a later
// one, reaches a fresh instance instead of timing out too.
func TestHungServerIsReplacedAfterATimeout(t *testing.T) {
	logs := &logRecorder{}
	// A real timeout of the code under test: kept short, asserted only by its effects.
	h := start(t, Options{Servers: []ServerConfig{testServer(t, "t")}, CallTimeout: 300 * time.Millisecond, Logger: slog.New(logs)})
	for task := 1; task <= 2; task++ { // two tasks in turn on the same host
		hung := pid(t, h)
		wantToolError(t, call(t, h, "t/hang", nil), "The call to t/hang timed out after 300ms",
			`MCP server "t" was restarted`, "may or may not have taken effect")
		if n := h.Restarts("t"); n != task {
			t.Errorf("task %d: Restarts = %d, want %d", task, n, task)
		}
		wantOK(t, call(t, h, "t/echo", map[string]string{"text": "answering"}), "answering")
		if now := pid(t, h); now == hung {
			t.Errorf("task %d: the hung process %d still serves the calls", task, hung)
		}
		if err := syscall.Kill(hung, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("task %d: hung process %d: kill(0) = %v, want ESRCH (killed and reaped)", task, hung, err)
		}
	}
	if got := logs.find("MCP tool call timed out; restarting the server"); len(got) != 2 || got[0]["tool"] != "hang" {
		t.Errorf("timeout logs = %v, want two for hang", got)
	}
}

// A server that cannot be started again after a timeout: the model is told
// that too, and a later call tries again.
func TestFailedRestartAfterATimeoutIsToolError(t *testing.T) {
	bin := testServer(t, "t").Command[0]
	allow := make(chan bool, 1)
	allow <- true
	connect := func(context.Context, ServerConfig) (mcp.Transport, error) {
		ok := <-allow
		allow <- ok
		if !ok {
			return nil, errors.New("spawn refused")
		}
		return &mcp.CommandTransport{Command: exec.Command(bin), TerminateDuration: 50 * time.Millisecond}, nil
	}
	h := start(t, Options{Servers: []ServerConfig{{Name: "t"}}, Connect: connect, CallTimeout: 300 * time.Millisecond})
	<-allow
	allow <- false
	wantToolError(t, call(t, h, "t/hang", nil), "The call to t/hang timed out after 300ms",
		`restarting MCP server "t" failed`, "spawn refused", "may or may not have taken effect")
	<-allow
	allow <- true
	wantOK(t, call(t, h, "t/echo", map[string]string{"text": "x"}), "x")
}

// Lines a server writes on stdout that are not JSON-RPC (a banner at start,
// a stray line later) are logged, secrets redacted, and skipped: the server
// starts and keeps answering.
func TestNonJSONLinesOnStdoutAreSkipped(t *testing.T) {
	logs := &logRecorder{}
	cfg := testServer(t, "t")
	cfg.Command = append(cfg.Command, "-banner", "mcptest v1 listening on stdio, token ${API_TOKEN}")
	cfg.Env = map[string]string{"API_TOKEN": "s3cr3t-value"}
	h := start(t, Options{Servers: []ServerConfig{cfg}, Logger: slog.New(logs)})
	wantOK(t, call(t, h, "t/echo", map[string]string{"text": "after the banner"}), "after the banner")
	for _, stray := range []string{"progress: 50%", `{"not": "closed"`, "42", ""} {
		wantOK(t, call(t, h, "t/print", map[string]string{"text": stray}), stray)
	}
	wantOK(t, call(t, h, "t/echo", map[string]string{"text": "still here"}), "still here")
	if n := h.Restarts("t"); n != 0 {
		t.Errorf("Restarts = %d, want 0", n)
	}
	var lines []string
	for _, rec := range logs.find("MCP server wrote a line on stdout that is not JSON-RPC; skipped it") {
		if rec["server"] != "t" || rec["level"] != "WARN" {
			t.Errorf("log record %v, want a warning naming server t", rec)
		}
		lines = append(lines, rec["line"])
	}
	want := []string{"mcptest v1 listening on stdio, token [redacted]", "progress: 50%", `{"not": "closed"`, "42"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged lines %q, want %q", lines, want)
	}
}

// Arguments that do not match the tool's input schema go back to the model,
// naming the argument and what was expected, and the server is not called:
// the add tool trusts its schema and would crash.
func TestArgumentsAreCheckedAgainstTheInputSchema(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{testServer(t, "t")}})
	before := pid(t, h)
	for _, tc := range []struct {
		args string
		want []string
	}{
		{`{"a": "1", "b": 2}`, []string{`argument "a"`, `has type "string", want "integer"`}},
		{`{"a": 1.5, "b": 2}`, []string{`argument "a"`, `want "integer"`}},
		{`{"a": 1}`, []string{`missing properties: ["b"]`}},
		{`{"a": 1, "b": 2, "c": 3}`, []string{`additional properties ["c"]`}},
	} {
		r, err := h.Call(t.Context(), "t/add", json.RawMessage(tc.args))
		if err != nil {
			t.Fatal(err)
		}
		wantToolError(t, r, append([]string{"Invalid arguments for t/add", "The tool was not called"}, tc.want...)...)
	}
	if n := h.Restarts("t"); n != 0 {
		t.Errorf("Restarts = %d: the server was called with arguments that crash it", n)
	}
	wantOK(t, call(t, h, "t/add", map[string]int{"a": 1, "b": 2}), "3")
	if after := pid(t, h); after != before {
		t.Errorf("the server changed from %d to %d", before, after)
	}
}

// A schema the validator cannot use (a remote reference) does not keep the
// server from starting: its calls go unchecked, and a warning says so.
func TestUnusableSchemaLeavesCallsUnchecked(t *testing.T) {
	logs := &logRecorder{}
	connect := func(ctx context.Context, _ ServerConfig) (mcp.Transport, error) {
		serverT, clientT := mcp.NewInMemoryTransports()
		s := mcptest.NewServer(mcptest.ServerOptions{})
		s.AddTool(&mcp.Tool{Name: "remote", InputSchema: json.RawMessage(
			`{"type": "object", "properties": {"x": {"$ref": "https://example.com/schemas/x.json"}}}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
			})
		if _, err := s.Connect(ctx, serverT, nil); err != nil {
			return nil, err
		}
		return clientT, nil
	}
	h := start(t, Options{Servers: []ServerConfig{{Name: "r"}}, Connect: connect, Logger: slog.New(logs)})
	wantOK(t, call(t, h, "r/remote", map[string]any{"x": 1}), `{"x":1}`)
	got := logs.find("MCP tool's input schema cannot be checked; its arguments go unchecked")
	if len(got) != 1 || got[0]["tool"] != "remote" || !strings.Contains(got[0]["error"], "example.com") {
		t.Errorf("warnings %v, want one for r/remote naming the reference", got)
	}
	// The other tools' schemas are checked.
	wantToolError(t, call(t, h, "r/echo", map[string]any{"text": 3}), `argument "text"`, "The tool was not called")
}
