package sandbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHidden checks that every hidden or outside path stays unreadable.
func TestHidden(t *testing.T) {
	forLevels(t, func(t *testing.T, lvl Level) {
		if lvl == None {
			t.Skip("level none confines no file")
		}
		b := newBox(t, lvl, Policy{})
		tool := filepath.Join(b.base, "toolchain")
		b.write(t, "toolchain/ok.txt", "visible")
		b.write(t, "toolchain/secret.txt", "ETC-SECRET")
		b.sb.policy.ReadOnly = []string{tool}
		b.write(t, "ws/task1/main.go", "package main")
		b.write(t, "ws/task1/.cfg/token", "WORK-SECRET")
		b.write(t, "daemonhome/.config/coding-agent/config.yaml", "HOME-SECRET")
		b.write(t, "ws/task2/code.txt", "SIBLING-SECRET")
		for _, dir := range []string{"ws/task1/.cfg", "daemonhome/.config/coding-agent", "ws/task2"} {
			b.write(t, dir+"/SECRET-NAME", "") // a listing must not show it
		}
		b.d.Hide = []string{filepath.Join(b.base, "ws/task1/.cfg"), filepath.Join(tool, "secret.txt"),
			filepath.Join(b.base, "daemonhome"), filepath.Join(b.base, "ws")}
		if r := b.sh(t, "cat "+filepath.Join(tool, "ok.txt")+" && cat main.go"); r.ExitCode != 0 || !strings.Contains(out(r), "visible") {
			t.Fatalf("allowed files unreadable: %d %q", r.ExitCode, out(r))
		}
		var cmd strings.Builder
		for _, rel := range []string{"ws/task1/.cfg/token", "toolchain/secret.txt",
			"daemonhome/.config/coding-agent/config.yaml", "ws/task2/code.txt"} {
			p := filepath.Join(b.base, rel)
			fmt.Fprintf(&cmd, "cat %s; ls -a %s; ", p, filepath.Dir(p))
		}
		r := b.sh(t, cmd.String())
		if strings.Contains(out(r), "SECRET") {
			t.Errorf("read hidden files or another task's checkout: %q", out(r))
		}
	})
}

// TestEnviron checks the command's environment and the daemon's environ.
func TestEnviron(t *testing.T) {
	t.Setenv(secretEnv, "s3cr3t-value")
	forLevels(t, func(t *testing.T, lvl Level) {
		b := newBox(t, lvl, Policy{Env: map[string]string{"FOO": "bar"}})
		r := b.sh(t, "env")
		allowed := map[string]bool{"PATH": true, "HOME": true, "TMPDIR": true, "LANG": true, "FOO": true, "PWD": true,
			"PYTHONDONTWRITEBYTECODE": true}
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(r.Stdout)), "\n") {
			k, v, _ := strings.Cut(line, "=")
			got[k] = v
			if !allowed[k] {
				t.Errorf("unexpected variable %s", line)
			}
		}
		if got["HOME"] != b.d.Home || got["FOO"] != "bar" || got["PATH"] == "" {
			t.Errorf("environment %v", got)
		}
		if lvl == None {
			return // nothing shields /proc at level none
		}
		r = b.sh(t, fmt.Sprintf("cat /proc/%d/environ; cat /proc/%d/environ", os.Getpid(), os.Getppid()))
		if strings.Contains(out(r), "s3cr3t-value") {
			t.Errorf("read the daemon's environ: %q", out(r))
		}
	})
}

