package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coding-agent/coding-agent/internal/buildtest"
	"golang.org/x/sys/unix"
)

// asServiceUser is set in the environment of this test binary started
// again as another user.
const asServiceUser = "SANDBOX_TEST_AS_SERVICE_USER"

// serviceUID is the user the daemon's own process runs as here: not root,
// as the systemd unit and the image run it.
const serviceUID = 65534

// A daemon that is not root and has made itself non-dumpable, as
// coding-agent's main does (app.Harden), gets level namespaces: the probe
// finds every namespace, a command runs in them (as uid 1000 of its nested
// namespace, cut off from the network) and a long-lived server's process
// does too. The daemon cannot write the uid map of a child it starts in a
// user namespace (its children's /proc files are root's): the relay does.
func TestNamespacesForANonRootNonDumpableDaemon(t *testing.T) {
	if os.Getenv(asServiceUser) == "1" {
		serviceUserChecks(t)
		return
	}
	if os.Getuid() != 0 {
		t.Skip("needs root to start this test as another user")
	}
	if Probe().Best < Namespaces {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI needs level namespaces, host gives %s", Probe().Best)
		}
		t.Skipf("host gives %s only", Probe().Best)
	}
	// The test binary, where the service's user may run it.
	dir := buildtest.PublicDir(t, "/var/tmp", "sandbox-service-")
	bin := filepath.Join(dir, "sandbox.test")
	buildtest.CopyExecutable(t, os.Args[0], bin)
	cmd := exec.Command(bin, "-test.run", "^TestNamespacesForANonRootNonDumpableDaemon$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{asServiceUser + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: serviceUID, Gid: serviceUID, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("as uid %d: %v\n%s", serviceUID, err, out)
	}
}

// serviceUserChecks are the checks made as the service's user.
func serviceUserChecks(t *testing.T) {
	if os.Getuid() != serviceUID {
		t.Fatalf("uid %d, want %d", os.Getuid(), serviceUID)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if r := Probe(); r.Best != Namespaces {
		t.Fatalf("level %s, want namespaces: %s", r.Best, r.missing(Namespaces))
	}
	b := newBox(t, Namespaces, Policy{})
	r := b.sh(t, "id -u; cat /proc/self/uid_map; echo done")
	if f := strings.Fields(string(r.Stdout)); r.ExitCode != 0 || len(f) < 5 || f[0] != "1000" || f[len(f)-1] != "done" {
		t.Fatalf("the command: exit %d, %q", r.ExitCode, out(r))
	}
	if r := b.sh(t, "tail -n +3 /proc/net/dev | cut -d: -f1"); strings.TrimSpace(string(r.Stdout)) != "lo" {
		t.Errorf("the command's network: %q, want loopback alone", out(r))
	}
	cmd, err := b.sb.Command(b.d, false, []string{"/bin/sh", "-c", "read line; echo got $line; id -u"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = strings.NewReader("hello\n")
	got, err := cmd.Output()
	if err != nil || string(got) != "got hello\n1000\n" {
		t.Errorf("the server's process: %q, %v", got, err)
	}
}

// The relay started with arguments it cannot read says so and exits 127,
// whatever is missing or malformed: it never panics.
func TestRelayRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{{}, {"x", "1", "run"}, {"0", "-1", "run"}, {"0", "9", "run"}, {"0", "1"}} {
		cmd := exec.Command(os.Args[0], append([]string{marker, "ns"}, args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errorsAs(err, &ee) || ee.ExitCode() != 127 || !strings.Contains(string(out), "sandbox relay: bad arguments") {
			t.Errorf("relay %q: %v, %q; want exit 127 saying the arguments are bad", args, err, out)
		}
	}
}
