package toolhost

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// answering is an Asker that records the questions and gives one answer.
type answering struct {
	mu    sync.Mutex
	asked []Question
	give  Answer
}

func (a *answering) Ask(_ context.Context, q Question) Answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, q)
	return a.give
}

func (a *answering) questions() []Question {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Question(nil), a.asked...)
}

// asking serves the mcptest server with the deploy tool over streamable
// HTTP (the 2026-07-28 revision: its question is an input_required result).
func askingServer(t *testing.T) ServerConfig {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.NewServer(mcptest.ServerOptions{Asks: true}) }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return ServerConfig{Name: "deployer", URL: srv.URL}
}

func callAsking(t *testing.T, h *Host, a Asker, name string, args any) Result {
	t.Helper()
	raw, _ := json.Marshal(args)
	ctx := t.Context()
	if a != nil {
		ctx = WithAsker(ctx, a)
	}
	r, err := h.Call(ctx, name, raw)
	if err != nil {
		t.Fatalf("Call(%s): %v", name, err)
	}
	return r
}

// A server's question during a call goes to the call's asker, named by the
// server, with its message and fields; the answer goes back and the call
// finishes with it. The same question has the same key every time.
func TestServerQuestionGoesToTheCallsAsker(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{askingServer(t)}})
	a := &answering{give: Answer{Action: Accept, Content: map[string]any{"environment": "staging", "replicas": 2}}}
	res := callAsking(t, h, a, "deployer/deploy", map[string]any{"target": "web"})
	if res.IsError || !strings.Contains(res.Text, `deployed web with {"environment":"staging","replicas":2}`) {
		t.Fatalf("result: %+v", res)
	}
	qs := a.questions()
	if len(qs) != 1 || qs[0].Server != "deployer" || qs[0].Message != "Where should web be deployed, and with how many replicas?" ||
		!strings.Contains(string(qs[0].Schema), `"environment"`) {
		t.Fatalf("questions: %+v", qs)
	}
	callAsking(t, h, a, "deployer/deploy", map[string]any{"target": "web"})
	if qs := a.questions(); len(qs) != 2 || qs[0].Key() != qs[1].Key() {
		t.Fatalf("the same question asked twice has two keys: %+v", qs)
	}
	// Put off (cancel) and refused (decline): the server hears so, and
	// does nothing.
	for _, action := range []string{Cancel, Decline} {
		res := callAsking(t, h, &answering{give: Answer{Action: action}}, "deployer/deploy", map[string]any{"target": "db"})
		if want := `deploy db: not deployed (the question was answered "` + action + `")`; res.Text != want {
			t.Errorf("answered %s: %q, want %q", action, res.Text, want)
		}
	}
}

// A call nobody can answer for (no asker: a probe, doctor) gets its
// question declined, and the call still ends.
func TestServerQuestionWithoutAskerIsDeclined(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{askingServer(t)}})
	res := callAsking(t, h, nil, "deployer/deploy", map[string]any{"target": "web"})
	if want := `deploy web: not deployed (the question was answered "decline")`; res.Text != want {
		t.Fatalf("%q, want %q", res.Text, want)
	}
}

// The MCP reference server asks on its connection (elicitation/create, the
// revisions before 2026-07-28): the question reaches the asker of the one
// call in flight on it, with the server's name, and the answer comes back.
func TestNpmServerQuestionReachesTheAsker(t *testing.T) {
	port := freePort(t)
	stop := everything(t, port)
	defer stop()
	h := start(t, Options{Servers: []ServerConfig{{Name: "everything", URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"}}})
	a := &answering{give: Answer{Action: Accept, Content: map[string]any{"name": "Ada Lovelace"}}}
	res := callAsking(t, h, a, "everything/trigger-elicitation-request", map[string]any{})
	t.Logf("result: %.300s", res.Text)
	if res.IsError || !strings.Contains(res.Text, "Name: Ada Lovelace") {
		t.Fatalf("result: %+v", res)
	}
	qs := a.questions()
	if len(qs) != 1 || qs[0].Server != "everything" || !strings.Contains(string(qs[0].Schema), `"required":["name"]`) {
		t.Fatalf("questions: %+v", qs)
	}
	// Declined without an asker.
	res = callAsking(t, h, nil, "everything/trigger-elicitation-request", map[string]any{})
	if !strings.Contains(res.Text, "declined") {
		t.Fatalf("without an asker: %.300s", res.Text)
	}
}
