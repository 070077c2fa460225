package sanitize

import "strings"

// A shape is a kind of credential known by its look, redacted whatever its
// value: a token of ours that the redactor was not told of, or someone
// else's that a tool printed.
type shape struct {
	// prefix starts the credential at the start of a word; its case does
	// not matter unless exactCase.
	prefix    string
	exactCase bool
	// tail reads the rest from j, just past the prefix (which begins at i),
	// and returns the range to redact, or end < 0 when it is no credential.
	tail func(s string, i, j int) (start, end int)
}

// shapes are the credentials redacted by their look. Each is documented by
// its issuer's token format; the lengths are the shortest real tokens
// have, so a word that merely begins the same way is left alone.
var shapes = func() []shape {
	var out []shape
	add := func(tail func(string, int, int) (int, int), exactCase bool, prefixes ...string) {
		for _, p := range prefixes {
			out = append(out, shape{prefix: p, exactCase: exactCase, tail: tail})
		}
	}
	// GitHub: personal (classic), OAuth, user-to-server, installation and
	// refresh tokens (prefix_ and 36 letters and digits), and fine-grained
	// personal tokens (github_pat_ and 82 of letters, digits and _).
	add(body(isAlnum, 30, ""), false, "ghp_", "gho_", "ghu_", "ghs_", "ghr_")
	add(body(isWordByte, 22, ""), false, "github_pat_")
	// GitLab's documented token prefixes (personal, project and group
	// access, OAuth secret, deploy, runner, CI job, trigger, feed, incoming
	// mail, agent, SCIM, feature flags) and the runner registration token;
	// newer tokens carry dots (glpat-xxxx.01.yyyy).
	add(body(isGitLabByte, 20, ".-"), false, "glpat-", "gloas-", "gldt-", "glrt-", "glrtr-", "glcbt-", "glptt-",
		"glft-", "glimt-", "glagent-", "glsoat-", "glffct-", "gr1348941")
	// OpenAI (sk-, sk-proj-, sk-svcacct-, sk-admin-) and Anthropic
	// (sk-ant-) keys: long, with digits, and random rather than words.
	add(openAIKey, false, "sk-")
	// Stripe secret and restricted keys; npm and Hugging Face tokens; PyPI
	// upload tokens (a macaroon, always "pypi-AgE...").
	add(body(isAlnum, 20, ""), false, "sk_live_", "sk_test_", "rk_live_", "rk_test_")
	add(body(isAlnum, 36, ""), false, "npm_")
	add(body(isAlnum, 30, ""), false, "hf_")
	add(body(isTokenByte, 50, ""), true, "pypi-AgE")
	// AWS access key ids: four capitals and 16 capitals or digits.
	add(exactly(isUpperAlnum, 16), true, "AKIA", "ASIA", "ABIA", "ACCA")
	// Google API keys: AIza and 35 characters.
	add(exactly(isTokenByte, 35), true, "AIza")
	// Slack tokens.
	add(body(isSlackByte, 10, "-"), false, "xoxa-", "xoxb-", "xoxe-", "xoxp-", "xoxr-", "xoxs-")
	// JSON Web Tokens: bearer credentials of many APIs (GitHub Apps too).
	add(jwt, true, "eyJ")
	// PEM private keys, whole blocks.
	add(pemKey, true, "-----BEGIN ")
	// Credentials in HTTP headers (as curl -v or a debug log prints them)
	// and URL parameters (GitLab's private_token, OAuth's access_token):
	// only the value is redacted.
	add(header, false, "authorization", "proxy-authorization", "private-token", "private_token", "access_token",
		"x-api-key", "api-key", "x-auth-token", "x-gitlab-token")
	return out
}()

// byFirst indexes shapes by the first byte of their prefix, in both cases;
// starts says which bytes begin one.
var byFirst, starts = func() (idx [256][]int, starts [256]bool) {
	for i, sh := range shapes {
		for _, c := range []byte{lower(sh.prefix[0]), upper(sh.prefix[0])} {
			if !starts[c] || idx[c][len(idx[c])-1] != i {
				idx[c] = append(idx[c], i)
			}
			starts[c] = true
		}
	}
	return idx, starts
}()

// wordBytes are the bytes of a word: letters, digits and _.
var wordBytes = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isWordByte(byte(c))
	}
	return t
}()

// shapeSpans appends the ranges of s that hold a credential of a known shape.
func shapeSpans(s string, spans []span) []span {
	for i := 0; i < len(s); i++ {
		if !starts[s[i]] || (i > 0 && wordBytes[s[i-1]]) {
			continue
		}
		for _, k := range byFirst[s[i]] {
			sh := shapes[k]
			if !hasPrefix(s[i:], sh.prefix, sh.exactCase) {
				continue
			}
			if start, end := sh.tail(s, i, i+len(sh.prefix)); end >= 0 {
				spans = append(spans, span{start, end})
				i = end - 1
				break
			}
		}
	}
	return spans
}

func hasPrefix(s, prefix string, exactCase bool) bool {
	if len(s) < len(prefix) {
		return false
	}
	if exactCase {
		return s[:len(prefix)] == prefix
	}
	return strings.EqualFold(s[:len(prefix)], prefix)
}

