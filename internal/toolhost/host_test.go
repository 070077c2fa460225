package toolhost

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestStartListsToolsInMemory(t *testing.T) {
	h := start(t, Options{
		Servers: []ServerConfig{{Name: "a", SystemPrompt: "use a"}, {Name: "b"}},
		Connect: inMemory(t),
	})
	var names []string
	for _, tool := range h.Tools() {
		names = append(names, tool.FullName())
	}
	// Servers in config order; each server's tools in its order (the go-sdk server sorts them).
	want := []string{"a/big", "a/echo", "a/env", "a/fail", "a/pid", "a/sleep", "a/write_file",
		"b/big", "b/echo", "b/env", "b/fail", "b/pid", "b/sleep", "b/write_file"}
	if !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	echo := h.Tools()[1]
	var schema struct {
		Type       string         `json:"type"`
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(echo.InputSchema, &schema); err != nil {
		t.Fatalf("echo schema %s: %v", echo.InputSchema, err)
	}
	if schema.Type != "object" || schema.Properties["text"] == nil || echo.Description == "" {
		t.Errorf("echo tool = %+v, want an object schema with text and a description", echo)
	}
	if s := h.Servers(); len(s) != 2 || s[0].SystemPrompt != "use a" || s[1].Name != "b" {
		t.Errorf("Servers() = %+v", s)
	}
}

func TestCallEchoAndToolErrors(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{{Name: "t"}}, Connect: inMemory(t)})

	wantOK(t, call(t, h, "t/echo", map[string]string{"text": "héllo"}), "héllo")
	wantToolError(t, call(t, h, "t/fail", map[string]any{}), "always fails")
	wantToolError(t, call(t, h, "t/nope", map[string]any{}), `Unknown tool "nope"`, "echo, env, fail")
	wantToolError(t, call(t, h, "x/echo", map[string]any{}), `Unknown MCP server "x"`, "Known servers: t")
	wantToolError(t, call(t, h, "echo", map[string]any{}), "server/tool")

	for _, bad := range []string{`[1]`, `{"text":`, `{"text":"a"} {}`, `"x"`} {
		r, err := h.Call(t.Context(), "t/echo", json.RawMessage(bad))
		if err != nil {
			t.Fatalf("Call with args %s: %v", bad, err)
		}
		wantToolError(t, r, "Invalid arguments for t/echo")
	}
	// Arguments that do not match the input schema are a tool error too.
	wantToolError(t, call(t, h, "t/echo", map[string]any{"text": 3}), `argument "text"`, `want "string"`)
	// Empty arguments mean {}.
	r, err := h.Call(t.Context(), "t/pid", nil)
	if err != nil || r.IsError {
		t.Errorf("Call with nil args = %+v, %v; want success", r, err)
	}
}

func TestCallReturnsErrorOnlyWhenContextEnds(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{{Name: "t"}}, Connect: inMemory(t)})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := h.Call(ctx, "t/echo", json.RawMessage(`{"text":"x"}`))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Call with cancelled ctx: err = %v, want context.Canceled", err)
	}
}

func TestCancelDuringCallIsSystemError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Options{Servers: []ServerConfig{{Name: "t"}}, Connect: inMemory(t)})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err := h.Call(ctx, "t/sleep", json.RawMessage(`{"ms":600000}`))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Call past the caller's deadline: err = %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestCallTimeoutIsToolError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Options{Servers: []ServerConfig{{Name: "t"}}, Connect: inMemory(t)})
		r := call(t, h, "t/sleep", map[string]int{"ms": 10 * 60 * 1000})
		wantToolError(t, r, "t/sleep timed out after 2m0s", `MCP server "t" was restarted`, "may or may not have taken effect")
		// A server that did not answer in time is replaced: the next call reaches a fresh one.
		wantOK(t, call(t, h, "t/echo", map[string]string{"text": "still here"}), "still here")
		if n := h.Restarts("t"); n != 1 {
			t.Errorf("Restarts = %d after a timeout, want 1", n)
		}
	})
}

