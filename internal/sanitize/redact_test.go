package sanitize

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// Secrets of no known shape, so only the configured-secret matching can
// find them.
const (
	secret  = "Zq8xR2mN5vB7kL3pW9tY4hJ6cD1fG0sQ" // 32 letters and digits
	special = "p@ss/w0rd!with%signs&more"        // URL encoding changes it
	short   = "hunter22"                         // shorter than FragmentLen
)

// carried are the characters of a base64 text that carry any bit of the
// len bytes starting at byte off: what must not survive in a run of
// FragmentLen.
func carried(enc string, off, n int) string {
	first := 8 * off / 6
	last := min((8*(off+n)+5)/6, len(enc))
	return enc[first:last]
}

// leaked reports a run of FragmentLen characters of form (folded) in out
// (folded), or whole form when it is shorter.
func leaked(out, form string) string {
	o, f := fold(out), fold(form)
	n := min(FragmentLen, len(f))
	for i := 0; i+n <= len(f); i++ {
		if strings.Contains(o, f[i:i+n]) {
			return f[i : i+n]
		}
	}
	return ""
}

func TestRedactorFindsEveryForm(t *testing.T) {
	r := NewRedactor([]string{secret, special, short, "", "abc"})
	spaced := strings.Join(strings.Split(secret, ""), " ")
	blob := func(off int, enc *base64.Encoding) (string, string) {
		b := enc.EncodeToString([]byte(strings.Repeat("x", off) + secret + " and more data after it"))
		return b, carried(b, off, len(secret))
	}
	type tc struct{ name, in, form string }
	cases := []tc{
		{"plain", "token=" + secret + ";", secret},
		{"upper-cased", strings.ToUpper(secret), secret},
		{"lower-cased", strings.ToLower(secret), secret},
		{"less its last character", "x " + secret[:len(secret)-1] + " y", secret[:len(secret)-1]},
		{"less its first character", secret[1:], secret[1:]},
		{"a 12-character middle", "…" + secret[10:22] + "…", secret[10:22]},
		{"spaced", spaced, secret},
		{"dashed", strings.Join(strings.Split(secret, ""), "-"), secret},
		{"in quoted pieces", fmt.Sprintf("%q", []string{secret[:8], secret[8:16], secret[16:24], secret[24:]}), secret},
		{"over line breaks", secret[:10] + "\n" + secret[10:20] + "\r\n" + secret[20:], secret},
		{"with invisible characters", strings.Join(strings.Split(secret, ""), "\u200b"), secret},
		{"hex", hex.EncodeToString([]byte(secret)), hex.EncodeToString([]byte(secret))},
		{"HEX", strings.ToUpper(hex.EncodeToString([]byte(secret))), hex.EncodeToString([]byte(secret))},
		{"percent-encoded bytes", pctAll(secret), hex.EncodeToString([]byte(secret))},
		{"base64", base64.StdEncoding.EncodeToString([]byte(secret)), base64.RawStdEncoding.EncodeToString([]byte(secret))},
		{"base64url unpadded", base64.RawURLEncoding.EncodeToString([]byte(secret)), base64.RawURLEncoding.EncodeToString([]byte(secret))},
		{"base64 of it and a newline", base64.StdEncoding.EncodeToString([]byte(secret + "\n")), carried(base64.StdEncoding.EncodeToString([]byte(secret+"\n")), 0, len(secret))},
		{"URL-encoded", "?p=" + url.QueryEscape(special), url.QueryEscape(special)},
		{"path-escaped", "/" + url.PathEscape(special), url.PathEscape(special)},
		{"short secret whole", "pw " + short + " and " + strings.ToUpper(short), short},
	}
	for off := range 3 {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			b, form := blob(off, enc)
			cases = append(cases, tc{fmt.Sprintf("inside base64 at offset %d", off), b, form})
			wrapped := ""
			for i := 0; i < len(b); i += 20 {
				wrapped += b[i:min(i+20, len(b))] + "\n"
			}
			cases = append(cases, tc{fmt.Sprintf("inside wrapped base64 at offset %d", off), wrapped, form})
		}
	}
	for _, c := range cases {
		out := r.Redact(c.in)
		if w := leaked(out, c.form); w != "" || !strings.Contains(out, Redacted) {
			t.Errorf("%s: %q\n → %q still holds %q", c.name, c.in, out, w)
		}
	}
}

