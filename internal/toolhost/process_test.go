package toolhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestSubprocessStartCallAndStderrLog(t *testing.T) {
	logs := &logRecorder{}
	h := start(t, Options{Servers: []ServerConfig{testServer(t, "t")}, Logger: slog.New(logs)})
	var names []string
	for _, tool := range h.Tools() {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"echo", "fail", "crash", "env", "sleep", "big", "write_file", "pid", "ignore_shutdown"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %v lack %q", names, want)
		}
	}
	wantOK(t, call(t, h, "t/echo", map[string]string{"text": "über"}), "über")
	wantToolError(t, call(t, h, "t/fail", nil), "always fails")
	path := filepath.Join(t.TempDir(), "out.txt")
	wantOK(t, call(t, h, "t/write_file", map[string]string{"path": path, "content": "hi"}), "wrote 2 bytes to "+path)
	if b, err := os.ReadFile(path); err != nil || string(b) != "hi" {
		t.Errorf("file = %q, %v", b, err)
	}
	// The server's stderr is logged, attributed to it; once Close returns, all of it.
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rec := range logs.find("MCP server stderr") {
		if rec["server"] == "t" && rec["line"] == "mcptest server ready" && rec["level"] == "DEBUG" {
			found = true
		}
	}
	if !found {
		t.Errorf("stderr line not logged; records: %v", logs.find("MCP server stderr"))
	}
}

func TestSubprocessEnvironmentIsIsolated(t *testing.T) {
	t.Setenv("CODING_AGENT_FAKE_SECRET", "hunter2")
	cfg := testServer(t, "t")
	cfg.Env = map[string]string{"CONFIGURED": "yes"}
	h := start(t, Options{Servers: []ServerConfig{cfg}})

	wantOK(t, call(t, h, "t/env", map[string]string{"name": "CODING_AGENT_FAKE_SECRET"}), "<unset>")
	wantOK(t, call(t, h, "t/env", map[string]string{"name": "CONFIGURED"}), "yes")
	wantOK(t, call(t, h, "t/env", map[string]string{"name": "PATH"}), os.Getenv("PATH"))
	if home, ok := os.LookupEnv("HOME"); ok {
		wantOK(t, call(t, h, "t/env", map[string]string{"name": "HOME"}), home)
	}
}

func TestServerEnv(t *testing.T) {
	t.Setenv("PATH", "/our/bin")
	t.Setenv("HOME", "/our/home")
	t.Setenv("GITHUB_TOKEN", "ghp_secret")
	got := serverEnv(map[string]string{"B": "2", "A": "1", "HOME": "/srv"})
	want := []string{"PATH=/our/bin", "A=1", "B=2", "HOME=/srv"}
	if !slices.Equal(got, want) {
		t.Errorf("serverEnv = %v, want %v", got, want)
	}
}

func TestStderrSecretsAreRedacted(t *testing.T) {
	logs := &logRecorder{}
	p := newProcess(ServerConfig{Name: "gl", Env: map[string]string{"GITLAB_TOKEN": "glpat-123", "GITLAB_API_URL": "http://x"}}, slog.New(logs))
	_, _ = p.Write([]byte("using token glpat-123 at http://x\npart"))
	_, _ = p.Write([]byte("ial line\r\n"))
	var lines []string
	for _, rec := range logs.find("MCP server stderr") {
		lines = append(lines, rec["line"])
	}
	want := []string{"using token [redacted] at http://x", "partial line"}
	if !slices.Equal(lines, want) {
		t.Errorf("logged lines = %q, want %q", lines, want)
	}
	if tail := p.stderrTail(); !slices.Equal(tail, want) {
		t.Errorf("stderr tail = %q, want %q", tail, want)
	}
}

func TestSubprocessTimeoutIsToolError(t *testing.T) {
	// A real timeout of the code under test: kept short, asserted only by its message.
	h := start(t, Options{Servers: []ServerConfig{testServer(t, "t")}, CallTimeout: 200 * time.Millisecond})
	wantToolError(t, call(t, h, "t/sleep", map[string]int{"ms": 10 * 60 * 1000}), "t/sleep timed out after 200ms")
}

func TestResultTruncationEndToEnd(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{testServer(t, "t")}, MaxResultBytes: 1000})
	r := call(t, h, "t/big", map[string]any{"bytes": 5000, "unit": "日本"})
	kept, note, _ := strings.Cut(r.Text, "\n")
	if r.IsError || !r.Truncated || r.Bytes != 5004 || len(r.Text) > 1000 {
		t.Errorf("big result: %d bytes, IsError %v, Truncated %v, Bytes %d", len(r.Text), r.IsError, r.Truncated, r.Bytes)
	}
	// 3-byte characters: the cut must not split one.
	if !utf8.ValidString(kept) || strings.Trim(kept, "日本") != "" || len(kept) < 900 {
		t.Errorf("kept text (%d bytes) is not whole characters: ...%q", len(kept), kept[max(len(kept)-10, 0):])
	}
	if want := "[output truncated: the last " + strconv.Itoa(5004-len(kept)) + " of 5004 bytes were cut]"; note != want {
		t.Errorf("note = %q, want %q", note, want)
	}
}

