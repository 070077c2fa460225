package toolhost

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

const deathsigHelperEnv = "TOOLHOST_TEST_DEATHSIG_HELPER"

// TestServerDiesWithUs kills a program that runs the host, with SIGKILL (no
// chance to Close), and checks that its server, which ignores SIGTERM and the
// end of its input, dies too.
func TestServerDiesWithUs(t *testing.T) {
	if os.Getenv(deathsigHelperEnv) == "1" {
		deathsigHelper(t)
		return
	}
	// Become a subreaper: the orphaned server becomes our child, so we can wait for it.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	t.Cleanup(func() { _, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0) })

	helper := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithUs$")
	helper.Env = append(os.Environ(), deathsigHelperEnv+"=1")
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = helper.Process.Kill()
		_ = helper.Wait()
		t.Fatalf("reading the server pid from the helper: %v (%q)", err, line)
	}
	serverPID, err := strconv.Atoi(line[:len(line)-1])
	if err != nil {
		t.Fatalf("helper said %q", line)
	}
	_ = helper.Process.Kill()
	_ = helper.Wait()

	waited := make(chan syscall.WaitStatus, 1)
	go func() {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(serverPID, &ws, 0, nil)
		waited <- ws
	}()
	select {
	case ws := <-waited:
		if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("server ended with %v, want killed by SIGKILL", ws)
		}
	case <-time.After(30 * time.Second): // a guard against hanging, not a timing assertion
		_ = syscall.Kill(serverPID, syscall.SIGKILL)
		t.Errorf("server %d outlived the program that started it", serverPID)
	}
}

const prSetChildSubreaper = 36

// deathsigHelper starts a host with a stubborn server, prints its pid and waits
// to be killed.
func deathsigHelper(t *testing.T) {
	h, err := Start(t.Context(), Options{Servers: []ServerConfig{testServer(t, "t")}})
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, call(t, h, "t/ignore_shutdown", nil), "ignoring shutdown")
	fmt.Println(pid(t, h))
	select {}
}
