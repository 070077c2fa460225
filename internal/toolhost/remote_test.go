package toolhost

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const remoteToken = "remote-bearer-token-0123456789"

// remote is the mcptest server behind go-sdk's streamable HTTP handler,
// asking for the bearer token; cut ends every session it holds (a dropped
// connection: the server forgets the session, as a restarted one does).
type remote struct {
	srv     *httptest.Server
	refused atomic.Int64
	mu      sync.Mutex
	handler *mcp.StreamableHTTPHandler
}

func newRemote(t *testing.T) *remote {
	r := &remote{}
	r.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.NewServer(mcptest.ServerOptions{}) }, nil)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer "+remoteToken {
			r.refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		r.mu.Lock()
		h := r.handler
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// forget drops every session, as a restarted server does: the next
// request of one is answered 404.
func (r *remote) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.NewServer(mcptest.ServerOptions{}) }, nil)
}

func remoteConfig(r *remote) ServerConfig {
	return ServerConfig{Name: "remote", URL: r.srv.URL, Headers: map[string]string{"Authorization": "Bearer " + remoteToken}}
}

// A remote server over streamable HTTP: its tools are listed and called
// with the bearer header; a connection the server dropped mid-task is
// made again (the call fails over to a new session); the token is in no
// log record.
func TestRemoteServerOverStreamableHTTP(t *testing.T) {
	r := newRemote(t)
	logs := &logRecorder{}
	h := start(t, Options{Servers: []ServerConfig{remoteConfig(r)}, Logger: slogOf(logs)})
	var names []string
	for _, tool := range h.Tools() {
		names = append(names, tool.Server+"/"+tool.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "remote/echo") {
		t.Fatalf("tools %q", names)
	}
	if res := call(t, h, "remote/echo", map[string]any{"text": "hello"}); res.IsError || !strings.Contains(res.Text, "hello") {
		t.Fatalf("echo: %+v", res)
	}
	r.forget()
	// The call that finds the connection gone is answered for what it
	// is (it may or may not have happened); the next one goes through.
	res := call(t, h, "remote/echo", map[string]any{"text": "lost"})
	if !res.IsError || !strings.Contains(res.Text, `MCP server "remote" lost its connection during the call to remote/echo and was connected again`) {
		t.Fatalf("the call that found the connection dropped: %+v", res)
	}
	res = call(t, h, "remote/echo", map[string]any{"text": "again"})
	if res.IsError || !strings.Contains(res.Text, "again") {
		t.Fatalf("echo after the connection was made again: %+v", res)
	}
	if h.Restarts("remote") != 1 {
		t.Errorf("the connection was made again %d times, want 1", h.Restarts("remote"))
	}
	// Its connections cut (a proxy restarted): a call may fail, once, as
	// a tool error; the next goes through.
	r.srv.CloseClientConnections()
	if res := call(t, h, "remote/echo", map[string]any{"text": "cut"}); res.IsError && !strings.Contains(res.Text, "remote/echo") {
		t.Fatalf("the call on a cut connection: %+v", res)
	}
	if res := call(t, h, "remote/echo", map[string]any{"text": "after"}); res.IsError || !strings.Contains(res.Text, "after") {
		t.Fatalf("echo after the connections were cut: %+v", res)
	}
	if r.refused.Load() != 0 {
		t.Errorf("%d requests went without the bearer header", r.refused.Load())
	}
	if leaked := logs.containing(remoteToken); len(leaked) > 0 {
		t.Errorf("the token is in the log: %q", leaked)
	}
}

// A remote server that refuses the credentials fails the start, naming
// the server and the answer, not the token.
func TestRemoteServerRefusingTheTokenFailsTheStart(t *testing.T) {
	r := newRemote(t)
	cfg := remoteConfig(r)
	cfg.Headers = map[string]string{"Authorization": "Bearer wrong-token-value-0000"}
	_, err := Start(t.Context(), Options{Servers: []ServerConfig{cfg}})
	if err == nil || !strings.Contains(err.Error(), `"remote"`) || strings.Contains(err.Error(), "wrong-token-value") {
		t.Fatalf("Start = %v", err)
	}
}

func slogOf(r *logRecorder) *slog.Logger { return slog.New(r) }

// containing are the records whose message or an attribute holds s.
func (r *logRecorder) containing(s string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.records {
		line := rec.Message
		rec.Attrs(func(a slog.Attr) bool {
			line += " " + a.Key + "=" + a.Value.String()
			return true
		})
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// A remote server behind OAuth client credentials: the host asks the
// token endpoint for a token with the client's id and secret, sends it,
// and asks again when the server no longer takes it (revoked: the
// connection made again brings a new one).
func TestRemoteServerWithOAuthClientCredentials(t *testing.T) {
	var issued atomic.Int64
	var mu sync.Mutex
	valid := map[string]bool{}
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if !ok || id != "agent" || secret != "client-secret-0123456789" || r.FormValue("grant_type") != "client_credentials" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		tok := "access-" + strings.Repeat("x", 8) + string(rune('a'+issued.Add(1)))
		mu.Lock()
		valid[tok] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"` + tok + `","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(tokens.Close)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.NewServer(mcptest.ServerOptions{}) }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		mu.Lock()
		ok := valid[tok]
		mu.Unlock()
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := ServerConfig{Name: "oauth", URL: srv.URL, OAuth: &OAuthClient{TokenURL: tokens.URL, ClientID: "agent",
		ClientSecret: "client-secret-0123456789", Scopes: []string{"tools"}}}
	h := start(t, Options{Servers: []ServerConfig{cfg}})
	if res := call(t, h, "oauth/echo", map[string]any{"text": "signed in"}); res.IsError || !strings.Contains(res.Text, "signed in") {
		t.Fatalf("echo: %+v", res)
	}
	if issued.Load() != 1 {
		t.Fatalf("%d tokens asked for, want 1", issued.Load())
	}
	mu.Lock()
	clear(valid) // revoked
	mu.Unlock()
	call(t, h, "oauth/echo", map[string]any{"text": "refused"}) // fails, and the connection is made again
	if res := call(t, h, "oauth/echo", map[string]any{"text": "again"}); res.IsError || !strings.Contains(res.Text, "again") {
		t.Fatalf("echo with a new token: %+v", res)
	}
	if issued.Load() < 2 {
		t.Errorf("no new token was asked for after the first was refused")
	}

	bad := cfg
	bad.OAuth = &OAuthClient{TokenURL: tokens.URL, ClientID: "agent", ClientSecret: "wrong-secret-000000000"}
	if _, err := Start(t.Context(), Options{Servers: []ServerConfig{bad}}); err == nil || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("a wrong client secret: %v", err)
	}
}
