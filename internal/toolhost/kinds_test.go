package toolhost

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ranArgs is the argument of the ran tool of ranServer.
type ranArgs struct {
	Command string `json:"command"`
}

// ranServer answers its tool ran with the structured content of a command
// run, as the built-in workspace server's run_command does, and names the
// workspace it was made for.
func ranServer(vars TaskVars) (*mcp.Server, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "ran", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "ran", Description: "Says it ran a command."},
		func(_ context.Context, _ *mcp.CallToolRequest, in ranArgs) (*mcp.CallToolResult, CommandRun, error) {
			out := CommandRun{Command: in.Command, ExitCode: 3}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran in " + vars.Workspace}}}, out, nil
		})
	return s, nil
}

func TestInProcessServerIsTheOnlyEvidenceOfARun(t *testing.T) {
	own := ServerConfig{Name: "workspace", Scope: ScopeTask, InProcess: ranServer}
	h := start(t, Options{Servers: []ServerConfig{own}, Redact: func(s string) string {
		return strings.ReplaceAll(s, "s3cret", "[REDACTED]")
	}})
	if got := len(h.Tools()); got != 1 {
		t.Fatalf("tools = %d, want the probe's 1", got)
	}
	sess, err := h.ForTask(t.Context(), TaskVars{Workspace: "/w/task", TaskRef: "r", Branch: "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := sess.Call(t.Context(), "workspace/ran", []byte(`{"command":"make test TOKEN=s3cret"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "ran in /w/task" {
		t.Errorf("text = %q: the instance was not made with the task's variables", res.Text)
	}
	want := CommandRun{Command: "make test TOKEN=[REDACTED]", ExitCode: 3}
	if res.Ran == nil || *res.Ran != want {
		t.Errorf("Ran = %+v, want %+v", res.Ran, want)
	}

	// The same answer from a server that is not the daemon's own is no
	// evidence: a third-party server cannot claim that something ran.
	other := start(t, Options{Servers: []ServerConfig{{Name: "other"}},
		Connect: func(ctx context.Context, _ ServerConfig) (mcp.Transport, error) {
			srv, _ := ranServer(TaskVars{})
			client, server := mcp.NewInMemoryTransports()
			if _, err := srv.Connect(ctx, server, nil); err != nil {
				return nil, err
			}
			return client, nil
		}})
	res, err = other.Call(t.Context(), "other/ran", []byte(`{"command":"make test"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Ran != nil {
		t.Errorf("a third-party server's result carries Ran %+v", res.Ran)
	}
}

func TestServerCallTimeoutOverridesTheHosts(t *testing.T) {
	slow := ServerConfig{Name: "slow", CallTimeout: 5 * time.Second}
	h := start(t, Options{Servers: []ServerConfig{slow}, CallTimeout: 50 * time.Millisecond, Connect: inMemory(t)})
	res := call(t, h, "slow/sleep", map[string]any{"ms": 300})
	if res.IsError {
		t.Errorf("a 300 ms call under the server's 5 s limit failed: %s", res.Text)
	}
}

func TestConfinedServerIsStartedByItsConfine(t *testing.T) {
	bin := mcptest.Build(t)
	var seen []TaskVars
	confined := ServerConfig{Name: "boxed", Scope: ScopeTask, Command: []string{bin}, Env: map[string]string{"WHERE": "${WORKSPACE}"},
		Confine: func(vars TaskVars, argv []string, env map[string]string) (*exec.Cmd, error) {
			seen = append(seen, vars)
			// The stand-in for a sandbox: the given command with only the given environment.
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = []string{"WHERE=" + env["WHERE"], "BOXED=yes"}
			return cmd, nil
		}}
	h := start(t, Options{Servers: []ServerConfig{confined}})
	sess, err := h.ForTask(t.Context(), TaskVars{Workspace: "/w/one", TaskRef: "r", Branch: "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for name, want := range map[string]string{"BOXED": "yes", "WHERE": "/w/one"} {
		res, err := sess.Call(t.Context(), "boxed/env", []byte(`{"name":"`+name+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != want {
			t.Errorf("%s = %q, want %q", name, res.Text, want)
		}
	}
	if len(seen) != 2 || !strings.HasSuffix(seen[0].Workspace, "/work") || seen[1].Workspace != "/w/one" {
		t.Errorf("Confine saw %+v, want the probe's workspace (a work folder of its own) and the task's", seen)
	}
}