// TestEditedModuleRunsAsEdited: a Python module changed within the second
// it was imported, to the same size, runs as changed (no bytecode cache is
// written to trust instead).
func TestEditedModuleRunsAsEdited(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	forLevels(t, func(t *testing.T, lvl Level) {
		b := newBox(t, lvl, Policy{})
		mod := filepath.Join(b.d.Work, "parity.py")
		for _, want := range []string{"even", "odd!"} {
			if err := os.WriteFile(mod, []byte("WORD = '"+want+"'\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// The same mtime second as the import before it.
			if err := os.Chtimes(mod, time.Unix(1700000000, 0), time.Unix(1700000000, 0)); err != nil {
				t.Fatal(err)
			}
			r := b.sh(t, "python3 -c 'import parity; print(parity.WORD)'")
			if got := strings.TrimSpace(string(r.Stdout)); got != want {
				t.Fatalf("the module says %q after it was changed to %q (stderr %q)", got, want, r.Stderr)
			}
		}
		if _, err := os.Stat(filepath.Join(b.d.Work, "__pycache__")); err == nil {
			t.Error("python wrote a bytecode cache into the checkout")
		}
	})
}

// TestWrite checks where the command may write.
func TestWrite(t *testing.T) {
	forLevels(t, func(t *testing.T, lvl Level) {
		b := newBox(t, lvl, Policy{})
		r := b.sh(t, `touch w && touch "$HOME/h" && touch "$TMPDIR/t" && echo ok`)
		if r.ExitCode != 0 {
			t.Fatalf("write in work, home, tmp: %d %q", r.ExitCode, out(r))
		}
		for _, p := range []string{filepath.Join(b.d.Home, "h"), filepath.Join(b.d.Tmp, "t"), filepath.Join(b.d.Work, "w")} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("write did not land: %v", err)
			}
		}
		if lvl == None {
			return
		}
		outside := filepath.Join(b.base, "outside")
		paths := []string{outside, "/etc/sandbox-test", "/usr/sandbox-test"}
		r = b.sh(t, "for p in "+strings.Join(paths, " ")+`; do echo x > "$p" && echo "WROTE $p"; done`)
		for _, p := range paths {
			if _, err := os.Stat(p); err == nil || strings.Contains(string(r.Stdout), "WROTE "+p) {
				os.Remove(p)
				t.Errorf("wrote %s: %q", p, out(r))
			}
		}
	})
}

// TestIdentity checks the command has no capability and, where the host
// allows a user namespace or the daemon is not root, is not root.
func TestIdentity(t *testing.T) {
	forLevels(t, func(t *testing.T, lvl Level) {
		b := newBox(t, lvl, Policy{})
		r := b.sh(t, "id -u; grep -E '^Cap(Eff|Prm|Amb):' /proc/self/status; grep NoNewPrivs /proc/self/status")
		f := strings.Fields(string(r.Stdout))
		if r.ExitCode != 0 || len(f) < 9 {
			t.Fatalf("read identity: %d %q", r.ExitCode, out(r))
		}
		if (lvl == Namespaces || os.Getuid() != 0) && f[0] == "0" {
			t.Errorf("command runs as uid 0")
		}
		for _, v := range []string{f[2], f[4], f[6]} {
			if v != "0000000000000000" {
				t.Errorf("capabilities: %q", string(r.Stdout))
			}
		}
		if lvl != None && f[8] != "1" {
			t.Errorf("no_new_privs not set: %q", string(r.Stdout))
		}
	})
}

// TestNetwork checks a host listener is unreachable without network and
// reachable with it, and that names do not resolve without network.
func TestNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HELLO-FROM-HOST\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	connect := fmt.Sprintf(`python3 -c "import socket; s=socket.create_connection(('127.0.0.1', %d), 5); print(s.recv(100).decode())"`, port)
	// A name the host resolves, or the check below proves nothing.
	name := ""
	for _, n := range []string{"proxy.golang.org", "example.com", "github.com"} {
		if _, err := net.LookupHost(n); err == nil {
			name = n
			break
		}
	}
	resolve := `python3 -c "import socket; print(socket.getaddrinfo('` + name + `', 80))"`
	forLevels(t, func(t *testing.T, lvl Level) {
		b := newBox(t, lvl, Policy{})
		if r := b.run(t, Run{Command: connect, Network: true}); !strings.Contains(out(r), "HELLO-FROM-HOST") {
			t.Errorf("with network the host listener is unreachable: %q", out(r))
		}
		if lvl == None {
			return
		}
		if r := b.sh(t, connect); r.ExitCode == 0 || strings.Contains(out(r), "HELLO-FROM-HOST") {
			t.Errorf("without network the host listener is reachable: %q", out(r))
		}
		if name == "" {
			t.Log("the host resolves no name: resolution not checked")
		} else if r := b.sh(t, resolve); r.ExitCode == 0 {
			t.Errorf("without network %s resolves: %q", name, out(r))
		}
		if r := b.run(t, Run{Command: resolve, Network: true}); name != "" && r.ExitCode != 0 {
			t.Errorf("with network %s does not resolve: %q", name, out(r))
		}
	})
}
