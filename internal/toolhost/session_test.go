package toolhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestTaskVarsExpand(t *testing.T) {
	v := TaskVars{Workspace: "/w/acme-app-12", TaskRef: "github:acme/app#12", Branch: "coding-agent/12"}
	for _, tc := range []struct{ in, want string }{
		{"${WORKSPACE}", "/w/acme-app-12"},
		{"--root=${WORKSPACE}/src", "--root=/w/acme-app-12/src"},
		{"${TASK_REF} on ${BRANCH}", "github:acme/app#12 on coding-agent/12"},
		{"$${WORKSPACE}", "${WORKSPACE}"},
		{"$$${WORKSPACE}", "$${WORKSPACE}"}, // leftmost first: "$", then the escape
		{"${HOME}", "${HOME}"},              // not a task variable: kept as written
		{"${WORKSPACE", "${WORKSPACE"},
		{"${}", "${}"},
		{"cost $5 $", "cost $5 $"},
		{"", ""},
	} {
		var empty []string
		if got := v.expand(tc.in, &empty); got != tc.want || len(empty) > 0 {
			t.Errorf("expand(%q) = %q, empty %q; want %q", tc.in, got, empty, tc.want)
		}
	}
}

// A variable a server uses that the task leaves empty is refused before
// anything starts: given "" for its directory, a server may take the
// process's working directory instead.
func TestEmptyTaskVariableIsRefused(t *testing.T) {
	h := start(t, Options{Connect: inMemory(t), Servers: []ServerConfig{
		{Name: "t", Scope: ScopeTask, Command: []string{"srv", "${WORKSPACE}"}, Env: map[string]string{"B": "${BRANCH}"}},
		{Name: "u", Scope: ScopeTask, Command: []string{"srv", "${TASK_REF}"}}}})
	_, err := h.ForTask(t.Context(), TaskVars{TaskRef: "github:acme/app#8"})
	if err == nil || err.Error() != `starting the MCP servers of task github:acme/app#8: MCP server "t" uses ${BRANCH}, ${WORKSPACE}, which the task leaves empty` {
		t.Errorf("ForTask with an empty workspace and branch: %v", err)
	}
	// A variable no server uses may be empty.
	h = start(t, Options{Connect: inMemory(t), Servers: []ServerConfig{{Name: "t", Scope: ScopeTask, Command: []string{"srv", "${WORKSPACE}"}}}})
	forTask(t, h, TaskVars{Workspace: t.TempDir()})
}

// A task-scoped server is probed at Start: started once with an empty
// temporary directory as WORKSPACE and "probe" as TASK_REF and BRANCH, its
// tools listed in config order among the others, then stopped. The host
// itself has no instance of it to call.
func TestTaskScopedServerIsProbedAtStart(t *testing.T) {
	var probed ServerConfig
	var probeSession *mcp.ServerSession
	connect := func(ctx context.Context, cfg ServerConfig) (mcp.Transport, error) {
		if cfg.Name == "task" {
			probed = cfg
			entries, err := os.ReadDir(cfg.Command[1])
			if err != nil || len(entries) != 0 {
				return nil, fmt.Errorf("the probe's workspace: %v entries, %v", len(entries), err)
			}
		}
		serverT, clientT := mcp.NewInMemoryTransports()
		ss, err := mcptest.NewServer(mcptest.ServerOptions{}).Connect(ctx, serverT, nil)
		if cfg.Name == "task" {
			probeSession = ss
		}
		return clientT, err
	}
	h := start(t, Options{Connect: connect, Servers: []ServerConfig{
		{Name: "before", Allow: []string{"echo"}},
		{Name: "task", Scope: ScopeTask, Allow: []string{"echo", "pid"},
			Command: []string{"srv", "${WORKSPACE}", "${TASK_REF}", "${BRANCH}", "$${WORKSPACE}"},
			Env:     map[string]string{"ROOT": "${WORKSPACE}/src"}},
		{Name: "after", Scope: ScopeProcess, Allow: []string{"echo"}},
	}})
	ws := probed.Command[1]
	if want := []string{"srv", ws, "probe", "probe", "${WORKSPACE}"}; !slices.Equal(probed.Command, want) || probed.Env["ROOT"] != ws+"/src" {
		t.Errorf("probe config = %q %v, want %q and ROOT=%s/src", probed.Command, probed.Env, want, ws)
	}
	if _, err := os.Stat(ws); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the probe's workspace %s is left behind: %v", ws, err)
	}
	if err := probeSession.Wait(); err != nil { // returns once the host has closed the probe
		t.Logf("probe session ended with %v", err)
	}
	var names []string
	for _, tool := range h.Tools() {
		names = append(names, tool.FullName())
	}
	if want := []string{"before/echo", "task/echo", "task/pid", "after/echo"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	if got := h.Servers()[1].Command[1]; got != "${WORKSPACE}" {
		t.Errorf("Servers() gives the task server's command as %q, want the template", got)
	}
	wantToolError(t, call(t, h, "task/echo", map[string]string{"text": "x"}), `MCP server "task" runs one instance per task`)
	wantToolError(t, call(t, h, "task/fail", nil), `Unknown tool "fail"`, "Its tools are: echo, pid.")
	wantOK(t, call(t, h, "after/echo", map[string]string{"text": "x"}), "x")
}

