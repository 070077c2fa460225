package obs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A log file that cannot be written is an error of NewLogger, naming the
// file and why, rather than a logger that loses every line: the file is
// opened at start, not at the first record.
func TestUnwritableLogFileIsAnErrorAtStart(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(dir, "folder.log")
	if err := os.Mkdir(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, file, why string }{
		{"a directory", folder, "is a directory"},
		{"under a file", filepath.Join(plain, "agent.log"), "not a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, closer, err := NewLogger(LogOptions{File: c.file})
			if err == nil {
				closer.Close()
				t.Fatalf("NewLogger(%s) succeeded", c.file)
			}
			if !strings.Contains(err.Error(), c.file) || !strings.Contains(err.Error(), c.why) {
				t.Errorf("error %q does not name %s and say %q", err, c.file, c.why)
			}
		})
	}
}

// The file exists once NewLogger returns, before anything is logged.
func TestLogFileIsOpenedAtStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "logs", "agent.log")
	_, closer, err := NewLogger(LogOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the log file after NewLogger: %v", err)
	}
}
