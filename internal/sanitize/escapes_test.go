package sanitize

import (
	"encoding/base32"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// jsonEscaped writes every byte of s for which keep is false as a JSON
// \u escape (lower- or upper-case hex), the others as they are.
func jsonEscaped(s string, upperHex bool, keep func(i int) bool) string {
	var b strings.Builder
	for i := range len(s) {
		switch {
		case keep(i):
			b.WriteByte(s[i])
		case upperHex:
			fmt.Fprintf(&b, `\u%04X`, s[i])
		default:
			fmt.Fprintf(&b, `\u%04x`, s[i])
		}
	}
	return b.String()
}

// entities writes every byte of s for which keep is false as an HTML
// numeric character reference made by ref.
func entities(s string, ref func(c byte) string, keep func(i int) bool) string {
	var b strings.Builder
	for i := range len(s) {
		if keep(i) {
			b.WriteByte(s[i])
		} else {
			b.WriteString(ref(s[i]))
		}
	}
	return b.String()
}

func none(int) bool         { return false }
func everyOther(i int) bool { return i%2 == 1 }
func everyThird(i int) bool { return i%3 != 0 }

// base32Carried is the part of a base32 text that carries bits of the n
// bytes from byte off: what must not survive in a run of FragmentLen.
func base32Carried(enc string, off, n int) string {
	first := 8 * off / 5
	last := min((8*(off+n)+4)/5, len(enc))
	return enc[first:last]
}

// A configured secret written in base32 (both alphabets, padded or not,
// alone or at any byte offset inside longer data, wrapped), as JSON \u
// escapes (every character or mixed with plain ones) or as HTML numeric
// character references (decimal and hex, with or without the semicolon,
// mixed with plain characters) is redacted like its other forms.
func TestRedactorFindsEscapedAndBase32Forms(t *testing.T) {
	r := NewRedactor([]string{secret, special})
	type tc struct{ name, in, form string }
	cases := []tc{
		{"JSON escapes", jsonEscaped(secret, false, none), secret},
		{"JSON escapes, upper-case hex", jsonEscaped(secret, true, none), secret},
		{"JSON escapes mixed with plain characters", jsonEscaped(secret, false, everyOther), secret},
		{"JSON escapes every third character", `{"key": "` + jsonEscaped(secret, false, everyThird) + `"}`, secret},
		{"JSON escapes of a secret with punctuation", jsonEscaped(special, false, none), special},
		{"decimal entities", entities(secret, func(c byte) string { return fmt.Sprintf("&#%d;", c) }, none), secret},
		{"hex entities", entities(secret, func(c byte) string { return fmt.Sprintf("&#x%x;", c) }, none), secret},
		{"upper-case hex entities", entities(secret, func(c byte) string { return fmt.Sprintf("&#X%X;", c) }, none), secret},
		{"zero-padded entities", entities(secret, func(c byte) string { return fmt.Sprintf("&#000%d;", c) }, none), secret},
		{"entities without semicolons", entities(secret, func(c byte) string { return fmt.Sprintf("&#%d", c) }, none) + " end", secret},
		{"entities mixed with plain characters", "<p>" + entities(secret, func(c byte) string { return fmt.Sprintf("&#%d;", c) }, everyOther) + "</p>", secret},
		{"hex entities mixed with plain characters", entities(secret, func(c byte) string { return fmt.Sprintf("&#x%x;", c) }, everyThird), secret},
		{"named entities in a secret with punctuation", strings.NewReplacer("&", "&amp;").Replace(special), special},
		{"JSON escapes and entities together", jsonEscaped(secret[:16], false, everyOther) + entities(secret[16:], func(c byte) string { return fmt.Sprintf("&#%d;", c) }, everyThird), secret},
	}
	encodings := map[string]*base32.Encoding{
		"base32": base32.StdEncoding, "base32 unpadded": base32.StdEncoding.WithPadding(base32.NoPadding),
		"base32hex": base32.HexEncoding, "base32hex unpadded": base32.HexEncoding.WithPadding(base32.NoPadding),
	}
	for name, enc := range encodings {
		whole := enc.EncodeToString([]byte(secret))
		cases = append(cases, tc{name, whole, base32Carried(whole, 0, len(secret))},
			tc{name + " lower-cased", strings.ToLower(whole), base32Carried(whole, 0, len(secret))})
		for off := range 5 {
			b := enc.EncodeToString([]byte(strings.Repeat("x", off) + secret + " and more data after it"))
			cases = append(cases, tc{fmt.Sprintf("%s inside data at offset %d", name, off), b, base32Carried(b, off, len(secret))})
			wrapped := ""
			for i := 0; i < len(b); i += 16 {
				wrapped += b[i:min(i+16, len(b))] + "\n"
			}
			cases = append(cases, tc{fmt.Sprintf("%s wrapped at offset %d", name, off), wrapped, base32Carried(b, off, len(secret))})
		}
	}
	for _, c := range cases {
		out := r.Redact(c.in)
		if w := leaked(decodeEscapes(out), c.form); w != "" || !strings.Contains(out, Redacted) {
			t.Errorf("%s: %q\n → %q still holds %q", c.name, c.in, out, w)
		}
	}
}

// decodeEscapes is what a reader makes of the escapes the redactor reads
// (a test's own decoder, independent of the redactor's): JSON \u escapes
// and HTML numeric references of ASCII characters become the characters.
func decodeEscapes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		var v, n int
		switch {
		case strings.HasPrefix(s[i:], `\u`) && len(s) >= i+6:
			if _, err := fmt.Sscanf(s[i+2:i+6], "%04x", &v); err == nil {
				n = 6
			}
		case strings.HasPrefix(strings.ToLower(s[i:]), "&#x"):
			j := i + 3
			for j < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[j]) >= 0 {
				j++
			}
			if _, err := fmt.Sscanf(s[i+3:j], "%x", &v); err == nil {
				n = j - i
			}
		case strings.HasPrefix(s[i:], "&#"):
			j := i + 2
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if _, err := fmt.Sscanf(s[i+2:j], "%d", &v); err == nil {
				n = j - i
			}
		}
		if n == 0 || v >= 0x80 {
			b.WriteByte(s[i])
			continue
		}
		if i+n < len(s) && s[i+n] == ';' && s[i] == '&' {
			n++
		}
		b.WriteByte(byte(v))
		i += n - 1
	}
	return b.String()
}