// sessionCall calls through a session a tool that must not end in a system error.
func sessionCall(t *testing.T, s *Session, name string, args any) Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Call(t.Context(), name, raw)
	if err != nil {
		t.Fatalf("Session.Call(%s): unexpected error %v", name, err)
	}
	return r
}

func forTask(t *testing.T, h *Host, vars TaskVars) *Session {
	t.Helper()
	s, err := h.ForTask(t.Context(), vars)
	if err != nil {
		t.Fatalf("ForTask(%+v): %v", vars, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Session.Close: %v", err)
		}
	})
	return s
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pidVia asks a test server for its process id through call (a host's or a
// session's).
func pidVia(t *testing.T, call func(context.Context, string, json.RawMessage) (Result, error), name string) int {
	t.Helper()
	r, err := call(t.Context(), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.IsError {
		t.Fatalf("pid result %+v", r)
	}
	return atoi(t, r.Text)
}

// Two tasks at once each get their own instance of the task-scoped server,
// started with their own variables in its command and environment; the
// process-scoped server is the host's, shared.
func TestSessionsNeverShareAnInstance(t *testing.T) {
	logs := &logRecorder{}
	bin := mcptest.Build(t)
	h := start(t, Options{Logger: slog.New(logs), Servers: []ServerConfig{
		{Name: "t", Scope: ScopeTask, Command: []string{bin, "-banner", "ws=${WORKSPACE} ref=${TASK_REF}"},
			Env: map[string]string{"WS": "${WORKSPACE}", "WHERE": "${TASK_REF} on ${BRANCH}", "LIT": "$${WORKSPACE}"}},
		testServer(t, "p"),
	}})
	vars := []TaskVars{
		{Workspace: t.TempDir(), TaskRef: "github:acme/app#1", Branch: "coding-agent/1"},
		{Workspace: t.TempDir(), TaskRef: "gitlab:grp/app#2", Branch: "coding-agent/2"},
	}
	// Both tasks start, and call, at the same time.
	sessions := make([]*Session, len(vars))
	var wg sync.WaitGroup
	for i, v := range vars {
		wg.Go(func() {
			s, err := h.ForTask(t.Context(), v)
			if err != nil {
				t.Errorf("ForTask(%+v): %v", v, err)
				return
			}
			sessions[i] = s
			t.Cleanup(func() { _ = s.Close() })
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	pids := make([]string, len(vars))
	for i, s := range sessions {
		wg.Go(func() {
			text := func(tool, env string) string {
				args := json.RawMessage(`{}`)
				if env != "" {
					args = json.RawMessage(`{"name":"` + env + `"}`)
				}
				r, err := s.Call(t.Context(), tool, args)
				if err != nil || r.IsError {
					t.Errorf("session %d: %s %s: %+v, %v", i, tool, args, r, err)
				}
				return r.Text
			}
			want := map[string]string{"WS": vars[i].Workspace, "WHERE": vars[i].TaskRef + " on " + vars[i].Branch, "LIT": "${WORKSPACE}"}
			for range 10 {
				for env, w := range want {
					if got := text("t/env", env); got != w {
						t.Errorf("session %d: %s = %q, want %q", i, env, got, w)
					}
				}
			}
			pids[i] = text("t/pid", "")
		})
	}
	wg.Wait()
	if pids[0] == pids[1] {
		t.Fatalf("both sessions reached process %s", pids[0])
	}
	// The command's arguments were expanded too: the banner each instance printed.
	var banners []string
	for _, rec := range logs.find("MCP server wrote a line on stdout that is not JSON-RPC; skipped it") {
		banners = append(banners, rec["line"])
	}
	for _, v := range vars {
		if want := "ws=" + v.Workspace + " ref=" + v.TaskRef; !slices.Contains(banners, want) {
			t.Errorf("banners %q lack %q", banners, want)
		}
	}
	// The process-scoped server is the host's, whoever calls it.
	if a, b := pidVia(t, sessions[0].Call, "p/pid"), pidVia(t, sessions[1].Call, "p/pid"); a != b || a != pidVia(t, h.Call, "p/pid") {
		t.Errorf("p/pid through the sessions = %d, %d; want the host's", a, b)
	}

	// Closing a session stops its instance and nothing else.
	if err := sessions[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(atoi(t, pids[0]), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("instance %s after Session.Close: kill(0) = %v, want ESRCH", pids[0], err)
	}
	if _, err := sessions[0].Call(t.Context(), "t/echo", json.RawMessage(`{"text":"x"}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("Call on a closed session: err = %v, want ErrClosed", err)
	}
	wantOK(t, sessionCall(t, sessions[1], "t/echo", map[string]string{"text": "still"}), "still")
	// Closing the host closes the sessions still open.
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(atoi(t, pids[1]), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("instance %s after Host.Close: kill(0) = %v, want ESRCH", pids[1], err)
	}
	if _, err := sessions[1].Call(t.Context(), "t/echo", json.RawMessage(`{"text":"x"}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("Call on a session of a closed host: err = %v, want ErrClosed", err)
	}
	if _, err := h.ForTask(t.Context(), vars[0]); !errors.Is(err, ErrClosed) {
		t.Errorf("ForTask on a closed host: err = %v, want ErrClosed", err)
	}
}

// A task's instance that crashes is restarted with the task's variables,
// as a host's server is; the host's own count is not touched.
func TestSessionInstanceIsRestartedWithItsVariables(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{
		{Name: "t", Scope: ScopeTask, Command: []string{mcptest.Build(t)}, Env: map[string]string{"WS": "${WORKSPACE}"}},
	}})
	ws := t.TempDir()
	s := forTask(t, h, TaskVars{Workspace: ws, TaskRef: "github:acme/app#3", Branch: "b"})
	before := pidVia(t, s.Call, "t/pid")
	wantToolError(t, sessionCall(t, s, "t/crash", nil), `MCP server "t" crashed during the call to t/crash and was restarted`)
	wantOK(t, sessionCall(t, s, "t/env", map[string]string{"name": "WS"}), ws)
	if after := pidVia(t, s.Call, "t/pid"); after == before {
		t.Errorf("pid %d after the crash, the same as before", after)
	}
	if n, m := s.Restarts("t"), h.Restarts("t"); n != 1 || m != 0 {
		t.Errorf("restarts: session %d, host %d; want 1 and 0", n, m)
	}
}

// A session's calls are checked and redacted as the host's are.
func TestSessionCallsAreCheckedAndRedacted(t *testing.T) {
	h := start(t, Options{Connect: inMemory(t), Servers: []ServerConfig{{Name: "t", Scope: ScopeTask}},
		Redact: func(s string) string { return strings.ReplaceAll(s, "hunter2", "[redacted]") }})
	s := forTask(t, h, TaskVars{Workspace: t.TempDir(), TaskRef: "r", Branch: "b"})
	wantOK(t, sessionCall(t, s, "t/echo", map[string]string{"text": "pw hunter2"}), "pw [redacted]")
	wantToolError(t, sessionCall(t, s, "t/echo", map[string]any{"text": 3}), `argument "text"`, "The tool was not called")
	wantToolError(t, sessionCall(t, s, "t/nope", nil), `Unknown tool "nope"`)
	wantToolError(t, sessionCall(t, s, "x/echo", nil), `Unknown MCP server "x"`)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Call(ctx, "t/echo", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Call with a cancelled ctx: err = %v, want context.Canceled", err)
	}
}

// A tool the probe listed that the task's instance does not offer is a tool
// error naming what the instance has.
func TestToolMissingFromTheTaskInstanceIsAToolError(t *testing.T) {
	connect := func(ctx context.Context, cfg ServerConfig) (mcp.Transport, error) {
		srv := mcptest.NewServer(mcptest.ServerOptions{})
		if cfg.Command[0] != "probe" { // the task's instance lacks pid
			srv.RemoveTools("pid")
		}
		serverT, clientT := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, serverT, nil)
		t.Cleanup(func() { _ = ss.Close() })
		return clientT, err
	}
	h := start(t, Options{Connect: connect, Servers: []ServerConfig{
		{Name: "t", Scope: ScopeTask, Command: []string{"${TASK_REF}"}, Allow: []string{"echo", "pid"}}}})
	s := forTask(t, h, TaskVars{Workspace: t.TempDir(), TaskRef: "github:acme/app#4", Branch: "b"})
	wantToolError(t, sessionCall(t, s, "t/pid", nil), `The tool "pid" was listed when MCP server "t" was probed at startup`,
		"this task's instance of the server does not offer it. Its tools here are: echo.")
	wantOK(t, sessionCall(t, s, "t/echo", map[string]string{"text": "x"}), "x")
}

// One task-scoped server that cannot start for the task fails ForTask,
// naming it and the task; the others, started at the same time, are stopped.
func TestForTaskFailureNamesTheServerAndStopsTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var instances []*mcp.ServerSession
		connect := func(ctx context.Context, cfg ServerConfig) (mcp.Transport, error) {
			if cfg.Name == "bad" && cfg.Env["REF"] != "probe" {
				return nil, errors.New("no checkout at " + cfg.Env["WS"])
			}
			serverT, clientT := mcp.NewInMemoryTransports()
			ss, err := mcptest.NewServer(mcptest.ServerOptions{}).Connect(ctx, serverT, nil)
			if cfg.Name == "good" && cfg.Env["REF"] != "probe" {
				mu.Lock()
				instances = append(instances, ss)
				mu.Unlock()
			}
			return clientT, err
		}
		env := map[string]string{"WS": "${WORKSPACE}", "REF": "${TASK_REF}"}
		h := start(t, Options{Connect: connect, Servers: []ServerConfig{
			{Name: "good", Scope: ScopeTask, Env: env}, {Name: "bad", Scope: ScopeTask, Env: env}, {Name: "p"}}})
		_, err := h.ForTask(t.Context(), TaskVars{Workspace: "/w/5", TaskRef: "github:acme/app#5", Branch: "b"})
		if err == nil || err.Error() != `starting MCP server "bad" for task github:acme/app#5: connecting: no checkout at /w/5` {
			t.Fatalf("ForTask error = %v, want it to name server bad and the task", err)
		}
		if len(instances) != 1 {
			t.Fatalf("%d instances of good started, want 1", len(instances))
		}
		if err := instances[0].Wait(); err != nil { // returns once the host has closed it
			t.Logf("good's instance ended with %v", err)
		}
		// The host and its process-scoped server are untouched.
		wantOK(t, call(t, h, "p/echo", map[string]string{"text": "x"}), "x")
	})
}

// With no task-scoped server a session is the host under another name.
func TestSessionWithoutTaskServersForwardsToTheHost(t *testing.T) {
	h := start(t, Options{Connect: inMemory(t), Servers: []ServerConfig{{Name: "p"}}})
	s := forTask(t, h, TaskVars{Workspace: t.TempDir(), TaskRef: "r", Branch: "b"})
	wantOK(t, sessionCall(t, s, "p/echo", map[string]string{"text": "via the host"}), "via the host")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Call(t.Context(), "p/echo", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Call on a closed session: err = %v, want ErrClosed", err)
	}
	wantOK(t, call(t, h, "p/echo", map[string]string{"text": "host"}), "host")
}

// A host closed while a task's servers start leaves no instance running:
// ForTask fails with ErrClosed.
func TestHostClosedWhileATaskStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered := make(chan struct{})
		connect := func(ctx context.Context, cfg ServerConfig) (mcp.Transport, error) {
			if cfg.Env["REF"] != "probe" {
				close(entered)
				<-ctx.Done() // starts until the host closes
				return nil, ctx.Err()
			}
			return mcptest.NewInMemory(ctx, t)
		}
		h, err := Start(t.Context(), Options{Connect: connect, Servers: []ServerConfig{
			{Name: "t", Scope: ScopeTask, Env: map[string]string{"REF": "${TASK_REF}"}}}})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error)
		go func() {
			_, err := h.ForTask(t.Context(), TaskVars{Workspace: "/w", TaskRef: "r6", Branch: "b"})
			errc <- err
		}()
		<-entered
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-errc; !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), `starting MCP server "t" for task r6`) {
			t.Errorf("ForTask during Close: err = %v, want ErrClosed naming the server", err)
		}
	})
}

