package toolhost

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}

// find returns the records with message msg, as attribute maps.
func (r *logRecorder) find(msg string) []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, rec := range r.records {
		if rec.Message != msg {
			continue
		}
		m := map[string]string{"level": rec.Level.String()}
		rec.Attrs(func(a slog.Attr) bool {
			m[a.Key] = a.Value.String()
			return true
		})
		out = append(out, m)
	}
	return out
}

// inMemory is a Connect hook serving the mcptest tools in memory.
func inMemory(t testing.TB) func(context.Context, ServerConfig) (mcp.Transport, error) {
	return func(ctx context.Context, _ ServerConfig) (mcp.Transport, error) {
		return mcptest.NewInMemory(ctx, t)
	}
}

// start starts a host and closes it when the test ends.
func start(t *testing.T, opts Options) *Host {
	t.Helper()
	h, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return h
}

// testServer is the config of the mcptest server as a subprocess.
func testServer(t testing.TB, name string) ServerConfig {
	return ServerConfig{Name: name, Command: []string{mcptest.Build(t)}}
}

// call calls a tool that must not end in a system error.
func call(t *testing.T, h *Host, name string, args any) Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.Call(t.Context(), name, raw)
	if err != nil {
		t.Fatalf("Call(%s): unexpected error %v", name, err)
	}
	return r
}

// wantOK checks a successful result with the given text.
func wantOK(t *testing.T, r Result, text string) {
	t.Helper()
	if r.IsError || r.Text != text {
		t.Fatalf("result = %+v, want success with text %q", r, text)
	}
}

// wantToolError checks a tool error whose text contains every fragment.
func wantToolError(t *testing.T, r Result, fragments ...string) {
	t.Helper()
	if !r.IsError {
		t.Fatalf("result = %+v, want a tool error", r)
	}
	for _, f := range fragments {
		if !strings.Contains(r.Text, f) {
			t.Errorf("tool error %q does not contain %q", r.Text, f)
		}
	}
}

// liveConn returns the server's current instance.
func liveConn(t *testing.T, h *Host, server string) *conn {
	t.Helper()
	s := h.byName[server]
	if err := s.acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.release()
	return s.live
}
