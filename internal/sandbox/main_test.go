package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	Enter()
	os.Exit(m.Run())
}

// secretEnv is set in the test process; no command may see it.
const secretEnv = "SANDBOX_TEST_SECRET"

// forLevels runs f once per level the host gives, skipping the others with
// the reason; in CI this machine must give Namespaces.
func forLevels(t *testing.T, f func(t *testing.T, lvl Level)) {
	rep := Probe()
	for _, lvl := range []Level{Namespaces, Landlock, None} {
		t.Run(lvl.String(), func(t *testing.T) {
			if rep.Best < lvl {
				if lvl == Namespaces && os.Getenv("CI") != "" {
					t.Fatalf("CI needs level namespaces, host gives %s: %s", rep.Best, rep.missing(lvl))
				}
				t.Skipf("host gives %s only: %s", rep.Best, rep.missing(lvl))
			}
			f(t, lvl)
		})
	}
}

// box is one sandbox with its dirs in a temp dir.
type box struct {
	sb   *Sandbox
	base string
	d    Dirs
}

// newBox makes Work, Home and Tmp under a fresh base, plus what pol needs.
func newBox(t *testing.T, lvl Level, pol Policy) *box {
	t.Helper()
	// Not under /tmp, where the daemon's dirs are not either: a path
	// under the host's /tmp is seen in the box through Tmp's mount.
	base, err := os.MkdirTemp("/var/tmp", "sandbox-test-")
	if err != nil {
		base = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(base) })
	}
	var sb *Sandbox
	d := Dirs{
		Work: filepath.Join(base, "ws", "task1"),
		Home: filepath.Join(base, "homes", "task1"),
		Tmp:  filepath.Join(base, "tmps", "task1"),
	}
	if err := os.MkdirAll(d.Work, 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err = newAt(pol, lvl)
	if err != nil {
		t.Fatalf("new sandbox: %v", err)
	}
	return &box{sb: sb, base: base, d: d}
}

// write creates a file with content under the box's base.
func (b *box) write(t *testing.T, rel, content string) string {
	t.Helper()
	p := filepath.Join(b.base, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs command in the box and fails the test if it could not start.
func (b *box) run(t *testing.T, r Run) Result {
	t.Helper()
	if r.Dirs.Work == "" {
		r.Dirs = b.d
	}
	res, err := b.sb.Run(t.Context(), r)
	if err != nil {
		t.Fatalf("run %q: %v", r.Command, err)
	}
	return res
}

// sh runs command and returns the result.
func (b *box) sh(t *testing.T, command string) Result {
	t.Helper()
	return b.run(t, Run{Command: command})
}

// out is stdout and stderr together, for messages.
func out(r Result) string {
	return strings.TrimSpace(string(r.Stdout) + string(r.Stderr))
}

// leftover lists host processes whose command line holds mark.
func leftover(mark string) []string {
	ents, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), mark) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// errorsAs is errors.As for the tests.
func errorsAs(err error, target any) bool { return errors.As(err, target) }
