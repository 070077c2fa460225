package builtin_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/toolhost"
	"github.com/coding-agent/coding-agent/internal/workspace/builtin"
)

// commandRun decodes a result's structured content as the tool host does.
func commandRun(t *testing.T, res *mcp.CallToolResult) toolhost.CommandRun {
	t.Helper()
	if res.StructuredContent == nil {
		t.Fatal("the result has no structured content")
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var cr toolhost.CommandRun
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cr); err != nil {
		t.Fatalf("structured content %s does not decode into toolhost.CommandRun: %v", b, err)
	}
	return cr
}

func TestRunCommand(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ran     Ran
		isError bool
		want    []string // in this order
		cr      toolhost.CommandRun
	}{
		{"exit 0", Ran{Stdout: "ok\n", Duration: 1234 * time.Millisecond}, false,
			[]string{"exit code 0 after 1.234s\n", "--- stdout ---\nok\n", "--- stderr ---\n(empty)\n"},
			toolhost.CommandRun{Command: "go test ./...", ExitCode: 0}},
		{"exit 3", Ran{ExitCode: 3, Stdout: "partial", Stderr: "FAIL: x\n", Duration: 2 * time.Second}, true,
			[]string{"exit code 3 after 2s\n", "--- stdout ---\npartial\n", "--- stderr ---\nFAIL: x\n"},
			toolhost.CommandRun{Command: "go test ./...", ExitCode: 3}},
		{"timeout", Ran{ExitCode: -1, TimedOut: true, Signal: "SIGKILL", Stdout: "slow", Duration: 300 * time.Second}, true,
			[]string{"timed out after 5m0s and was killed (ran 5m0s)\n", "--- stdout ---\nslow\n"},
			toolhost.CommandRun{Command: "go test ./...", ExitCode: -1, TimedOut: true}},
		{"signal", Ran{ExitCode: -1, Signal: "SIGSEGV", Duration: time.Second}, true,
			[]string{"killed by signal SIGSEGV after 1s\n"},
			toolhost.CommandRun{Command: "go test ./...", ExitCode: -1}},
		{"cut output", Ran{Stdout: "head\ntail\n", StdoutDropped: 4096, Stderr: "e", StderrDropped: 7}, false,
			[]string{"--- stdout (cut: its start and end are shown) ---\nhead\ntail\n[... 4096 bytes of output omitted ...]\n",
				"--- stderr (cut: its start and end are shown) ---\ne\n[... 7 bytes of output omitted ...]\n"},
			toolhost.CommandRun{Command: "go test ./...", ExitCode: 0}},
		{"setup first", Ran{Note: "The daemon ran the setup again.\n", Stdout: "ok\n", Duration: time.Second}, false,
			[]string{"The daemon ran the setup again.\n\nexit code 0 after 1s\n", "--- stdout ---\nok\n"},
			toolhost.CommandRun{Command: "go test ./...", ExitCode: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &fakeRunner{ran: tc.ran}
			cs := connect(t, builtin.Options{Dir: t.TempDir(), Runner: r})
			text, res := call(t, cs, "run_command", map[string]any{"command": "go test ./..."})
			if res.IsError != tc.isError {
				t.Errorf("IsError = %v, want %v; text:\n%s", res.IsError, tc.isError, text)
			}
			rest := text
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("the answer\n%s\ndoes not say %q (in order)", text, w)
				}
				rest = rest[i+len(w):]
			}
			if got := commandRun(t, res); got != tc.cr {
				t.Errorf("structured content = %+v, want %+v", got, tc.cr)
			}
			if !slices.Equal(r.commands, []string{"go test ./..."}) {
				t.Errorf("the runner ran %q", r.commands)
			}
		})
	}
}

func TestRunCommandRunnerError(t *testing.T) {
	r := &fakeRunner{err: errors.New("sandbox: no such image")}
	cs := connect(t, builtin.Options{Dir: t.TempDir(), Runner: r})
	text, res := call(t, cs, "run_command", map[string]any{"command": "make"})
	if !res.IsError || !strings.Contains(text, "could not start") || !strings.Contains(text, "no such image") {
		t.Errorf("a runner error gave IsError %v, %q", res.IsError, text)
	}
	if res.StructuredContent != nil {
		t.Errorf("a command that never started has structured content %v", res.StructuredContent)
	}
}

func TestRunCommandTimeout(t *testing.T) {
	r := &fakeRunner{}
	cs := connect(t, builtin.Options{Dir: t.TempDir(), Runner: r, MaxTimeout: time.Minute})
	for _, tc := range []struct {
		secs any
		want time.Duration
		note bool
	}{
		{nil, time.Minute, false},
		{0, time.Minute, false},
		{10, 10 * time.Second, false},
		{60, time.Minute, false},
		{3600, time.Minute, true},
		{int64(1) << 60, time.Minute, true},
	} {
		args := map[string]any{"command": "true"}
		if tc.secs != nil {
			args["timeout_seconds"] = tc.secs
		}
		text := ok(t, cs, "run_command", args)
		if got := r.lastTimeout(); got != tc.want {
			t.Errorf("timeout_seconds %v ran with timeout %v, want %v", tc.secs, got, tc.want)
		}
		if got := strings.Contains(text, "was capped at the limit, 1m0s"); got != tc.note {
			t.Errorf("timeout_seconds %v: the answer's cap note is there: %v, want %v:\n%s", tc.secs, got, tc.note, text)
		}
	}
	fails(t, cs, "run_command", map[string]any{"command": "  "}, "the command is empty")
	fails(t, cs, "run_command", map[string]any{}, "command")
}

func TestRunCommandDefaultTimeout(t *testing.T) {
	r := &fakeRunner{}
	cs := connect(t, builtin.Options{Dir: t.TempDir(), Runner: r})
	ok(t, cs, "run_command", map[string]any{"command": "true"})
	if got := r.lastTimeout(); got != 300*time.Second {
		t.Errorf("the default timeout is %v, want 300s", got)
	}
}
