package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/sandbox"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// TestMain lets the test binary be the sandbox helper of the Box's commands.
func TestMain(m *testing.M) {
	sandbox.Enter()
	os.Exit(m.Run())
}

// newTestBox is a Box at the best level the host gives, for a checkout of
// its own in a task folder of its own (the setup's record sits beside it).
func newTestBox(t *testing.T, o BoxOptions) (*Box, string) {
	t.Helper()
	sb, err := sandbox.New(sandbox.Policy{Require: sandbox.None})
	if err != nil {
		t.Fatal(err)
	}
	o.Sandbox = sb
	// Below /var/tmp, not /tmp: the sandbox sees its own /tmp.
	folder, err := os.MkdirTemp("/var/tmp", "box-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(folder) })
	work := filepath.Join(folder, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	return NewBox(o), work
}

// The setup runs as the workspace opens, not again while the watched files
// stay as they were (a failing setup neither), and again once one changes;
// what it says reaches the model redacted, and a watched name that is a
// link is not followed.
func TestSetupRunsAgainOnlyWhenAWatchedFileChanges(t *testing.T) {
	b, work := newTestBox(t, BoxOptions{Setup: []string{"echo run >> $HOME/setups; cat requirements.txt; echo token-s3cret; exit 3"},
		Watch: []string{"requirements*.txt", "link.txt"}, Redact: func(s string) string { return strings.ReplaceAll(s, "s3cret", "[REDACTED]") }})
	if err := os.WriteFile(filepath.Join(work, "requirements.txt"), []byte("flask\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(work, "link.txt")); err != nil {
		t.Fatal(err)
	}
	note, err := b.Setup(t.Context(), work)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"as the workspace opened", "exit 3", "token-[REDACTED]"} {
		if !strings.Contains(note, w) {
			t.Errorf("the setup's note lacks %q:\n%s", w, note)
		}
	}
	if strings.Contains(note, "s3cret") {
		t.Errorf("the note is not redacted:\n%s", note)
	}
	// Unchanged (the link's target changing is not the checkout's change): nothing runs.
	if err := os.WriteFile(outside, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if note, err := b.Setup(t.Context(), work); err != nil || note != "" {
		t.Fatalf("setup with nothing changed: %q, %v", note, err)
	}
	if err := os.WriteFile(filepath.Join(work, "requirements.txt"), []byte("flask\nrequests\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := b.Runner(work)
	ran, err := r.Run(t.Context(), "cat $HOME/setups", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ran.Note, "again, because a file it depends on changed (requirements.txt)") || ran.Stdout != "run\nrun\n" {
		t.Errorf("after requirements.txt changed: note %q, setups %q", ran.Note, ran.Stdout)
	}
}

// The checks run in the sandbox, each with its exit status and its output
// redacted; with none configured there is no checker at all.
func TestChecksRunInTheSandbox(t *testing.T) {
	b, work := newTestBox(t, BoxOptions{Checks: []string{"true", "echo key-s3cret; exit 2"},
		Redact: func(s string) string { return strings.ReplaceAll(s, "s3cret", "[REDACTED]") }})
	res, err := b.Checker(work).Check(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].ExitCode != 0 || res[1].ExitCode != 2 || res[1].Output != "key-[REDACTED]\n" {
		t.Errorf("checks = %+v", res)
	}
	none, _ := newTestBox(t, BoxOptions{})
	if c := none.Checker(work); c != nil {
		t.Errorf("a Box without checks gives the checker %v", c)
	}
}

// A sandboxed server's process gets its own env and the task's folders.
func TestConfineStartsTheServerInTheTasksSandbox(t *testing.T) {
	b, work := newTestBox(t, BoxOptions{})
	cmd, err := b.Confine(toolhost.TaskVars{Workspace: work}, []string{"/bin/sh", "-c", "echo $OWN $HOME"}, map[string]string{"OWN": "mine"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "mine " + filepath.Join(filepath.Dir(work), "box", "home") + "\n"; string(out) != want {
		t.Errorf("the server said %q, want %q", out, want)
	}
}
