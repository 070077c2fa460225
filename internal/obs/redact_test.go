package obs

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const (
	token  = "ghp_S3cr3tT0k3n"
	apiKey = "sk-live-abcdef"
)

type secretHolder struct {
	Name  string
	Token string
}

type lazy struct{}

func (lazy) LogValue() slog.Value { return slog.StringValue("resolved " + token) }

type stringer struct{}

func (stringer) String() string { return "stringer " + apiKey }

func TestRedactHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewRedactHandler(slog.NewJSONHandler(&buf, nil), []string{token, apiKey}))

	log.Info("posting with "+token, "header", "Bearer "+token, "n", 3)
	log.Info("group", slog.Group("req", slog.String("auth", token), slog.Group("inner", "key", apiKey)))
	log.Error("failed", "err", fmt.Errorf("calling api with %s: %w", apiKey, errors.New("401")))
	log.Info("any", "holder", secretHolder{Name: "x", Token: token}, "ptr", &secretHolder{Token: apiKey},
		"lazy", lazy{}, "str", stringer{}, "bytes", []byte("raw "+token))
	log.With("token", token).WithGroup("g").With("key", apiKey).Info("with", "more", token)
	log.WithGroup("outer").Info("nested", slog.Group("x", "err", errors.New("boom "+token)))

	out := buf.String()
	if strings.Contains(out, token) || strings.Contains(out, apiKey) {
		t.Fatalf("secret in output:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 {
		t.Fatalf("got %d lines, want 6:\n%s", len(lines), out)
	}
	// The redacted text stays where the secret was; other values keep their type.
	wantIn := []string{
		`"msg":"posting with [REDACTED]","header":"Bearer [REDACTED]","n":3`,
		`"req":{"auth":"[REDACTED]","inner":{"key":"[REDACTED]"}}`,
		`"err":"calling api with [REDACTED]: 401"`,
		`"lazy":"resolved [REDACTED]","str":"stringer [REDACTED]","bytes":"raw [REDACTED]"`,
		`"token":"[REDACTED]","g":{"key":"[REDACTED]","more":"[REDACTED]"}`,
		`"outer":{"x":{"err":"boom [REDACTED]"}}`,
	}
	for i, want := range wantIn {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s\nwant it to contain %s", i+1, lines[i], want)
		}
	}
	if !strings.Contains(lines[3], `"holder":"{Name:x Token:[REDACTED]}"`) {
		t.Errorf("struct holding a secret not redacted as text: %s", lines[3])
	}
}

func TestRedactHandlerKeepsCleanValues(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewRedactHandler(slog.NewJSONHandler(&buf, nil), []string{token}))
	log.Info("clean", "holder", secretHolder{Name: "x", Token: "none"}, "err", errors.New("plain"))
	want := `"holder":{"Name":"x","Token":"none"},"err":"plain"`
	if !strings.Contains(buf.String(), want) {
		t.Errorf("output %s\nwant it to contain %s", buf.String(), want)
	}
}
