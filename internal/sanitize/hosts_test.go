package sanitize

import "testing"

func TestHosts(t *testing.T) {
	for in, want := range map[string]string{
		// go-github's and GitLab client-go's error responses.
		"reading comments of github:a/b#1: GET https://ghe.corp.example/api/v3/repos/a/b/issues/1/comments?per_page=100: 500 boom []": "reading comments of github:a/b#1: GET /api/v3/repos/a/b/issues/1/comments?per_page=100: 500 boom []",
		"getting a/b#3: GET https://gitlab.corp:8443/api/v4/projects/a%2Fb/issues/3: 502 {message: bad gateway}":                      "getting a/b#3: GET /api/v4/projects/a%2Fb/issues/3: 502 {message: bad gateway}",
		// net/http's *url.Error with the dialer's and resolver's errors.
		`Get "https://ghe.corp/api/v3/user": dial tcp: lookup ghe.corp on 10.0.0.2:53: no such host`:                                    `Get "/api/v3/user": dial tcp: lookup [host] on [address]: no such host`,
		`Post "http://10.1.2.3:11434/api/chat": dial tcp 10.1.2.3:11434: connect: connection refused`:                                   `Post "/api/chat": dial tcp [address]: connect: connection refused`,
		`Post "http://[fd00::5]:8080/v1/chat/completions": dial tcp [fd00::5]:8080: i/o timeout`:                                        `Post "/v1/chat/completions": dial tcp [address]: i/o timeout`,
		"read tcp 192.168.1.5:51234->10.0.0.9:443: read: connection reset by peer":                                                      "read tcp [address]->[address]: read: connection reset by peer",
		`Get "https://ghe.corp/api/v3": tls: failed to verify certificate: x509: certificate is valid for a.corp, b.corp, not ghe.corp`: `Get "/api/v3": tls: failed to verify certificate: x509: certificate is not valid for [host]`,
		"x509: certificate is not valid for any names, but wanted to match ghe.corp":                                                    "x509: certificate is not valid for any names, but wanted to match [host]",
		// A URL that is only a host, with credentials, or with a query only.
		`Get "https://ghe.corp": EOF`:                     `Get "[host]": EOF`,
		"cloning https://x-access-token:t0k@ghe.corp/a/b": "cloning /a/b",
		"GET http://llm.lan?x=1: 404":                     "GET ?x=1: 404",
		// Nothing to take out.
		"the model's reply was unusable 5 times in a row": "the model's reply was unusable 5 times in a row",
		"reading github:acme/app#12: not found":           "reading github:acme/app#12: not found",
		"decoding at parse.go:12: bad value [1:2]":        "decoding at parse.go:12: bad value [1:2]",
	} {
		if got := Hosts(in); got != want {
			t.Errorf("Hosts(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}
