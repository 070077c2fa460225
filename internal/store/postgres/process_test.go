package postgres

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/postgres/pgtest"
	"github.com/coding-agent/coding-agent/internal/store/storetest"
)

const helperURLEnv = "CODING_AGENT_POSTGRES_HELPER_URL"

// TestHelperClaim is not a test: TestClaimAcrossProcesses runs the test
// binary with it selected, as one of several claiming processes. It prints
// "won" or "claimed", then stays alive until stdin closes so that its PID
// keeps holding the task while the others claim.
func TestHelperClaim(t *testing.T) {
	url := os.Getenv(helperURLEnv)
	if url == "" {
		t.Skip("helper process for TestClaimAcrossProcesses")
	}
	s, err := Open(context.Background(), url, Options{})
	if err != nil {
		fmt.Println("error", err)
		return
	}
	defer s.Close()
	host, _ := os.Hostname()
	_, err = s.Claim(context.Background(), storetest.Ref(1), store.Owner{Host: host, PID: os.Getpid(), Instance: strconv.Itoa(os.Getpid()), Lease: time.Hour})
	switch {
	case err == nil:
		fmt.Println("won")
	case errors.Is(err, store.ErrClaimed):
		fmt.Println("claimed")
	default:
		fmt.Println("error", err)
	}
	io.Copy(io.Discard, os.Stdin)
}

// TestClaimAcrossProcesses starts several processes on one fresh schema at
// once: they migrate it together, and exactly one wins the claim; the
// others find its process alive on this host.
func TestClaimAcrossProcesses(t *testing.T) {
	if os.Getenv(helperURLEnv) != "" {
		t.Skip("inside a helper")
	}
	t.Parallel()
	const procs = 4
	url := pgtest.Schema(t)
	var (
		stdins  []io.WriteCloser
		results = make(chan string, procs)
	)
	for range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperClaim$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperURLEnv+"="+url)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stdins = append(stdins, stdin)
		t.Cleanup(func() { stdin.Close(); cmd.Wait() })
		go func() {
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			results <- strings.TrimSpace(line)
			io.Copy(io.Discard, stdout)
		}()
	}
	counts := map[string]int{}
	for range procs {
		counts[<-results]++
	}
	for _, w := range stdins {
		w.Close()
	}
	if counts["won"] != 1 || counts["claimed"] != procs-1 {
		t.Errorf("results of %d processes: %v; want 1 won and %d claimed", procs, counts, procs-1)
	}
}
