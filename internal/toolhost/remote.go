package toolhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// OAuthClient signs a remote server's requests in with OAuth 2.0 client
// credentials. Without TokenURL the token endpoint is discovered from the
// server (discover).
type OAuthClient struct {
	TokenURL, ClientID, ClientSecret string
	Scopes                           []string
}

// tokenTimeout bounds one request for an access token.
const tokenTimeout = 30 * time.Second

// remoteClient is the HTTP client of a remote server: it sends headers
// (its Authorization, say) with every request, and with oauth an access
// token of the client credentials grant, asked for when the first request
// goes and again before it expires. It bounds nothing else: a call's
// context bounds its request, and the server's event stream lives as long
// as the connection.
func remoteClient(endpoint string, headers map[string]string, oauth *OAuthClient) *http.Client {
	var rt http.RoundTripper = withHeaders{base: http.DefaultTransport, headers: headers}
	if oauth != nil {
		rt = &oauth2.Transport{Source: &tokens{endpoint: endpoint, oauth: *oauth}, Base: rt}
	}
	return &http.Client{Transport: rt}
}

// tokens are a remote server's access tokens of the client credentials
// grant, from its configured token endpoint or, without one, from the one
// its metadata names (discovered at the first token asked for, and again
// after a discovery that failed), whose token requests name the server as
// the resource (RFC 8707), as the MCP authorization spec asks.
type tokens struct {
	endpoint string
	oauth    OAuthClient
	mu       sync.Mutex
	src      oauth2.TokenSource
}

func (t *tokens) Token() (*oauth2.Token, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.src == nil {
		ctx, cancel := context.WithTimeout(context.Background(), tokenTimeout)
		defer cancel()
		cc := clientcredentials.Config{ClientID: t.oauth.ClientID, ClientSecret: t.oauth.ClientSecret, TokenURL: t.oauth.TokenURL,
			Scopes: t.oauth.Scopes}
		if cc.TokenURL == "" {
			// The configured headers are the server's: the metadata's
			// addresses (another host, as the 401 names them) get none.
			var err error
			if cc.TokenURL, err = discover(ctx, t.endpoint, &http.Client{Timeout: tokenTimeout}); err != nil {
				return nil, err
			}
			cc.EndpointParams = url.Values{"resource": {t.endpoint}}
		}
		t.src = cc.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Timeout: tokenTimeout}))
	}
	return t.src.Token()
}

// discover finds the token endpoint of a server's authorization server as
// the MCP authorization spec says: the server's protected resource metadata
// (RFC 9728: where its 401's WWW-Authenticate says, else at the well-known
// address), the authorization server it names, and that server's metadata
// (RFC 8414, or OpenID Connect discovery).
func discover(ctx context.Context, endpoint string, c *http.Client) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("discovering the token endpoint: %w", err)
	}
	origin := u.Scheme + "://" + u.Host
	var prms []string
	if m := resourceMetadata(ctx, endpoint, c); m != "" {
		prms = append(prms, m)
	}
	if p := strings.TrimRight(u.Path, "/"); p != "" {
		prms = append(prms, origin+"/.well-known/oauth-protected-resource"+p)
	}
	prms = append(prms, origin+"/.well-known/oauth-protected-resource")
	var errs []error
	for _, m := range prms {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, m, endpoint, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(prm.AuthorizationServers) == 0 {
			errs = append(errs, fmt.Errorf("%s names no authorization server", m))
			continue
		}
		te, err := tokenEndpoint(ctx, prm.AuthorizationServers[0], c)
		if err != nil {
			return "", fmt.Errorf("discovering the token endpoint of %s (set oauth.token_url to skip it): %w", endpoint, err)
		}
		return te, nil
	}
	return "", fmt.Errorf("discovering the token endpoint of %s (set oauth.token_url to skip it): %w", endpoint, errors.Join(errs...))
}

// resourceMetadata is the address of the server's protected resource
// metadata its 401 gives (WWW-Authenticate: Bearer resource_metadata=…),
// "" when it gives none.
func resourceMetadata(ctx context.Context, endpoint string, c *http.Client) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return ""
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusUnauthorized {
		return ""
	}
	challenges, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return ""
	}
	for _, ch := range challenges {
		if ch.Scheme == "bearer" && ch.Params["resource_metadata"] != "" {
			return ch.Params["resource_metadata"]
		}
	}
	return ""
}

// tokenEndpoint reads an authorization server's metadata (RFC 8414's
// address for its issuer, then OpenID Connect's) for its token endpoint;
// the metadata must name the same issuer.
func tokenEndpoint(ctx context.Context, issuer string, c *http.Client) (string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("the authorization server %q is not a URL", issuer)
	}
	origin, p := u.Scheme+"://"+u.Host, strings.TrimRight(u.Path, "/")
	var errs []error
	for _, m := range []string{origin + "/.well-known/oauth-authorization-server" + p, origin + "/.well-known/openid-configuration" + p,
		strings.TrimRight(issuer, "/") + "/.well-known/openid-configuration"} {
		meta, err := getMeta(ctx, m, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if strings.TrimRight(meta.Issuer, "/") != strings.TrimRight(issuer, "/") {
			errs = append(errs, fmt.Errorf("%s names the issuer %q, not %q", m, meta.Issuer, issuer))
			continue
		}
		if t, err := url.Parse(meta.TokenEndpoint); err != nil || (t.Scheme != "https" && !loopback(t.Hostname())) {
			errs = append(errs, fmt.Errorf("%s: the token endpoint %q is not an https URL", m, meta.TokenEndpoint))
			continue
		}
		return meta.TokenEndpoint, nil
	}
	return "", fmt.Errorf("reading the metadata of the authorization server %s: %w", issuer, errors.Join(errs...))
}

type asMeta struct {
	Issuer        string `json:"issuer"`
	TokenEndpoint string `json:"token_endpoint"`
}

func getMeta(ctx context.Context, addr string, c *http.Client) (asMeta, error) {
	var m asMeta
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
	if err != nil {
		return m, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("%s answered %s", addr, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil || m.TokenEndpoint == "" {
		return m, fmt.Errorf("%s holds no token_endpoint (%v)", addr, err)
	}
	return m, nil
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// withHeaders adds headers to every request it sends.
type withHeaders struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(r)
}
