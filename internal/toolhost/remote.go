package toolhost

import (
	"context"
	"net/http"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// OAuthClient signs a remote server's requests in with OAuth 2.0 client
// credentials.
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
func remoteClient(headers map[string]string, oauth *OAuthClient) *http.Client {
	var rt http.RoundTripper = withHeaders{base: http.DefaultTransport, headers: headers}
	if oauth != nil {
		cc := clientcredentials.Config{ClientID: oauth.ClientID, ClientSecret: oauth.ClientSecret,
			TokenURL: oauth.TokenURL, Scopes: oauth.Scopes}
		ctx := context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Timeout: tokenTimeout})
		rt = &oauth2.Transport{Source: cc.TokenSource(ctx), Base: rt}
	}
	return &http.Client{Transport: rt}
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