func TestCallAfterCloseIsSystemError(t *testing.T) {
	h, err := Start(t.Context(), Options{Servers: []ServerConfig{{Name: "t"}}, Connect: inMemory(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := h.Call(t.Context(), "t/echo", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Call after Close: err = %v, want ErrClosed", err)
	}
}

func TestCloseCancelsCallsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := Start(t.Context(), Options{Servers: []ServerConfig{{Name: "t"}}, Connect: inMemory(t)})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error)
		go func() {
			_, err := h.Call(t.Context(), "t/sleep", json.RawMessage(`{"ms":600000}`))
			errc <- err
		}()
		synctest.Wait() // the call is in flight
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-errc; !errors.Is(err, ErrClosed) {
			t.Errorf("Call in flight during Close: err = %v, want ErrClosed", err)
		}
	})
}

func TestStartRejectsBadConfig(t *testing.T) {
	for name, servers := range map[string][]ServerConfig{
		`"a": duplicate server name`: {{Name: "a", Command: []string{"x"}}, {Name: "a", Command: []string{"y"}}},
		`"a/b": the name must not`:   {{Name: "a/b", Command: []string{"x"}}},
		`#1: the server has no name`: {{Command: []string{"x"}}},
		`"c": no command`:            {{Name: "c"}},
	} {
		_, err := Start(t.Context(), Options{Servers: servers})
		if err == nil || !strings.Contains(err.Error(), "starting MCP server "+name) {
			t.Errorf("Start(%+v) error = %v, want it to contain %q", servers, err, name)
		}
	}
}

func TestStartFailureNamesServerAndClosesOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var good *mcp.ServerSession
		slowCause := make(chan error, 1)
		connect := func(ctx context.Context, s ServerConfig) (mcp.Transport, error) {
			switch s.Name {
			case "bad":
				return nil, errors.New("no such server")
			case "slow": // starts until the failure of bad cancels it
				<-ctx.Done()
				slowCause <- context.Cause(ctx)
				return nil, ctx.Err()
			}
			serverT, clientT := mcp.NewInMemoryTransports()
			ss, err := mcptest.NewServer(mcptest.ServerOptions{}).Connect(ctx, serverT, nil)
			good = ss
			return clientT, err
		}
		_, err := Start(t.Context(), Options{Servers: []ServerConfig{{Name: "good"}, {Name: "bad"}, {Name: "slow"}}, Connect: connect})
		if err == nil || err.Error() != `starting MCP server "bad": connecting: no such server` {
			t.Fatalf("Start error = %v, want it to name server bad alone", err)
		}
		if cause := <-slowCause; !errors.Is(cause, errStartAborted) {
			t.Errorf("the start of slow ended with %v, want it cancelled by the failure (%v)", cause, errStartAborted)
		}
		// The good server's session ends: the host closed its client side.
		if err := good.Wait(); err != nil {
			t.Logf("good server session ended with %v", err)
		}
	})
}

// Servers start at once: each connect waits until every server has begun
// to connect, which servers started one after another never do (the first
// would wait out the start timeout). The tools stay in config order though
// the last server is ready first.
func TestServersStartAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"a", "b", "c"}
		var entered atomic.Int32
		all := make(chan struct{}) // closed once every server began to connect
		ready := map[string]chan struct{}{}
		for _, n := range names {
			ready[n] = make(chan struct{})
		}
		connect := func(ctx context.Context, s ServerConfig) (mcp.Transport, error) {
			if int(entered.Add(1)) == len(names) {
				close(all)
			}
			select {
			case <-all:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			// a waits for b, b for c: c is ready first.
			if i := slices.Index(names, s.Name); i+1 < len(names) {
				select {
				case <-ready[names[i+1]]:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			defer close(ready[s.Name])
			return mcptest.NewInMemory(ctx, t)
		}
		var servers []ServerConfig
		for _, n := range names {
			servers = append(servers, ServerConfig{Name: n, Allow: []string{"echo"}})
		}
		h := start(t, Options{Servers: servers, Connect: connect})
		var got []string
		for _, tool := range h.Tools() {
			got = append(got, tool.FullName())
		}
		if want := []string{"a/echo", "b/echo", "c/echo"}; !slices.Equal(got, want) {
			t.Errorf("tools = %v, want %v", got, want)
		}
	})
}

