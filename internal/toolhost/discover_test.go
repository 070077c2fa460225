package toolhost

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// authorized is a remote MCP server that asks for OAuth as the MCP
// authorization spec says (401 with its protected resource metadata's
// address), with its own authorization server: metadata, token endpoint.
type authorized struct {
	srv      *httptest.Server
	mcpURL   string
	issued   atomic.Int64
	resource atomic.Value // the resource the last token request named
	mu       sync.Mutex
	valid    map[string]bool
}

func newAuthorized(t *testing.T, challenge bool) *authorized {
	a := &authorized{valid: map[string]bool{}}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.NewServer(mcptest.ServerOptions{}) }, nil)
	mux := http.NewServeMux()
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	a.mcpURL = a.srv.URL + "/mcp"
	issuer := a.srv.URL + "/auth"
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"resource":"` + a.mcpURL + `","authorization_servers":["` + issuer + `"]}`))
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server/auth", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"issuer":"` + issuer + `","token_endpoint":"` + a.srv.URL + `/auth/token","grant_types_supported":["client_credentials"]}`))
	})
	mux.HandleFunc("POST /auth/token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if !ok || id != "agent" || secret != "client-secret-0123456789" || r.FormValue("grant_type") != "client_credentials" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		a.resource.Store(r.FormValue("resource"))
		tok := "access-" + strings.Repeat("y", 8) + string(rune('a'+a.issued.Add(1)))
		a.mu.Lock()
		a.valid[tok] = true
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"` + tok + `","token_type":"Bearer","expires_in":3600}`))
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		a.mu.Lock()
		ok := a.valid[tok]
		a.mu.Unlock()
		if !ok {
			if challenge {
				w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+a.srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
			}
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	})
	return a
}

// A server that asks for OAuth, with no token_url configured: the token
// endpoint is found from the server's metadata (from its 401's
// WWW-Authenticate, or at the well-known address when it names none), the
// token asked for names the server as its resource, and the tools work.
func TestOAuthTokenEndpointDiscovered(t *testing.T) {
	for _, challenge := range []bool{true, false} {
		a := newAuthorized(t, challenge)
		cfg := ServerConfig{Name: "found", URL: a.mcpURL, OAuth: &OAuthClient{ClientID: "agent", ClientSecret: "client-secret-0123456789"}}
		h := start(t, Options{Servers: []ServerConfig{cfg}})
		if res := call(t, h, "found/echo", map[string]any{"text": "discovered"}); res.IsError || !strings.Contains(res.Text, "discovered") {
			t.Fatalf("challenge %v: echo: %+v", challenge, res)
		}
		if a.issued.Load() != 1 || a.resource.Load() != a.mcpURL {
			t.Errorf("challenge %v: %d tokens, resource %q", challenge, a.issued.Load(), a.resource.Load())
		}
	}
}

// Metadata that does not hold (no authorization server named, an issuer
// that does not match, nothing at the addresses) fails the start with a
// message that says what was looked for and how to skip it.
func TestOAuthDiscoveryFailureSaysWhy(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "unauthorized", http.StatusUnauthorized) })
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"resource":"` + srv.URL + `/mcp","authorization_servers":["` + srv.URL + `/auth"]}`))
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server/auth", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"issuer":"https://elsewhere.example.com","token_endpoint":"` + srv.URL + `/token"}`))
	})
	cfg := ServerConfig{Name: "lost", URL: srv.URL + "/mcp", OAuth: &OAuthClient{ClientID: "agent", ClientSecret: "client-secret-0123456789"}}
	_, err := Start(t.Context(), Options{Servers: []ServerConfig{cfg}})
	if err == nil || !strings.Contains(err.Error(), "set oauth.token_url to skip it") || !strings.Contains(err.Error(), "names the issuer") ||
		strings.Contains(err.Error(), "client-secret-0123456789") {
		t.Fatalf("start: %v", err)
	}
}