func TestCrashIsToolErrorAndServerRestarts(t *testing.T) {
	logs := &logRecorder{}
	h := start(t, Options{Servers: []ServerConfig{testServer(t, "t")}, Logger: slog.New(logs)})
	oldPID := pid(t, h)

	wantToolError(t, call(t, h, "t/crash", nil), `MCP server "t" crashed during the call to t/crash and was restarted`,
		"may or may not have taken effect")
	if n := h.Restarts("t"); n != 1 {
		t.Errorf("Restarts = %d, want 1", n)
	}
	wantOK(t, call(t, h, "t/echo", map[string]string{"text": "back"}), "back")
	if newPID := pid(t, h); newPID == oldPID {
		t.Errorf("pid after restart = %d, same as before", newPID)
	}
	if err := syscall.Kill(oldPID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("crashed process %d: kill(0) = %v, want ESRCH (gone and reaped)", oldPID, err)
	}
	crashes := logs.find("MCP server crashed during a call; restarting it")
	restarts := logs.find("restarted MCP server")
	if len(crashes) != 1 || crashes[0]["call"] != "t/crash" || len(restarts) != 1 || restarts[0]["restarts"] != "1" {
		t.Errorf("logs: crashes %v, restarts %v; want one of each", crashes, restarts)
	}
}

func TestServerThatDiedIsRestartedOnNextCall(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{testServer(t, "t")}})
	c := liveConn(t, h, "t")
	if err := syscall.Kill(pid(t, h), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.exited
	// No call was in flight: the next one simply works.
	wantOK(t, call(t, h, "t/echo", map[string]string{"text": "again"}), "again")
	if n := h.Restarts("t"); n != 1 {
		t.Errorf("Restarts = %d, want 1", n)
	}
}

func TestFailedRestartIsToolErrorAndRetried(t *testing.T) {
	bin := testServer(t, "t").Command[0]
	var allow = make(chan bool, 1)
	allow <- true
	connect := func(ctx context.Context, _ ServerConfig) (mcp.Transport, error) {
		ok := <-allow
		allow <- ok
		if !ok {
			return nil, errors.New("spawn refused")
		}
		return &mcp.CommandTransport{Command: exec.Command(bin)}, nil
	}
	h := start(t, Options{Servers: []ServerConfig{{Name: "t"}}, Connect: connect})
	<-allow
	allow <- false
	wantToolError(t, call(t, h, "t/crash", nil), "crashed during the call to t/crash, and restarting it failed",
		"spawn refused", "may or may not have taken effect")
	wantToolError(t, call(t, h, "t/echo", map[string]string{"text": "x"}), `MCP server "t" is not running and restarting it failed`)
	<-allow
	allow <- true
	wantOK(t, call(t, h, "t/echo", map[string]string{"text": "x"}), "x")
	if n := h.Restarts("t"); n != 1 {
		t.Errorf("Restarts = %d, want 1", n)
	}
}

func TestStartFailuresNameTheServer(t *testing.T) {
	tests := []struct {
		name string
		cfg  ServerConfig
		want []string
	}{
		{"not found", ServerConfig{Name: "nf", Command: []string{"no-such-mcp-server-xyz"}},
			[]string{`starting MCP server "nf": connecting: `, "executable file not found"}},
		{"exits at once", ServerConfig{Name: "ex", Command: []string{"sh", "-c", "echo cannot open config >&2; exit 1"}},
			[]string{`starting MCP server "ex": connecting: `, "server stderr: cannot open config"}},
		{"never answers", ServerConfig{Name: "mute", Command: []string{"sleep", "3600"}},
			[]string{`starting MCP server "mute": connecting: `, "no answer within 300ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			good := testServer(t, "good")
			_, err := Start(t.Context(), Options{Servers: []ServerConfig{good, tt.cfg}, StartTimeout: 300 * time.Millisecond})
			if err == nil {
				t.Fatal("Start succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCloseLeavesNoProcess(t *testing.T) {
	for _, stubborn := range []bool{false, true} {
		h, err := Start(t.Context(), Options{Servers: []ServerConfig{testServer(t, "t")}, StopTimeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if stubborn { // ignores the end of its input and SIGTERM: only SIGKILL ends it
			wantOK(t, call(t, h, "t/ignore_shutdown", nil), "ignoring shutdown")
		}
		p := pid(t, h)
		if err := h.Close(); err != nil {
			t.Errorf("stubborn=%v: Close: %v", stubborn, err)
		}
		if err := syscall.Kill(p, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("stubborn=%v: server %d after Close: kill(0) = %v, want ESRCH", stubborn, p, err)
		}
	}
}

// pid asks the test server for its process id.
func pid(t *testing.T, h *Host) int {
	t.Helper()
	r := call(t, h, "t/pid", nil)
	n, err := strconv.Atoi(r.Text)
	if err != nil || r.IsError {
		t.Fatalf("pid result %+v: %v", r, err)
	}
	return n
}

func TestConcurrentCallsAcrossACrash(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{testServer(t, "t")}})
	crash := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 15 {
				if g == 0 && i == 5 {
					close(crash)
				}
				text := fmt.Sprintf("%d-%d", g, i)
				r, err := h.Call(t.Context(), "t/echo", json.RawMessage(`{"text":"`+text+`"}`))
				switch {
				case err != nil:
					t.Errorf("echo %s: system error %v", text, err)
				case r.IsError && !strings.Contains(r.Text, "crashed during the call"):
					t.Errorf("echo %s: unexpected tool error %q", text, r.Text)
				case !r.IsError && r.Text != text:
					t.Errorf("echo %s answered %q", text, r.Text)
				}
			}
		})
	}
	<-crash
	wantToolError(t, call(t, h, "t/crash", nil), "crashed during the call to t/crash")
	wg.Wait()
	if n := h.Restarts("t"); n != 1 {
		t.Errorf("Restarts = %d, want 1 (one crash)", n)
	}
	wantOK(t, call(t, h, "t/echo", map[string]string{"text": "after"}), "after")
}
