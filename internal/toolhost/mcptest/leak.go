package mcptest

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
)

// leakRun is how many letters and digits in a row of a secret's form count
// as a leak.
const leakRun = 12

// Leaked returns a run of leakRun letters and digits of one of the forms of
// secret that Encodings prints (the secret itself, its hex, its URL
// encoding, the base64 characters that carry only its bits at each offset),
// found in text with case and everything but letters and digits ignored;
// "" when there is none.
func Leaked(text, secret string) string {
	forms := []string{secret, hex.EncodeToString([]byte(secret)), url.QueryEscape(secret)}
	for off := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, off), secret...))
		forms = append(forms, enc[(8*off+5)/6:8*(off+len(secret))/6])
	}
	t := letters(text)
	for _, f := range forms {
		f = letters(f)
		for i := 0; i+leakRun <= len(f); i++ {
			if strings.Contains(t, f[i:i+leakRun]) {
				return f[i : i+leakRun]
			}
		}
	}
	return ""
}

// letters keeps the ASCII letters (lower-cased) and digits of s.
func letters(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}
