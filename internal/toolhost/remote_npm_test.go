package toolhost

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// everything runs @modelcontextprotocol/server-everything in its
// streamable HTTP mode on port and returns once it listens; stop kills it.
func everything(t *testing.T, port int) (stop func()) {
	t.Helper()
	cmd := exec.Command("node", mcptest.NodeModule(t, "@modelcontextprotocol/server-everything/dist/index.js"), "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop = func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				close(listening)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		stop()
		t.Fatal("server-everything did not listen within 30 s")
	}
	return stop
}

// freePort is a loopback port nobody listens on now.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The reference server of the MCP project, over streamable HTTP: its
// tools are listed and called; killed and started again on its port (its
// sessions gone), the host connects again and the next call goes through.
func TestNpmServerOverStreamableHTTP(t *testing.T) {
	port := freePort(t)
	stop := everything(t, port)
	defer func() { stop() }()
	h := start(t, Options{Servers: []ServerConfig{{Name: "everything", URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"}}})
	if n := len(h.Tools()); n < 5 {
		t.Fatalf("%d tools listed", n)
	}
	if res := call(t, h, "everything/echo", map[string]any{"message": "over http"}); res.IsError || !strings.Contains(res.Text, "over http") {
		t.Fatalf("echo: %+v", res)
	}
	links := call(t, h, "everything/get-resource-links", map[string]any{"count": 2})
	t.Logf("get-resource-links read:\n%.400s", links.Text)
	if links.IsError || strings.Contains(links.Text, "not read") || strings.Contains(links.Text, "reading it failed") ||
		strings.Count(links.Text, "[resource ") < 2 {
		t.Errorf("the resource links were not read: %.600s", links.Text)
	}
	stop()
	stop = everything(t, port)
	// The first call finds the session gone and says so; the next runs.
	first := call(t, h, "everything/echo", map[string]any{"message": "lost"})
	if first.IsError && !strings.Contains(first.Text, "everything/echo") {
		t.Fatalf("the call after the restart: %+v", first)
	}
	if res := call(t, h, "everything/echo", map[string]any{"message": "back"}); res.IsError || !strings.Contains(res.Text, "back") {
		t.Fatalf("echo after the server came back: %+v (the first: %+v)", res, first)
	}
	t.Logf("the call after the restart: error %v, connections made again %d", first.IsError, h.Restarts("everything"))
	if h.Restarts("everything") == 0 && first.IsError {
		t.Error("a call failed and the connection was not made again")
	}
}
