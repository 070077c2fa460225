package workspace

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/sanitize"
)

// TestSecretsAreNeitherCommittedNorPushed: a file that holds the
// workspace's credential, a configured secret (raw, base64, spaced out or
// split over lines: each half long enough is found too) or a token of a known shape, or whose name holds one,
// is refused with a SecretError naming file and line, not the value;
// nothing reaches the forge until the secret is gone. A commit made behind
// Commit's back is refused by Push.
func TestSecretsAreNeitherCommittedNorPushed(t *testing.T) {
	const token = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"
	const configured = "hunter2-correct-horse-battery"
	spaced := strings.Join(strings.Split(configured, ""), " ")
	for name, tc := range map[string]struct {
		file, body, secret string
		line               int
	}{
		"credential": {"leak.txt", "ok\n" + token + "\n", token, 2},
		"configured": {"leak.txt", "ok\nkey = " + configured + "\n", configured, 2},
		"base64":     {"leak.txt", "ok\n" + base64.StdEncoding.EncodeToString([]byte(configured)) + "\n", configured, 2},
		"spaced":     {"leak.txt", "ok\n" + spaced + "\n", configured, 2},
		"split":      {"leak.txt", "ok\nhunter2-correct\n-horse-battery\n", configured, 2},
		"shape":      {"leak.txt", "ok\nghp_" + strings.Repeat("aB3", 12) + "\n", "ghp_", 2},
		"name":       {"k-" + configured + ".txt", "ok\n", configured, 0},
		"binary":     {"leak.bin", "\x00\x01" + configured + "\x00", configured, 1},
	} {
		t.Run(name, func(t *testing.T) {
			u := newUpstream(t, map[string]string{"a": "1\n"})
			m := newManager(t, Options{Redact: sanitize.NewRedactor([]string{configured}).Redact})
			s := issueSpec(u, issue12)
			s.Auth = Static(basic("x-access-token", token))
			w := prepare(t, m, s)
			write(t, w.Dir, tc.file, tc.body)
			ctx := context.Background()
			_, err := w.Commit(ctx, "work")
			var se *SecretError
			if !errors.As(err, &se) || len(se.Hits) == 0 || se.Hits[0].Line != tc.line ||
				!strings.HasPrefix(se.Hits[0].Path, strings.SplitN(tc.file, "-", 2)[0]) {
				t.Fatalf("Commit = %v, want a SecretError at %s:%d", err, tc.file, tc.line)
			}
			if strings.Contains(err.Error(), tc.secret) || strings.Contains(err.Error(), "hunter") {
				t.Fatalf("the error holds the secret: %v", err)
			}
			if _, err := w.Push(ctx); err != nil {
				t.Fatal(err)
			}
			if u.sha("refs/heads/"+s.Branch) != "" {
				t.Fatal("the secret reached the forge")
			}
			if read(t, w.Dir, tc.file) != tc.body {
				t.Fatal("the checkout changed")
			}
			write(t, w.Dir, tc.file, "ok\n")
			if name == "name" {
				if err := os.Remove(filepath.Join(w.Dir, tc.file)); err != nil {
					t.Fatal(err)
				}
				write(t, w.Dir, "k.txt", "ok\n")
			}
			if _, err := w.Commit(ctx, "work"); err != nil {
				t.Fatalf("Commit without the secret: %v", err)
			}
			if pushed, err := w.Push(ctx); err != nil || !pushed {
				t.Fatalf("Push without the secret = %v, %v", pushed, err)
			}
		})
	}
}

// TestPushRefusesACommitThatHoldsASecret: a commit made in the workspace's
// repository behind Commit's back is not pushed.
func TestPushRefusesACommitThatHoldsASecret(t *testing.T) {
	const token = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"
	u := newUpstream(t, map[string]string{"a": "1\n"})
	m := newManager(t, Options{})
	s := issueSpec(u, issue12)
	s.Auth = Static(basic("x-access-token", token))
	w := prepare(t, m, s)
	write(t, w.Dir, "a", "1\n"+base64.StdEncoding.EncodeToString([]byte(token))+"\n")
	gitT(t, w.Dir, "--git-dir="+w.gitDir, "--work-tree="+w.Dir, "commit", "-qam", "behind its back")
	var se *SecretError
	if _, err := w.Push(context.Background()); !errors.As(err, &se) || se.Hits[0] != (Hit{Path: "a", Line: 2}) {
		t.Fatalf("Push = %v, want a SecretError at a:2", err)
	}
	if u.sha("refs/heads/"+s.Branch) != "" {
		t.Fatal("the secret reached the forge")
	}
}

// TestBuildOutputAndLargeFilesAreLeftOut: untracked build output the
// repository has no rule for, and files over MaxFileBytes, are not
// committed and are listed in LeftOut; a tracked file under node_modules
// stays tracked, a .gitignore negation keeps a __pycache__, and what the
// repository ignores itself is left out silently.
func TestBuildOutputAndLargeFilesAreLeftOut(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "1\n", ".gitignore": "*.log\n", "node_modules/kept.js": "1\n",
		"keep/.gitignore": "!__pycache__/\n!*.pyc\n"})
	m := newManager(t, Options{MaxFileBytes: 1000})
	w := prepare(t, m, issueSpec(u, issue12))
	for name, body := range map[string]string{
		"src/__pycache__/m.cpython-312.pyc": "\x00pyc", "src/m.pyc": "pyc", "node_modules/new.js": "2\n",
		"node_modules/kept.js": "2\n", ".venv/bin/python": "#!", "keep/__pycache__/x.pyc": "kept",
		"run.log": "log\n", "big.bin": strings.Repeat("x", 1001), "small.bin": strings.Repeat("x", 1000),
		"src/m.py": "print(1)\n",
	} {
		write(t, w.Dir, name, body)
	}
	sha, err := w.Commit(context.Background(), "work")
	if err != nil {
		t.Fatal(err)
	}
	tree := gitT(t, w.gitDir, "ls-tree", "-r", "--name-only", sha)
	want := "\n" + strings.Join([]string{".gitignore", "a", "keep/.gitignore", "keep/__pycache__/x.pyc",
		"node_modules/kept.js", "small.bin", "src/m.py"}, "\n")
	if "\n"+tree != want {
		t.Errorf("the commit holds\n%s\nwant%s", tree, want)
	}
	if got := gitT(t, w.gitDir, "show", sha+":node_modules/kept.js"); got != "2" {
		t.Errorf("the tracked node_modules/kept.js = %q, want its change", got)
	}
	got := map[string]string{}
	for _, l := range w.LeftOut {
		got[l.Path] = l.Reason
	}
	wantOut := map[string]string{"src/__pycache__/": ReasonBuildOutput, "src/m.pyc": ReasonBuildOutput,
		"node_modules/new.js": ReasonBuildOutput, ".venv/": ReasonBuildOutput, "big.bin": ReasonTooLarge}
	if len(got) != len(wantOut) {
		t.Errorf("LeftOut = %v, want %v", got, wantOut)
	}
	for p, r := range wantOut {
		if got[filepath.ToSlash(p)] != r {
			t.Errorf("LeftOut[%s] = %q, want %q", p, got[p], r)
		}
	}
}
