package toolhost

import "net/http"

// remoteClient is the HTTP client of a remote server: it sends headers
// (its Authorization, say) with every request, and bounds nothing itself:
// a call's context bounds its request, and the server's event stream
// lives as long as the connection.
func remoteClient(headers map[string]string) *http.Client {
	return &http.Client{Transport: withHeaders{base: http.DefaultTransport, headers: headers}}
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
