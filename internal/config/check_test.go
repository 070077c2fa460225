package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/config"
)

// Check reports, besides the file's own problems, a logging.file this
// process could not write: a directory, a path through a file. A file
// that can be created, or written, is fine, and Load does not look.
func TestCheckSaysTheLogFileCannotBeWritten(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(dir, "folder.log")
	if err := os.Mkdir(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, file string
		want       config.Problems
	}{
		{"a directory", folder, config.Problems{{Path: "logging.file", Msg: "cannot be written: it is a directory", Line: 7}}},
		{"under a file", filepath.Join(plain, "agent.log"), config.Problems{{Path: "logging.file", Msg: "cannot be written: not a directory", Line: 7}}},
		{"deeper under a file", filepath.Join(plain, "logs", "agent.log"), config.Problems{{Path: "logging.file", Msg: "cannot be written: not a directory", Line: 7}}},
		{"a new file in new folders", filepath.Join(dir, "new", "logs", "agent.log"), nil},
		{"an existing file", plain, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			src := head + gh + "logging:\n  file: " + c.file + "\n"
			if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, _, err := config.Load(path); err != nil {
				t.Fatalf("Load: %v", err)
			}
			_, _, err := config.Check(path)
			var got config.Problems
			var ps *config.Problems
			if errors.As(err, &ps) {
				got = *ps
			} else if err != nil {
				t.Fatalf("Check = %v", err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 2 {
				t.Errorf("Check left files or folders behind: %v", entries)
			}
		})
	}
}
