package forgetest

import (
	"strings"
	"testing"
)

// WantReadableError checks an error a forge adapter returned for a refused
// request: it is there, holds every piece of want, none of bad (the
// client library's raw forms) and does not end in a space. It logs the
// message.
func WantReadableError(t testing.TB, err error, want, bad []string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	t.Logf("%s", msg)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%q lacks %q", msg, w)
		}
	}
	for _, b := range bad {
		if strings.Contains(msg, b) {
			t.Errorf("%q holds %q", msg, b)
		}
	}
	if strings.HasSuffix(msg, " ") {
		t.Errorf("%q ends with a space", msg)
	}
}
