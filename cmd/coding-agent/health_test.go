package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// --version (and -version) print what the version command prints.
func TestVersionFlag(t *testing.T) {
	_, want, _ := cli(t, "version")
	for _, arg := range []string{"--version", "-version"} {
		code, stdout, stderr := cli(t, arg)
		if code != exitOK || stdout != want || stderr != "" {
			t.Errorf("%s: exit code %d, stdout %q, stderr %q; want %d and %q", arg, code, stdout, stderr, exitOK, want)
		}
	}
	if !regexp.MustCompile(`^coding-agent \S+ \(commit \S+, go1\.\d+`).MatchString(want) {
		t.Errorf("version prints %q", want)
	}
}

// health asks GET /healthz of the listener server.listen names: 0 when it
// answers 200, else 1 saying what it got; a config without a listener, or
// with a port the probe cannot know, is 1 saying why. It needs no token in
// the environment: only the server section is read.
func TestHealth(t *testing.T) {
	var status int
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.Path)
		w.WriteHeader(status)
		_, _ = w.Write([]byte("body of the answer"))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	// A config whose secrets are unset: health needs none of them.
	cfg := func(listen string) string {
		return writeFile(t, t.TempDir(), "task_source: github\ngithub:\n  token: ${HEALTH_TEST_UNSET_TOKEN}\n  repositories: [acme/app]\n"+
			"llm:\n  provider: openai\n  openai:\n    api_key: ${HEALTH_TEST_UNSET_KEY}\n    model: gpt-4o\n"+listen)
	}
	for _, tc := range []struct {
		name, listen string
		status, code int
		out          string // in stdout (ok) or stderr (not)
	}{
		{"ok", "server:\n  listen: 127.0.0.1:" + port + "\n", 200, exitOK, "ok"},
		{"every address", "server:\n  listen: 0.0.0.0:" + port + "\n", 200, exitOK, "ok"},
		{"no host", "server:\n  listen: :" + port + "\n", 200, exitOK, "ok"},
		{"unhealthy", "server:\n  listen: 127.0.0.1:" + port + "\n", 503, exitFailure, "answered 503"},
		{"no listener", "", 200, exitFailure, "server.listen is not set"},
		{"any port", "server:\n  listen: 127.0.0.1:0\n", 200, exitFailure, "port 0"},
	} {
		status, paths = tc.status, nil
		code, stdout, stderr := cli(t, "health", "--config", cfg(tc.listen))
		got := stdout
		if tc.code != exitOK {
			got = stderr
		}
		if code != tc.code || !strings.Contains(got, tc.out) {
			t.Errorf("%s: exit code %d, stdout %q, stderr %q; want %d and %q", tc.name, code, stdout, stderr, tc.code, tc.out)
		}
		if tc.code == exitOK && (len(paths) != 1 || paths[0] != "GET /healthz") {
			t.Errorf("%s: the probe asked %q, want GET /healthz once", tc.name, paths)
		}
	}
	// Nothing listening: 1, naming the address.
	srv.Close()
	code, _, stderr := cli(t, "health", "--config", cfg("server:\n  listen: 127.0.0.1:"+port+"\n"))
	if code != exitFailure || !strings.Contains(stderr, "127.0.0.1:"+port) {
		t.Errorf("nothing listening: exit code %d, stderr %q", code, stderr)
	}
	// A problem in the server section is the config's: 2.
	code, _, stderr = cli(t, "health", "--config", cfg("server:\n  listen: nowhere\n"))
	if code != exitUsage || !strings.Contains(stderr, "server.listen") {
		t.Errorf("a bad server.listen: exit code %d, stderr %q", code, stderr)
	}
}
