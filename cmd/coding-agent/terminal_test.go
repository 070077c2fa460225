package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coding-agent/coding-agent/internal/buildtest"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// terminal is a pseudo-terminal: TTY is what a command writes to (a real
// terminal to it), and Text what appeared on the screen so far.
type terminal struct {
	TTY  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func newTerminal(t *testing.T) *terminal {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Lines as written: no "\r\n" for "\n".
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	term := &terminal{TTY: tty, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return // EIO once every writer closed the terminal
			}
		}
	}()
	t.Cleanup(func() { term.Close(); m.Close() })
	return term
}

// Text is what the terminal shows so far.
func (term *terminal) Text() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

// Close closes our end of the terminal and waits for the screen to have
// everything written to it.
func (term *terminal) Close() {
	if term.TTY.Close() == nil {
		select {
		case <-term.done:
		case <-time.After(10 * time.Second):
		}
	}
}

// `run` on a terminal with nothing labelled says so, naming the label and
// where it looked, rather than printing nothing.
func TestRunOnATerminalSaysThereWasNothingToDo(t *testing.T) {
	t.Parallel()
	gh := forgetest.NewGitHub(t)
	gh.Token = token
	gh.AddRepo("acme/app")
	gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "not for the agent", Author: "alice"})
	cfg := writeConfig(t, configOptions{apiURL: gh.URL(), mcp: fmt.Sprintf("[%q]", mcptest.Build(t))})
	code, screen := runOnTerminal(t, cfg)
	if code != exitOK {
		t.Fatalf("exit code %d", code)
	}
	lines := strings.Split(strings.TrimSpace(screen), "\n")
	want := regexp.MustCompile(`^\d\d:\d\d:\d\d nothing to do: nothing labelled "coding agent" in github acme/app$`)
	if len(lines) != 1 || !want.MatchString(lines[0]) {
		t.Errorf("terminal %q, want one line matching %s", screen, want)
	}
}

// runOnTerminal runs `run --config cfg` with stderr on a terminal and
// returns its exit code and what the terminal shows.
func runOnTerminal(t *testing.T, cfg string) (int, string) {
	t.Helper()
	term := newTerminal(t)
	var out bytes.Buffer
	code := run(t.Context(), []string{"run", "--config", cfg}, &out, term.TTY)
	term.Close()
	screen := term.Text()
	t.Logf("terminal:\n%s", screen)
	return code, screen
}

// A command that fails prints its error once, whole, on a terminal too:
// not also as the terminal's line of the log record, cut at its first line.
func TestFatalErrorOnATerminalIsPrintedOnce(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`)
	}))
	t.Cleanup(srv.Close)
	cfg := writeConfig(t, configOptions{apiURL: srv.URL, mcp: fmt.Sprintf("[%q]", mcptest.Build(t))})
	code, screen := runOnTerminal(t, cfg)
	if code != exitFailure {
		t.Fatalf("exit code %d, want %d", code, exitFailure)
	}
	if n := strings.Count(screen, "discovering tasks labelled"); n != 1 {
		t.Errorf("the error shows %d times, want once", n)
	}
	if strings.Contains(screen, "…") {
		t.Error("an error is cut short")
	}
	whole := regexp.MustCompile(`(?m)^coding-agent run: discovering tasks labelled "coding agent": .*: GET ` +
		regexp.QuoteMeta(srv.URL) + `/repos/acme/app/issues\?\S*: 401 Bad credentials$`)
	if !whole.MatchString(screen) {
		t.Errorf("no whole error line matching %s", whole)
	}
	noSecrets(t, screen)
}

// buildBinary is the built command (buildtest.Command).
func buildBinary(t *testing.T) string {
	t.Helper()
	return buildtest.Command(t, "./cmd/coding-agent")
}

// `serve`, the built binary with stderr on a terminal, says what it
// listens on and what it watches as it starts, that it is idle once (not
// at every poll) and again after it worked on a task, and, on SIGINT, that
// it stops and that it stopped, and why.
func TestServeOnATerminalSaysWhatItDoes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	gh := forgetest.NewGitHub(t)
	gh.Token = token
	gh.AddRepo("acme/app")
	cfg := writeConfig(t, configOptions{apiURL: gh.URL(), mcp: fmt.Sprintf("[%q]", mcptest.Build(t)),
		extra: "continuous:\n  producer:\n    interval_minutes: 0.02\n" +
			"server:\n  listen: 127.0.0.1:0\n  github_webhook_secret: whsecret-for-the-test\n" +
			"workspace:\n  builtin_tools: false\n"})
	term := newTerminal(t)
	var stdout bytes.Buffer
	cmd := exec.Command(bin, "serve", "--config", cfg)
	cmd.Stdout, cmd.Stderr = &stdout, term.TTY
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; terminal:\n%s", what, term.Text())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	passes := func() int {
		n := 0
		for _, r := range gh.Requests() {
			if r.Method == "GET" && r.Path == "/repos/acme/app/issues" {
				n++
			}
		}
		return n
	}
	waitFor("the first idle line", func() bool { return strings.Contains(term.Text(), " idle: ") })
	from := passes()
	waitFor("three more polls", func() bool { return passes() >= from+3 })
	n := gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "Say hello", Body: "Say hello.", Author: "alice", Labels: []string{"coding agent"}})
	// The model answers prose, which planning mode takes for no plan: the
	// task fails, which ends it as well as done.
	end := regexp.MustCompile(fmt.Sprintf(`github:acme/app#%d (done|failed)`, n))
	waitFor("the task's end", func() bool { return end.MatchString(term.Text()) })
	waitFor("the idle line after the task", func() bool { return strings.Count(term.Text(), " idle: ") == 2 })
	from = passes()
	waitFor("two more polls", func() bool { return passes() >= from+2 })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop on SIGINT; terminal:\n%s", term.Text())
	}
	term.Close()
	screen := term.Text()
	t.Logf("terminal:\n%s", screen)
	if err != nil {
		t.Errorf("serve exited: %v", err)
	}
	// The daemon's own lines, the task's lines (its events, the model's
	// warnings) replaced by one line "task".
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(screen), "\n") {
		_, rest, _ := strings.Cut(l, " ") // the time
		if strings.HasPrefix(rest, "github:acme/app#") {
			if got[len(got)-1] == "task" {
				continue
			}
			rest = "task"
		}
		got = append(got, rest)
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^listening on 127\.0\.0\.1:\d+: GitHub webhooks at /webhooks/github, /healthz, /readyz, /metrics$`),
		regexp.MustCompile(`^watching github acme/app for "coding agent" \(planning mode, 1 worker\), looking every 1\.2s$`),
		regexp.MustCompile(`^idle: nothing labelled "coding agent" to work on; looking again every 1\.2s$`),
		regexp.MustCompile(`^task$`),
		regexp.MustCompile(`^idle: `),
		regexp.MustCompile(`^stopping \(interrupt signal received\): the tasks in hand stop at their next checkpoint`),
		regexp.MustCompile(`^stopped: interrupt signal received$`),
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !w.MatchString(got[i]) {
			t.Errorf("line %d %q, want %s", i, got[i], w)
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing (the lines are stderr's)", stdout.String())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Errorf("exit code %d", exit.ExitCode())
	}
}
