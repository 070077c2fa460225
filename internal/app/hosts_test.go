package app_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// A forge or a model server at an internal address that fails: the
// comments on the task say what failed (the method, the path, the status)
// but not the host; the log keeps the whole error.
func TestFailureCommentsNameNoHost(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	t.Run("forge", func(t *testing.T) {
		e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
		e.cfg.GitHub.APIURL = e.gh.URL() + "/api/v3" // GitHub Enterprise's REST root
		e.gh.Inject(forgetest.Fault{Method: "GET", Path: "/issues/1/comments", Status: 500, Times: -1})
		if err := e.run(context.Background()); err != nil {
			t.Fatal(err)
		}
		checkFailed(t, e, "GET /api/v3/repos/acme/app/issues/1/comments")
		checkNoHost(t, e, e.gh.URL())
	})
	t.Run("model-planned", func(t *testing.T) {
		e := planned(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
		e.cfg.LLM.OpenAI.BaseURL = vanishing(t) + "/v1"
		if err := e.run(context.Background()); err != nil {
			t.Fatal(err)
		}
		checkFailed(t, e, `Post "/v1/chat/completions": dial tcp [address]: connect: connection refused`)
		checkNoHost(t, e, e.cfg.LLM.OpenAI.BaseURL)
		if c := e.botComments(); len(c) < 2 || !strings.Contains(c[0], "connection refused") {
			t.Errorf("the planning report does not say the model could not be reached:\n%q", c)
		}
	})
	t.Run("tool-planned", func(t *testing.T) {
		// A path that is a URL: the tool's error quotes it.
		const path = "https://gitlab.corp.example:8443/api/v4/projects/7"
		e := planned(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
			respond: shortPlan(func(e *env, r llmtest.Received, w at) llmtest.Step {
				if w.Phase == "execution" && w.Tools == 0 {
					return e.call(r, "", "t/write_file", map[string]any{"path": path, "content": "x"})
				}
				return nil
			})})
		e.cfg.MCPServers = append(e.cfg.MCPServers, config.MCPServer{Name: "t", Command: []string{mcptest.Build(t)}})
		e.runOK(t)
		comments := strings.Join(e.botComments(), "\n")
		if !strings.Contains(comments, "write_file: open /api/v4/projects/7: no such file or directory") || strings.Contains(comments, "gitlab.corp") {
			t.Errorf("the tool's failure is not reported without its host:\n%s", comments)
		}
		seen := false
		for _, r := range e.model.Requests() {
			seen = seen || strings.Contains(r.Messages[len(r.Messages)-1].Content, "open "+path)
		}
		if !seen {
			t.Errorf("the model did not get the whole error")
		}
	})
}

// unreachable is the URL of a port nothing listens on.
func unreachable(t *testing.T) string {
	t.Helper()
	// On 127.0.0.2, which the tests' own servers (on 127.0.0.1) never
	// take: a closed port there stays closed while parallel tests start
	// servers of their own.
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// checkNoHost: no comment names the host (or the port) of base, which the
// log does name.
func checkNoHost(t *testing.T, e *env, base string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range e.botComments() {
		if strings.Contains(c, u.Host) || strings.Contains(c, ":"+u.Port()) || strings.Contains(c, "://") {
			t.Errorf("a comment names the host %s:\n%s", u.Host, c)
		}
	}
	if rec := e.record(); strings.Contains(rec.Error, u.Host) {
		t.Errorf("the store's error names the host: %s", rec.Error)
	}
	if logs := readTree(t, e.cfg.Logging.File); !strings.Contains(logs, u.Host) {
		t.Errorf("the log lost the host of the failed request")
	}
}

// vanishing is the URL of a model server that lists its models (so that a
// run starts) and goes away at the first chat request: that request's
// connection is dropped and nothing listens on its port any more.
func vanishing(t *testing.T) string {
	t.Helper()
	var once sync.Once
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"gpt-test","object":"model"}]}`)
			return
		}
		once.Do(func() { srv.Listener.Close() })
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
