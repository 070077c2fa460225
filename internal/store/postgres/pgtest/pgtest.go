// Package pgtest gives tests a PostgreSQL database of their own: a fresh
// schema on the test server, dropped when the test ends.
//
// The server is CODING_AGENT_TEST_POSTGRES (a postgres:// URL), or the
// development and CI machines' local one. Without a reachable server the
// tests skip, saying how to run them; in CI (CI set, as .ci/run does) or
// with the variable set they fail instead.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// URLEnv names the PostgreSQL server the tests run against: a
// postgres:// URL of a database the tests may create schemas in.
const URLEnv = "CODING_AGENT_TEST_POSTGRES"

// defaultTestURL is the local server of the development and CI machines.
const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// serverURL returns the test server's URL. An unreachable server skips the
// test, unless the server is required: CI is set (.ci/run sets it), or
// URLEnv names one explicitly. Then it fails the test.
func serverURL(t testing.TB) string {
	t.Helper()
	raw := os.Getenv(URLEnv)
	required := raw != "" || os.Getenv("CI") != ""
	if raw == "" {
		raw = defaultTestURL
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, raw)
	if err == nil {
		conn.Close(ctx)
		return raw
	}
	shown := "the URL in " + URLEnv
	if u, perr := url.Parse(raw); perr == nil {
		shown = u.Redacted()
	}
	msg := "PostgreSQL at " + shown + " is not reachable (" + err.Error() + "). To run the PostgreSQL store tests, " +
		"start a server that trusts local connections and has a database test (on Debian: " +
		"pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start; createdb -U postgres test), " +
		"or set " + URLEnv + " to the postgres:// URL of a database the tests may create schemas in"
	if required {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Schema creates an empty schema on the test server, dropped with
// everything in it when the test ends, and returns a URL whose connections
// use only that schema: each test sees its own tables, even in parallel.
func Schema(t testing.TB) string {
	t.Helper()
	base := serverURL(t)
	b := make([]byte, 8)
	rand.Read(b)
	schema := "storetest_" + hex.EncodeToString(b)
	conn, err := pgx.Connect(t.Context(), base)
	if err != nil {
		t.Fatalf("connecting to the test server: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("creating schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("connecting to drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		// IF EXISTS: a test may have dropped it under its store.
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s is not a URL: %v", URLEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Database creates an empty database on the test server, dropped when the
// test ends (whatever still uses it), and returns its URL: for a test that
// drops a whole database under its store. The server's user must be
// allowed to create databases.
func Database(t testing.TB) string {
	t.Helper()
	base := serverURL(t)
	b := make([]byte, 8)
	rand.Read(b)
	name := "storetest_" + hex.EncodeToString(b)
	admin := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := admin(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s is not a URL: %v", URLEnv, err)
	}
	u.Path = "/" + name
	return u.String()
}

// Drop runs sql (a DROP SCHEMA or DROP DATABASE) on the test server, as
// another process would under a running store. It may be called from any
// goroutine (a scripted server's handler) once the test has made its
// schema or database: it returns its error instead of failing the test.
func Drop(ctx context.Context, sql string) error {
	raw := os.Getenv(URLEnv)
	if raw == "" {
		raw = defaultTestURL
	}
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		return fmt.Errorf("connecting to the test server: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}
