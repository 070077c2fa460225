package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A remote MCP server over streamable HTTP, behind a bearer token: its
// tool is offered and called through a task, doctor says it answered,
// and the token reaches no log record, comment or model request.
func TestRemoteMCPServerThroughATask(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	const token = "remote-mcp-bearer-0123456789abcdef"
	var refused atomic.Int64
	var probing atomic.Bool
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.NewServer(mcptest.ServerOptions{}) }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if probing.Load() {
				return modelThat(true, true)(e, r) // doctor's
			}
			if toolResults(r) == 0 {
				return e.call(r, "Asking the remote server.", "remote/echo", map[string]any{"text": "from afar"})
			}
			return done("The remote server answered.")
		}})
	e.cfg.MCPServers = append(e.cfg.MCPServers, config.MCPServer{Name: "remote", URL: srv.URL,
		Headers: map[string]config.Secret{"Authorization": config.Secret("Bearer " + token)}})
	if err := e.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent done")
	reqs := e.model.Requests()
	probing.Store(true)
	out, err := doctor(t, e, false)
	if err != nil {
		t.Fatalf("doctor: %v", err)
	}
	wantLines(t, out, "ok    mcp    remote at "+srv.URL+" answered with ")
	if len(reqs) != 2 || !seen(reqs[1], "from afar") {
		t.Fatalf("the remote tool's result did not reach the model (%d requests)", len(reqs))
	}
	places := map[string]string{"the comments": strings.Join(e.allComments(), "\n"), "doctor": out}
	for _, r := range reqs {
		places["a model request"] += string(r.Body)
	}
	log, _ := os.ReadFile(e.cfg.Logging.File)
	places["the log"] = string(log)
	for place, text := range places {
		if w := mcptest.Leaked(text, token); w != "" {
			t.Errorf("the bearer token reached %s: %q", place, w)
		}
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("%d requests reached the server without the token", n)
	}
}

// A remote server that restarts mid-task (its sessions forgotten): the
// call that finds the session gone is answered as such, the host connects
// again, the model's next call goes through, and the task finishes.
func TestRemoteMCPServerRestartsMidTask(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	var mu sync.Mutex
	newHandler := func() http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.NewServer(mcptest.ServerOptions{}) }, nil)
	}
	handler := newHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := handler
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t, setup{forge: task.GitLab, kind: task.Issue, provider: config.ProviderOllama, native: true,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			switch toolResults(r) {
			case 0:
				return e.call(r, "", "remote/echo", map[string]any{"text": "first"})
			case 1:
				mu.Lock()
				handler = newHandler() // the server restarted: every session is gone
				mu.Unlock()
				return e.call(r, "", "remote/echo", map[string]any{"text": "second"})
			case 2:
				return e.call(r, "", "remote/echo", map[string]any{"text": "third"})
			}
			return done("The remote server answered three times.")
		}})
	e.cfg.MCPServers = append(e.cfg.MCPServers, config.MCPServer{Name: "remote", URL: srv.URL})
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent done")
	reqs := e.model.Requests()
	if len(reqs) != 4 || !seen(reqs[1], "first") || !seen(reqs[2], "lost its connection") || !seen(reqs[3], "third") {
		t.Fatalf("%d requests; the second call's answer and the third's did not reach the model as they should", len(reqs))
	}
}

// The resources a remote server lists are found and read through the
// host's resources/ tools in a task: what the resource says reaches the
// model.
func TestRemoteResourcesFoundAndReadInATask(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcptest.NewServer(mcptest.ServerOptions{})
		s.AddResource(&mcp.Resource{URI: "docs://style-guide", Name: "style guide", Description: "How code is written here"},
			func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "Indent with tabs; name tests after behaviour."}}}, nil
			})
		return s
	}, nil)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	e := newEnv(t, setup{forge: task.Gitea, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			switch toolResults(r) {
			case 0:
				return e.call(r, "", "resources/find", map[string]any{"query": "style guide"})
			case 1:
				return e.call(r, "", "resources/read", map[string]any{"uri": "docs://style-guide"})
			}
			return done("Read the style guide.")
		}})
	e.cfg.MCPServers = append(e.cfg.MCPServers, config.MCPServer{Name: "docs", URL: srv.URL})
	e.runOK(t)
	reqs := e.model.Requests()
	if len(reqs) != 3 || !seen(reqs[1], "docs://style-guide (style guide, on docs)") || !seen(reqs[2], "Indent with tabs") {
		t.Fatalf("%d requests: the resource was not found and read", len(reqs))
	}
}
