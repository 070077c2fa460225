package toolhost

import (
	"bufio"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// messageLines passes on JSON-RPC lines as they are, the last one also
// without a newline, and skips every other line that is not blank.
func TestMessageLinesSkipWhatIsNotJSONRPC(t *testing.T) {
	in := "Server v2 starting...\n" +
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\r\n" +
		"\n   \n" +
		"42\n" +
		`[{"jsonrpc":"2.0","method":"a"}]` + "\n" +
		`{"jsonrpc":` + "\n" +
		"\x1b[32mready\x1b[0m\n" +
		`{"jsonrpc":"2.0","id":2,"result":{}}`
	var skipped []string
	m := &messageLines{r: bufio.NewReaderSize(strings.NewReader(in), 16), skip: func(b []byte) { skipped = append(skipped, string(b)) }}
	out, err := io.ReadAll(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\r\n" + `[{"jsonrpc":"2.0","method":"a"}]` + "\n" + `{"jsonrpc":"2.0","id":2,"result":{}}`
	if string(out) != want {
		t.Errorf("passed on %q, want %q", out, want)
	}
	if w := []string{"Server v2 starting...", "42", `{"jsonrpc":`, "\x1b[32mready\x1b[0m"}; !slices.Equal(skipped, w) {
		t.Errorf("skipped %q, want %q", skipped, w)
	}
}

// A line longer than the go-sdk would take ends the connection.
func TestMessageLineTooLongIsAnError(t *testing.T) {
	in := strings.NewReader(`{"x":"` + strings.Repeat("a", maxMessageLine) + `"}` + "\n")
	m := &messageLines{r: bufio.NewReader(in), skip: func([]byte) { t.Error("a line was skipped") }}
	if _, err := io.ReadAll(m); !errors.Is(err, errLineTooLong) {
		t.Errorf("err = %v, want errLineTooLong", err)
	}
}