// The templates the config writes are the ones TaskVars reads: a server
// loaded from YAML starts for a task with the task's values, the literal
// "${" of an escape or of a value of the environment kept.
func TestConfigTemplatesExpandForATask(t *testing.T) {
	env := map[string]string{"DIR": "/srv", "ODD": "a${BRANCH}b$"}
	c, _, err := config.Parse([]byte(`task_source: github
github: {token: t, owner: acme}
llm: {provider: lmstudio, lmstudio: {model: m}}
mcp_servers:
  - mcp_server_name: fs
    scope: task
    command: [npx, "${WORKSPACE}", "$${WORKSPACE}", "${DIR}/${TASK_REF}", "${ODD}", "--branch=${BRANCH}", "$$${DIR}"]
    env: {WHERE: "${TASK_REF} on ${BRANCH}", LIT: "$${BRANCH}$$"}
`), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	s := c.MCPServers[0]
	cfg := ServerConfig{Name: s.Name, Command: s.Command, Env: s.Env, Scope: Scope(s.Scope)}
	got, err := cfg.forTask(TaskVars{Workspace: "/w/7", TaskRef: "github:acme/app#7", Branch: "coding-agent/7"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"npx", "/w/7", "${WORKSPACE}", "/srv/github:acme/app#7", "a${BRANCH}b$", "--branch=coding-agent/7", "$${DIR}"}
	if !slices.Equal(got.Command, want) {
		t.Errorf("command = %q, want %q", got.Command, want)
	}
	if got.Env["WHERE"] != "github:acme/app#7 on coding-agent/7" || got.Env["LIT"] != "${BRANCH}$$" {
		t.Errorf("env = %q", got.Env)
	}
	for _, name := range config.TaskVariables {
		if _, ok := (TaskVars{}).lookup(name); !ok {
			t.Errorf("config.TaskVariables names %s, which TaskVars does not set", name)
		}
	}
}

// A task's instance that does not answer in time is replaced, as a host's
// server is; closing the session cancels a call in flight on its instance.
func TestSessionTimeoutAndCloseDuringACall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Options{Connect: inMemory(t), Servers: []ServerConfig{{Name: "t", Scope: ScopeTask}}})
		s, err := h.ForTask(t.Context(), TaskVars{Workspace: "/w", TaskRef: "r", Branch: "b"})
		if err != nil {
			t.Fatal(err)
		}
		wantToolError(t, sessionCall(t, s, "t/sleep", map[string]int{"ms": 10 * 60 * 1000}),
			"t/sleep timed out after 2m0s", `MCP server "t" was restarted`)
		if n := s.Restarts("t"); n != 1 {
			t.Errorf("session restarts = %d after a timeout, want 1", n)
		}
		errc := make(chan error)
		go func() {
			_, err := s.Call(t.Context(), "t/sleep", json.RawMessage(`{"ms":600000}`))
			errc <- err
		}()
		synctest.Wait() // the call is in flight
		if err := s.Close(); err != nil {
			t.Errorf("Session.Close: %v", err)
		}
		if err := <-errc; !errors.Is(err, ErrClosed) {
			t.Errorf("Call in flight during Session.Close: err = %v, want ErrClosed", err)
		}
	})
}
