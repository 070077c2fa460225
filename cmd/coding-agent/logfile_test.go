package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// A logging.file that cannot be written (here a directory) is said by
// config check (exit 2, at the key), and run and serve exit 1 at start
// naming the file and why, before they ask the forge anything: the log is
// never lost without a word.
func TestUnwritableLogFileStopsTheStart(t *testing.T) {
	gh := forgetest.NewGitHub(t)
	gh.Token = token // the config's
	gh.AddRepo("acme/app")
	path := writeConfig(t, configOptions{apiURL: gh.URL(), mcp: fmt.Sprintf("[%q]", mcptest.Build(t))})
	logFile := filepath.Join(filepath.Dir(path), "logs", "agent.log")
	if err := os.MkdirAll(logFile, 0o700); err != nil { // the log file's name taken by a folder
		t.Fatal(err)
	}

	code, stdout, stderr := cli(t, "config", "check", path)
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "logging.file (line ") ||
		!strings.Contains(stderr, "cannot be written: it is a directory") {
		t.Errorf("config check: exit code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, command := range []string{"run", "serve"} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // serve on: cut, and the test fails
		var out, errOut strings.Builder
		code := run(ctx, []string{command, "--config", path}, &out, &errOut)
		cancel()
		if code != exitFailure || !strings.Contains(errOut.String(), "coding-agent "+command+": setting up logging: opening log file "+logFile+": is a directory") {
			t.Errorf("%s: exit code %d, stderr %q; want %d naming the file and why", command, code, errOut.String(), exitFailure)
		}
	}
	if n := len(gh.Requests()); n != 0 {
		t.Errorf("%d forge requests, want none before the log is set up", n)
	}
}
