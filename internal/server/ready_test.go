package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/server"
)

func hmacHex(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

func TestReadiness(t *testing.T) {
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	ok := func(context.Context) error { return nil }
	for _, c := range []struct {
		name  string
		store func(context.Context) error
		seen  time.Time
		want  string // "" ready
	}{
		{"ready", ok, now.Add(-50 * time.Second), ""},
		{"store gone", func(context.Context) error { return errors.New("sql: database is closed") }, now, "the state store cannot be read: sql: database is closed"},
		{"forge never answered", ok, time.Time{}, "the forge has not answered yet"},
		{"forge answered too long ago", ok, now.Add(-2 * time.Minute), "the forge last answered 2m0s ago, longer than 1m30s"},
	} {
		r := server.Readiness{Store: c.store, ForgeSeen: func() time.Time { return c.seen }, Within: 90 * time.Second,
			Now: func() time.Time { return now }}
		err := r.Check(context.Background())
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
