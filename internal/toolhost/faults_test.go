package toolhost

import (
	"log/slog"
	"strings"
	"testing"
)

// Tool faults that must not wedge the daemon (issue 10).

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