func pctAll(s string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

func TestRedactorKeepsWhatIsNoSecret(t *testing.T) {
	r := NewRedactor([]string{secret, short, "ab"})
	for _, in := range []string{
		"",
		"nothing here",
		"ab is too short to be a secret",
		secret[:FragmentLen-1] + " is less than a fragment",
		"hunter2 is not the short secret",
		strings.Repeat("x", 1000),
		"func main() { fmt.Println(\"hello\") }",
	} {
		if got := r.Redact(in); got != in {
			t.Errorf("Redact(%q) = %q, want it unchanged", in, got)
		}
	}
	if got := NewRedactor(nil).Redact("x " + secret); got != "x "+secret {
		t.Errorf("with no secrets: %q", got)
	}
}

func TestRedactorReplacesEachStretchOnce(t *testing.T) {
	r := NewRedactor([]string{secret, "sk-live", "sk-live-abcdef"})
	cases := map[string]string{
		"a " + secret + " b " + secret:       "a [REDACTED] b [REDACTED]",
		secret + secret:                      "[REDACTED]",
		"key=sk-live-abcdef;":                "key=[REDACTED];",
		"prefix sk-live only":                "prefix [REDACTED] only",
		"x " + secret[:20] + secret[8:] + "": "x [REDACTED]",
	}
	for in, want := range cases {
		if got := r.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// A secret with too few letters and digits to be folded is still matched
// as written.
func TestRedactorPunctuationSecret(t *testing.T) {
	r := NewRedactor([]string{"!@#$%^&*a1"})
	if got := r.Redact("pw=!@#$%^&*a1."); got != "pw=[REDACTED]." {
		t.Errorf("got %q", got)
	}
	if got := r.Redact("a1 and !@#"); got != "a1 and !@#" {
		t.Errorf("got %q", got)
	}
}

func TestShapesAreRedactedWhateverTheirValue(t *testing.T) {
	r := NewRedactor(nil)
	const b36 = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
	for _, in := range []string{
		"ghp_" + b36, "gho_" + b36, "ghu_" + b36, "ghs_" + b36, "ghr_" + b36,
		"GHP_" + strings.ToUpper(b36),
		"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456",
		"glpat-" + b36[:20], "glpat-" + b36[:27] + ".01.0r03gxo7a", "gldt-" + b36[:20], "glrt-" + b36[:20],
		"glcbt-" + b36[:24], "glptt-" + b36[:24], "glft-" + b36[:20], "GR1348941" + b36[:20],
		"sk-" + b36 + "ABCDEFGHIJKL", "sk-proj-" + b36 + "_" + b36 + "-" + b36, "sk-ant-api03-" + b36 + b36 + "AA",
		"sk_live_" + b36[:24], "npm_" + b36, "hf_" + b36[:34], "pypi-AgEIcHlwaS5vcmc" + b36 + b36,
		"AKIAIOSFODNN7EXAMPLE", "ASIA" + strings.ToUpper(b36[:16]),
		"AIzaSyA" + b36[:32], "xoxb-1234567890-abcdefghij",
		"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
	} {
		for _, wrap := range []string{"%s", "token: %s\n", `{"key":"%s"}`, "export X=%s"} {
			text := fmt.Sprintf(wrap, in)
			if got := r.Redact(text); strings.Contains(got, in) || !strings.Contains(got, Redacted) {
				t.Errorf("Redact(%q) = %q", text, got)
			}
		}
	}
	pem := "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQAAACB\n-----END OPENSSH PRIVATE KEY-----\ndone"
	if got := r.Redact(pem); got != "key:\n[REDACTED]\ndone" {
		t.Errorf("PEM block: %q", got)
	}
	if got := r.Redact("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA"); got != Redacted {
		t.Errorf("cut PEM block: %q", got)
	}
	headers := map[string]string{
		"> Authorization: Bearer abc.def-123\n":                  "> Authorization: Bearer [REDACTED]\n",
		"PRIVATE-TOKEN: 9koXpg98eAheJpvBs5tK\n":                  "PRIVATE-TOKEN: [REDACTED]\n",
		`"authorization": "token 0123456789abcdef"`:              `"authorization": "token [REDACTED]"`,
		"GET /api/v4/projects?private_token=x9koXpg98eAheJ1abcd": "GET /api/v4/projects?private_token=[REDACTED]",
	}
	for in, want := range headers {
		if got := r.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// Words and code that begin like a credential are left alone.
func TestShapesLeaveLookalikes(t *testing.T) {
	r := NewRedactor(nil)
	for _, in := range []string{
		"ghp_short", "the ghp_ prefix", "github_pat_", "glpat-short",
		"task-management-framework-version-two-and-three",
		"sk-learn-linear-models-tutorial-for-beginners-2024",
		"AKIA1234", "akiaiosfodnn7example", "AKIAIOSFODNN7EXAMPLEX",
		"authorization: options.authorization,",
		"authorization: str = Header(None)",
		"access_token = get_access_token_from_env()",
		`headers["Authorization"] = f"Bearer {token}"`,
		"Authorization: Bearer ${TOKEN}",
		"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
		"eyJ is how a JWT starts",
		"hf_hub_download(repo_id)",
		"npm_config_cache",
	} {
		if got := r.Redact(in); got != in {
			t.Errorf("Redact(%q) = %q, want it unchanged", in, got)
		}
	}
}

func TestBase64CoreIsInsideEveryEncoding(t *testing.T) {
	for off := range 3 {
		for _, n := range []int{4, 5, 6, 30, 31, 32} {
			s := secret[:n]
			core := base64Core([]byte(s), off)
			for _, pre := range []string{"", "a", "ab", "abc", "abcd"} {
				if len(pre)%3 != off {
					continue
				}
				for _, post := range []string{"", "z", "zz", "zzz"} {
					enc := base64.StdEncoding.EncodeToString([]byte(pre + s + post))
					if !strings.Contains(enc, core) {
						t.Errorf("offset %d, %d bytes, %q…%q: core %q not in %q", off, n, pre, post, core, enc)
					}
				}
			}
		}
	}
}

var sink string

// BenchmarkRedact100KB: a 100 KB tool result (source code) with three
// configured secrets, clean and with a secret in the middle.
func BenchmarkRedact100KB(b *testing.B) {
	r := NewRedactor([]string{"ghp_Zq8xR2mN5vB7kL3pW9tY4hJ6cD1fG0sQ7uE", "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12Wx34",
		secret})
	line := "\tif err := json.Unmarshal(data, &v); err != nil { return fmt.Errorf(\"decoding %s: %w\", name, err) }\n"
	clean := strings.Repeat(line, 100<<10/len(line))
	dirty := clean[:len(clean)/2] + base64.StdEncoding.EncodeToString([]byte(secret)) + clean[len(clean)/2:]
	for _, c := range []struct{ name, text string }{{"clean", clean}, {"one-secret", dirty}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			b.ReportAllocs()
			for b.Loop() {
				sink = r.Redact(c.text)
			}
		})
	}
}

func TestHoldsIsWhetherRedactChangesTheText(t *testing.T) {
	r := NewRedactor([]string{"hunter2-correct-horse"})
	for s, want := range map[string]bool{
		"nothing here":                          false,
		"key: hunter2-correct-horse":            true,
		"h u n t e r 2 c o r r e c t h o r s e": true,
		"ghp_" + strings.Repeat("aB3", 12):      true,
	} {
		if got := r.Holds(s); got != want {
			t.Errorf("Holds(%q) = %v, want %v", s, got, want)
		}
	}
}