// body is the tail of a prefix followed by at least n bytes of class, less
// any of the trailing bytes trim (punctuation that may end a sentence).
func body(class func(byte) bool, n int, trim string) func(string, int, int) (int, int) {
	return func(s string, i, j int) (int, int) {
		end := run(s, j, class)
		for end > j && strings.IndexByte(trim, s[end-1]) >= 0 {
			end--
		}
		if end-j < n {
			return 0, -1
		}
		return i, end
	}
}

// exactly is the tail of a prefix followed by n bytes of class, ending there.
func exactly(class func(byte) bool, n int) func(string, int, int) (int, int) {
	return func(s string, i, j int) (int, int) {
		if end := run(s, j, class); end-j == n && (end == len(s) || !isWordByte(s[end])) {
			return i, end
		}
		return 0, -1
	}
}

// openAIKey is the tail of "sk-": at least 32 bytes of letters, digits, _
// and -, holding a digit and a letter, and either both cases or a run of
// 20 letters and digits (a random key has them; a hyphenated slug such as
// sk-learn-linear-models-tutorial does not).
func openAIKey(s string, i, j int) (int, int) {
	end := run(s, j, isTokenByte)
	if end-j < 32 {
		return 0, -1
	}
	var upper, lowerCase, digit bool
	longest, cur := 0, 0
	for k := j; k < end; k++ {
		c := s[k]
		upper = upper || (c >= 'A' && c <= 'Z')
		lowerCase = lowerCase || (c >= 'a' && c <= 'z')
		digit = digit || (c >= '0' && c <= '9')
		if isAlnum(c) {
			cur++
			longest = max(longest, cur)
		} else {
			cur = 0
		}
	}
	if digit && (upper || lowerCase) && ((upper && lowerCase) || longest >= 20) {
		return i, end
	}
	return 0, -1
}

// jwt is the tail of "eyJ": a header and a payload of base64url joined by a
// dot, and the signature after a second dot if there is one.
func jwt(s string, i, j int) (int, int) {
	a := run(s, j, isTokenByte)
	if a-j < 10 || a >= len(s) || s[a] != '.' {
		return 0, -1
	}
	b := run(s, a+1, isTokenByte)
	if b-(a+1) < 10 {
		return 0, -1
	}
	if b < len(s) && s[b] == '.' {
		b = run(s, b+1, isTokenByte)
	}
	return i, b
}

// pemKey is the tail of "-----BEGIN ": a private key's label, then the
// block up to its END line, or the rest of the text when it was cut.
func pemKey(s string, i, j int) (int, int) {
	k := strings.Index(s[j:min(len(s), j+64)], "-----")
	if k < 0 || !strings.HasSuffix(s[j:j+k], "PRIVATE KEY") {
		return 0, -1
	}
	rest := j + k + 5
	e := strings.Index(s[rest:], "-----END ")
	if e < 0 {
		return i, len(s)
	}
	e += rest + len("-----END ")
	if c := strings.Index(s[e:], "-----"); c >= 0 {
		return i, e + c + 5
	}
	return i, len(s)
}

// header is the tail of a header or parameter name: a colon or an equals
// sign (quotes and spaces around it allowed), then the value, which alone
// is redacted. After a scheme (Bearer, Basic, token, Bot) any value of 8
// bytes or more is a credential; without one the value must look random
// (16 bytes or more, letters and digits), so that source code such as
// "authorization: options.authorization" is left alone.
func header(s string, _, j int) (int, int) {
	j = run(s, j, isQuoteOrSpace)
	if j >= len(s) || (s[j] != ':' && s[j] != '=') {
		return 0, -1
	}
	j = run(s, j+1, isQuoteOrSpace)
	scheme := false
	if w := run(s, j, isLetter); w > j && w < len(s) && s[w] == ' ' {
		switch strings.ToLower(s[j:w]) {
		case "bearer", "basic", "token", "bot", "digest":
			scheme = true
			j = run(s, w, isSpace)
		}
	}
	end := run(s, j, isCredByte)
	switch {
	case scheme && end-j >= 8:
	case end-j >= 16 && strings.ContainsAny(s[j:end], "0123456789") && strings.IndexFunc(s[j:end], isLetterRune) >= 0:
	default:
		return 0, -1
	}
	return j, end
}

func isLetterRune(r rune) bool { return r < 0x80 && isLetter(byte(r)) }

// run returns the index of the first byte at or after j not in class.
func run(s string, j int, class func(byte) bool) int {
	for j < len(s) && class(s[j]) {
		j++
	}
	return j
}

func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func isLetter(c byte) bool     { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isAlnum(c byte) bool      { return isLetter(c) || (c >= '0' && c <= '9') }
func isWordByte(c byte) bool   { return isAlnum(c) || c == '_' }
func isTokenByte(c byte) bool  { return isWordByte(c) || c == '-' }
func isGitLabByte(c byte) bool { return isTokenByte(c) || c == '.' }
func isSlackByte(c byte) bool  { return isAlnum(c) || c == '-' }
func isUpperAlnum(c byte) bool { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') }
func isSpace(c byte) bool      { return c == ' ' || c == '\t' }
func isQuoteOrSpace(c byte) bool {
	return isSpace(c) || c == '"' || c == '\''
}

// isCredByte is a byte of a header's credential: base64, base64url, and
// the token68 characters of RFC 9110.
func isCredByte(c byte) bool {
	return isTokenByte(c) || strings.IndexByte(".~+/=", c) >= 0
}