func TestStartFailsWhenListingToolsFails(t *testing.T) {
	connect := func(ctx context.Context, _ ServerConfig) (mcp.Transport, error) {
		serverT, clientT := mcp.NewInMemoryTransports()
		s := mcptest.NewServer(mcptest.ServerOptions{})
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "tools/list" {
					return nil, errors.New("tools are broken")
				}
				return next(ctx, method, req)
			}
		})
		if _, err := s.Connect(ctx, serverT, nil); err != nil {
			return nil, err
		}
		return clientT, nil
	}
	_, err := Start(t.Context(), Options{Servers: []ServerConfig{{Name: "empty"}}, Connect: connect})
	if err == nil || !strings.HasPrefix(err.Error(), `starting MCP server "empty": listing tools: `) ||
		!strings.Contains(err.Error(), "tools are broken") {
		t.Fatalf("Start error = %v, want a listing failure naming the server", err)
	}
}

func TestStartTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		connect := func(ctx context.Context, _ ServerConfig) (mcp.Transport, error) {
			serverT, clientT := mcp.NewInMemoryTransports()
			conn, err := serverT.Connect(ctx)
			if err != nil {
				return nil, err
			}
			go func() { // reads every request, answers none
				for {
					if _, err := conn.Read(context.Background()); err != nil {
						return
					}
				}
			}()
			return clientT, nil
		}
		_, err := Start(t.Context(), Options{Servers: []ServerConfig{{Name: "mute"}}, Connect: connect})
		if err == nil || !strings.Contains(err.Error(), `starting MCP server "mute": connecting: `) ||
			!strings.Contains(err.Error(), "no answer within 1m0s") {
			t.Errorf("Start error = %v, want a timeout naming the server", err)
		}
	})
}

func TestToolFiltersWithholdTools(t *testing.T) {
	rec := &logRecorder{}
	h := start(t, Options{
		Servers: []ServerConfig{
			{Name: "a", Allow: []string{"e*", "w?ite_file", "nothing_*"}, Deny: []string{"env"}},
			{Name: "b", Deny: []string{"[bfps]*"}},
		},
		Connect: inMemory(t),
		Logger:  slog.New(rec),
	})
	var names []string
	for _, tool := range h.Tools() {
		names = append(names, tool.FullName())
	}
	want := []string{"a/echo", "a/write_file", "b/echo", "b/env", "b/write_file"}
	if !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	// A withheld tool is not callable: the answer is the one for any unknown
	// tool, and it does not name the withheld tools.
	for _, name := range []string{"a/env", "a/pid", "b/big"} {
		r := call(t, h, name, map[string]any{})
		wantToolError(t, r, "Unknown tool", "Its tools are: ")
		_, offered, _ := strings.Cut(r.Text, "Its tools are: ")
		if offered != "echo, write_file." && offered != "echo, env, write_file." {
			t.Errorf("%s: answer %q lists other tools than those offered", name, r.Text)
		}
	}
	wantOK(t, call(t, h, "a/echo", map[string]string{"text": "allowed"}), "allowed")
	wantOK(t, call(t, h, "b/echo", map[string]string{"text": "not denied"}), "not denied")

	if got := rec.find("MCP tool filter matches none of the server's tools"); len(got) != 1 || got[0]["glob"] != "nothing_*" || got[0]["filter"] != "allow" {
		t.Errorf("unmatched-glob warnings = %v, want one for allow nothing_*", got)
	}
	if got := rec.find("started MCP server"); len(got) != 2 || got[0]["tools"] != "2" || got[0]["withheld"] != "5" {
		t.Errorf("start logs = %v, want a: 2 tools, 5 withheld", got)
	}
}

func TestToolFiltersSurviveARestart(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{{Name: "t", Allow: []string{"echo", "pid"}}}, Connect: inMemory(t)})
	c := liveConn(t, h, "t")
	_ = c.sess.Close()
	<-c.exited
	wantOK(t, call(t, h, "t/echo", map[string]string{"text": "back"}), "back")
	if n := h.Restarts("t"); n != 1 {
		t.Fatalf("Restarts = %d, want 1", n)
	}
	wantToolError(t, call(t, h, "t/fail", map[string]any{}), `Unknown tool "fail"`, "Its tools are: echo, pid.")
}

func TestBadToolFilterIsAStartError(t *testing.T) {
	_, err := Start(t.Context(), Options{Servers: []ServerConfig{{Name: "t", Deny: []string{"get_[a-"}}}, Connect: inMemory(t)})
	if err == nil || !strings.Contains(err.Error(), `tool filter "get_[a-" is not a valid glob`) {
		t.Errorf("Start = %v, want an invalid-glob error", err)
	}
}
