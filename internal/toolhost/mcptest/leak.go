package mcptest

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// leakRun is how many letters and digits in a row of a secret's form count
// as a leak.
const leakRun = 12

// Leaked returns a run of leakRun letters and digits of one of the forms of
// secret that Encodings prints (the secret itself, its hex, its URL
// encoding, the base64 characters that carry only its bits at each offset,
// the base32 ones in both alphabets), found in text with its JSON \u
// escapes and HTML numeric references decoded, and case and everything but
// letters and digits ignored; "" when there is none.
func Leaked(text, secret string) string {
	forms := []string{secret, hex.EncodeToString([]byte(secret)), url.QueryEscape(secret)}
	for off := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, off), secret...))
		forms = append(forms, enc[(8*off+5)/6:8*(off+len(secret))/6])
	}
	for off := range 5 {
		for _, alphabet := range []*base32.Encoding{base32.StdEncoding, base32.HexEncoding} {
			enc := alphabet.EncodeToString(append(make([]byte, off), secret...))
			forms = append(forms, enc[(8*off+4)/5:8*(off+len(secret))/5])
		}
	}
	t := letters(unescaped(text))
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

var (
	jsonEscape = regexp.MustCompile(`\\u[0-9a-fA-F]{4}`)
	htmlRef    = regexp.MustCompile(`&#([xX][0-9a-fA-F]+|[0-9]+);?`)
)

// unescaped is text with its JSON \u escapes, then its HTML numeric
// references, replaced by the characters they stand for.
func unescaped(text string) string {
	text = jsonEscape.ReplaceAllStringFunc(text, func(e string) string {
		v, _ := strconv.ParseUint(e[2:], 16, 32)
		return string(rune(v))
	})
	return htmlRef.ReplaceAllStringFunc(text, func(e string) string {
		digits, base := strings.TrimSuffix(e[2:], ";"), 10
		if digits[0] == 'x' || digits[0] == 'X' {
			digits, base = digits[1:], 16
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return e
		}
		return string(rune(v))
	})
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