// Ordinary text is not touched by the new forms: source code (this
// package's and the config package's own, tests aside), JSON and HTML full of escapes
// of other text, and words that look like base32, with secrets configured.
func TestRedactorKeepsOrdinaryTextWithEscapes(t *testing.T) {
	r := NewRedactor([]string{secret, special, short, "ghp_Zq8xR2mN5vB7kL3pW9tY4hJ6cD1fG0sQ7uE"})
	texts := []string{
		`{"msg": "caf\u00e9 \u003cb\u003ebold\u003c/b\u003e \u0026 more", "path": "C:\\Users\\me"}`,
		"<p>Tom &amp; Jerry &lt;3 &#169; 2026 &#x2014; &nbsp;&#8212;&#160;</p>",
		"MFRGGZDFMZTWQ2LKNNWG23TPOBYXE43UOV3HO6DZPI====== is the base32 of the alphabet",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567 0123456789ABCDEFGHIJKLMNOPQRSTUV",
		"JBSWY3DPEBLW64TMMQ QUICKBROWNFOXJUMPSOVERTHELAZYDOG2345",
		`printf("\u%04x", c); s.replace("&#", "&amp;#"); "\u12" "&#;" "&#x;" "&#xZZ;"`,
	}
	for _, dir := range []string{".", "../config"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("listing %s: %v", dir, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(f, "_test.go") { // the tests hold secrets and tokens on purpose
				texts = append(texts, string(b))
			}
		}
	}
	for _, in := range texts {
		if got := r.Redact(in); got != in {
			t.Errorf("Redact changed ordinary text:\n%s\nto\n%s", head(in), head(got))
		}
	}
}

func head(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func TestBase32CoreIsInsideEveryEncoding(t *testing.T) {
	for _, enc := range []*base32.Encoding{base32.StdEncoding, base32.HexEncoding} {
		for off := range 5 {
			for _, n := range []int{4, 5, 6, 7, 8, 9, 30, 31, 32} {
				s := secret[:n]
				core := base32Core([]byte(s), off, enc)
				for _, post := range []string{"", "z", "zz", "zzz", "zzzz"} {
					pre := strings.Repeat("a", off+5)
					e := enc.EncodeToString([]byte(pre + s + post))
					if !strings.Contains(e, core) {
						t.Errorf("offset %d, %d bytes, %q: core %q not in %q", off, n, post, core, e)
					}
				}
			}
		}
	}
}
