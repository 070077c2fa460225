package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestForkBomb checks that MaxProcesses stops a process flood and that the
// call returns with nothing left behind.
func TestForkBomb(t *testing.T) {
	forLevels(t, func(t *testing.T, lvl Level) {
		b := newBox(t, lvl, Policy{Limits: Limits{MaxProcesses: 16, Timeout: 60 * time.Second}})
		mark := fmt.Sprintf("1000.%d", os.Getpid())
		r := b.sh(t, `i=0; while [ $i -lt 2000 ]; do sleep `+mark+` & i=$((i+1)); done; echo all started`)
		if strings.Contains(string(r.Stdout), "all started") || r.ExitCode == 0 {
			t.Errorf("2000 processes started: %d %q", r.ExitCode, out(r))
		}
		if e := strings.ToLower(string(r.Stderr)); !strings.Contains(e, "fork") && !strings.Contains(e, "over the limit") {
			t.Errorf("no fork failure reported: %q", out(r))
		}
		if left := leftover("sleep\x00" + mark); len(left) > 0 {
			t.Errorf("%d processes left, first %s", len(left), left[0])
		}
	})
}

// TestMemory checks that MemoryMB stops a memory hog.
func TestMemory(t *testing.T) {
	forLevels(t, func(t *testing.T, lvl Level) {
		b := newBox(t, lvl, Policy{Limits: Limits{MemoryMB: 256}})
		r := b.sh(t, `python3 -c "b=bytearray(4<<30); print('allocated')"`)
		if r.ExitCode == 0 || strings.Contains(string(r.Stdout), "allocated") {
			t.Errorf("4 GiB allocated under a 256 MiB limit: %d %q", r.ExitCode, out(r))
		}
		if !strings.Contains(string(r.Stderr), "MemoryError") {
			t.Errorf("no MemoryError: %q", out(r))
		}
	})
}

// TestTimeout checks that an endless loop ends at the timeout, killed.
func TestTimeout(t *testing.T) {
	forLevels(t, func(t *testing.T, lvl Level) {
		b := newBox(t, lvl, Policy{})
		r := b.run(t, Run{Command: "while :; do :; done", Timeout: 500 * time.Millisecond})
		if !r.TimedOut || r.ExitCode != -1 || r.Signal != "killed" {
			t.Errorf("result %+v", r)
		}
	})
}

// TestEscape checks that a process which left the command's session and
// group does not outlive the call.
func TestEscape(t *testing.T) {
	forLevels(t, func(t *testing.T, lvl Level) {
		b := newBox(t, lvl, Policy{})
		mark := fmt.Sprintf("300.%d%d", os.Getpid(), lvl)
		r := b.sh(t, `setsid sh -c 'sleep `+mark+`' > /dev/null 2>&1 & (setsid sleep `+mark+` &) ; sleep 0.2; echo started`)
		if r.ExitCode != 0 {
			t.Fatalf("start: %d %q", r.ExitCode, out(r))
		}
		if left := leftover("sleep\x00" + mark); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
}

// TestOutput checks that 10 MB of output keep MaxOutputBytes per stream,
// head and tail, and count the rest.
func TestOutput(t *testing.T) {
	forLevels(t, func(t *testing.T, lvl Level) {
		b := newBox(t, lvl, Policy{Limits: Limits{MaxOutputBytes: 1000}})
		r := b.sh(t, `echo HEAD; head -c 10000000 /dev/zero | tr '\0' x; echo TAIL; echo ERR >&2; head -c 3000 /dev/zero >&2`)
		if len(r.Stdout) != 1000 || r.StdoutDropped != 5+10000000+5-1000 {
			t.Errorf("stdout kept %d dropped %d", len(r.Stdout), r.StdoutDropped)
		}
		if !bytes.HasPrefix(r.Stdout, []byte("HEAD\nxxx")) || !bytes.HasSuffix(r.Stdout, []byte("xxxTAIL\n")) {
			t.Errorf("stdout head/tail: %q ... %q", r.Stdout[:10], r.Stdout[len(r.Stdout)-10:])
		}
		if len(r.Stderr) != 1000 || r.StderrDropped != 4+3000-1000 || !bytes.HasPrefix(r.Stderr, []byte("ERR\n")) {
			t.Errorf("stderr kept %d dropped %d", len(r.Stderr), r.StderrDropped)
		}
	})
}

// TestExit checks exit codes, signals and stdin.
func TestExit(t *testing.T) {
	forLevels(t, func(t *testing.T, lvl Level) {
		b := newBox(t, lvl, Policy{})
		if r := b.sh(t, "exit 3"); r.ExitCode != 3 || r.Signal != "" || r.TimedOut {
			t.Errorf("exit 3: %+v", r)
		}
		if r := b.sh(t, "kill -SEGV $$"); r.ExitCode != -1 || r.Signal != "segmentation fault" {
			t.Errorf("SIGSEGV: %+v", r)
		}
		if r := b.run(t, Run{Command: "tr a-z A-Z", Stdin: strings.NewReader("hello")}); string(r.Stdout) != "HELLO" {
			t.Errorf("stdin: %q", out(r))
		}
		// No Stdin: cat reads an empty input and ends.
		if r := b.run(t, Run{Command: "cat; ulimit -t; ulimit -n; ulimit -c", Timeout: 10 * time.Second}); string(r.Stdout) != "11\n1024\n0\n" {
			t.Errorf("empty stdin, rlimits cpu, nofile, core: %q", out(r))
		}
	})
}

// TestCommand starts a long-lived confined cat, talks to it, ends it and
// checks nothing of it is left: SIGTERM ends the whole tree before the
// process exits; at level Namespaces SIGKILL ends it too, moments later.
func TestCommand(t *testing.T) {
	forLevels(t, func(t *testing.T, lvl Level) {
		b := newBox(t, lvl, Policy{Env: map[string]string{"MODEL_ONLY": "model"}})
		kills := []syscall.Signal{syscall.SIGTERM}
		if lvl == Namespaces {
			kills = append(kills, syscall.SIGKILL)
		}
		for _, sig := range kills {
			mark := fmt.Sprintf("301.%d%d%d", os.Getpid(), lvl, sig)
			// The server's own env, and not the model's commands' (Policy.Env).
			cmd, err := b.sb.Command(b.d, false, []string{"sh", "-c", "echo \"$SERVER_ONLY${MODEL_ONLY:-}\"; setsid sleep " + mark + " & exec cat"},
				map[string]string{"SERVER_ONLY": "srv"})
			if err != nil {
				t.Fatal(err)
			}
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			outp, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(in, "ping\n"); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 9)
			if _, err := io.ReadFull(outp, buf); err != nil || string(buf) != "srv\nping\n" {
				t.Fatalf("env and echo: %q %v", buf, err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			var ee *exec.ExitError
			if err := cmd.Wait(); err == nil || !errorsAs(err, &ee) {
				t.Errorf("wait after %v: %v", sig, err)
			}
			left := leftover(mark)
			for end := time.Now().Add(5 * time.Second); sig == syscall.SIGKILL && len(left) > 0 && time.Now().Before(end); left = leftover(mark) {
				time.Sleep(10 * time.Millisecond)
			}
			if len(left) > 0 {
				t.Errorf("left behind after %v: %v", sig, left)
			}
		}
	})
}
