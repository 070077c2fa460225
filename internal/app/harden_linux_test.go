package app_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/buildtest"
)

const (
	hardenHelperEnv = "CODING_AGENT_HARDEN_HELPER" // "parent" or "reader"
	hardenSecret    = "CODING_AGENT_HARDEN_SECRET=glpat-0123456789abcdefghij"
	resultPrefix    = "environ of the parent: "
)

// TestHardenHelper is not a test: TestHardenedProcessHidesItsEnvironment
// runs the test binary with it selected. As "parent" (its environment
// holding hardenSecret) it hardens itself when asked to, then starts
// itself again as "reader", as the agent starts an MCP server; the reader
// reads the parent's /proc/<pid>/environ and prints what came of it.
func TestHardenHelper(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	switch os.Getenv(hardenHelperEnv) {
	case "":
		t.Skip("helper process for TestHardenedProcessHidesItsEnvironment")
	case "parent":
		if os.Getenv("CODING_AGENT_HARDEN") == "1" {
			if err := app.Harden(); err != nil {
				fmt.Println(resultPrefix+"Harden:", err)
				return
			}
		}
		self, _ := os.Executable()
		reader := exec.Command(self, "-test.run=^TestHardenHelper$")
		reader.Env = []string{hardenHelperEnv + "=reader"}
		reader.Stdout, reader.Stderr = os.Stdout, os.Stderr
		if err := reader.Run(); err != nil {
			fmt.Println(resultPrefix+"reader:", err)
		}
	case "reader":
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", os.Getppid()))
		switch {
		case err != nil:
			fmt.Println(resultPrefix+"error:", err)
		case strings.Contains(string(b), hardenSecret):
			fmt.Println(resultPrefix + "read the secret")
		default:
			fmt.Println(resultPrefix + "read, without the secret")
		}
	}
}

// A child of a hardened process, running as the same user, cannot read
// the process's environment; a child of one not hardened can (so the test
// can fail). Run as root, whom CAP_SYS_PTRACE lets read anything, the
// parent and the reader run as nobody, from a copy of the test binary they
// may execute.
func TestHardenedProcessHidesItsEnvironment(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	if os.Getenv(hardenHelperEnv) != "" {
		t.Skip("inside a helper")
	}
	bin, cred := helperBinary(t)
	for _, harden := range []bool{false, true} {
		cmd := exec.Command(bin, "-test.run=^TestHardenHelper$", "-test.v")
		cmd.Dir = filepath.Dir(bin)
		cmd.Env = []string{hardenHelperEnv + "=parent", hardenSecret}
		if harden {
			cmd.Env = append(cmd.Env, "CODING_AGENT_HARDEN=1")
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper (harden=%v): %v\n%s", harden, err, out)
		}
		var got string
		for _, line := range strings.Split(string(out), "\n") {
			if r, ok := strings.CutPrefix(line, resultPrefix); ok {
				got = r
			}
		}
		switch {
		case !harden && got != "read the secret":
			t.Fatalf("a child of a process not hardened could not read its environment (%q): the test cannot tell\n%s", got, out)
		case harden && !strings.Contains(got, "permission denied"):
			t.Errorf("a child of a hardened process: %q, want permission denied\n%s", got, out)
		}
	}
}

// helperBinary is the test binary, and the credentials to run it with:
// as it is for a user other than root; for root, hard-linked (or copied)
// into a directory nobody may enter, to run as nobody.
func helperBinary(t *testing.T) (string, *syscall.Credential) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		return self, nil
	}
	bin := filepath.Join(buildtest.PublicDir(t, "", "harden-test-"), "helper.test")
	if os.Link(self, bin) != nil {
		buildtest.CopyExecutable(t, self, bin)
	}
	const nobody = 65534
	return bin, &syscall.Credential{Uid: nobody, Gid: nobody}
}
