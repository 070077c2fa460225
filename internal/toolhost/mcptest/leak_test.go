package mcptest

import (
	"strings"
	"testing"
)

// Every form Encodings prints is a leak Leaked sees, on its own line: the
// tests that use Leaked can fail.
func TestLeakedSeesEveryEncoding(t *testing.T) {
	const secret = "ghp_test0123456789abcdef0123456789abcdef"
	lines := strings.Split(Encodings(secret), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "wrapped") { // the wrapped blob is on the lines that follow
			for i+1 < len(lines) && !strings.Contains(lines[i+1], ": ") {
				i++
				line += "\n" + lines[i]
			}
		}
		if Leaked(line, secret) == "" {
			t.Errorf("Leaked misses %q", line)
		}
	}
	if w := Leaked("nothing to see: ghp_test0123 [REDACTED]", secret); w != "" {
		t.Errorf("Leaked(clean) = %q", w)
	}
}
