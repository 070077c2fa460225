package sanitize

import (
	"regexp"
	"strings"
)

// The replacements Hosts makes.
const (
	HostPlaceholder    = "[host]"
	AddressPlaceholder = "[address]"
)

var (
	// urlStart is a URL's scheme, credentials, host and port.
	urlStart = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s/"'<>?#]+`)
	// dnsName is the name a resolver error names ("lookup ghe.corp on ...").
	dnsName = regexp.MustCompile(`\blookup [^\s:]+`)
	// certNames are the names a TLS certificate error lists.
	certNames = regexp.MustCompile(`certificate is valid for .*?, not [^\s:;,]+|but wanted to match [^\s:;,]+`)
	// ipAddress is an IPv4 address, or an IPv6 one in brackets, with its
	// port if any.
	ipAddress = regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b|\[[0-9A-Fa-f]*:[0-9A-Fa-f]*:[0-9A-Fa-f:.]*(?:%\w+)?\](?::\d{1,5})?`)
)

// Hosts takes out of an error's text where the failing request went, so
// that a comment can say what failed without naming an internal host (a
// GitHub Enterprise server, a model server on the LAN): a URL keeps its
// path and query but loses its scheme, credentials, host and port (a URL
// that is only that becomes HostPlaceholder), the name a DNS lookup failed
// on and the names in a certificate error become HostPlaceholder, and IP
// addresses (with their ports) become AddressPlaceholder. The request's
// method and path stay: "GET https://ghe.corp/api/v3/repos/a/b: 502" reads
// "GET /api/v3/repos/a/b: 502".
func Hosts(s string) string {
	if m := urlStart.FindAllStringIndex(s, -1); m != nil {
		var b strings.Builder
		at := 0
		for _, u := range m {
			b.WriteString(s[at:u[0]])
			if u[1] == len(s) || strings.IndexByte("/?#", s[u[1]]) < 0 {
				b.WriteString(HostPlaceholder) // nothing of the URL would be left
			}
			at = u[1]
		}
		s = b.String() + s[at:]
	}
	s = dnsName.ReplaceAllString(s, "lookup "+HostPlaceholder)
	s = certNames.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(m, "but wanted") {
			return "but wanted to match " + HostPlaceholder
		}
		return "certificate is not valid for " + HostPlaceholder
	})
	return ipAddress.ReplaceAllString(s, AddressPlaceholder)
}
