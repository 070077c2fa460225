package workspace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/task"
)

// testEnv is the environment of the git commands a test runs itself: no
// config of the machine's, an identity of its own.
func testEnv() []string {
	return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "LANG=C", "LC_ALL=C",
		"GIT_AUTHOR_NAME=Up Stream", "GIT_AUTHOR_EMAIL=up@example.com",
		"GIT_COMMITTER_NAME=Up Stream", "GIT_COMMITTER_EMAIL=up@example.com")
}

// gitT runs git in dir for a test and returns its trimmed output.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = testEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// upstream is a bare repository playing the forge's, with a scratch clone
// to make commits on it.
type upstream struct {
	t       testing.TB
	bare    string
	scratch string
	url     string
}

// newUpstream makes a repository whose main branch holds files.
func newUpstream(t testing.TB, files map[string]string) *upstream {
	t.Helper()
	dir := t.TempDir()
	u := &upstream{t: t, bare: filepath.Join(dir, "up.git"), scratch: filepath.Join(dir, "scratch")}
	u.url = "file://" + u.bare
	gitT(t, dir, "init", "-q", "--bare", "--initial-branch=main", u.bare)
	gitT(t, dir, "init", "-q", "--initial-branch=main", u.scratch)
	gitT(t, u.scratch, "remote", "add", "origin", u.bare)
	u.writeFiles(files)
	gitT(t, u.scratch, "add", "-A")
	gitT(t, u.scratch, "commit", "-q", "-m", "first")
	gitT(t, u.scratch, "push", "-q", "origin", "main")
	return u
}

func (u *upstream) writeFiles(files map[string]string) {
	u.t.Helper()
	for name, body := range files {
		p := filepath.Join(u.scratch, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			u.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			u.t.Fatal(err)
		}
	}
}

// commit adds a commit with files to branch (made from main when the
// upstream lacks it) and pushes it to ref (refs/heads/<branch> when "").
// It returns the commit's id.
func (u *upstream) commit(branch, ref string, files map[string]string) string {
	u.t.Helper()
	gitT(u.t, u.scratch, "fetch", "-q", "origin")
	from := "origin/main"
	if u.sha("refs/heads/"+branch) != "" {
		from = "origin/" + branch
	}
	gitT(u.t, u.scratch, "checkout", "-q", "-B", branch, from)
	u.writeFiles(files)
	gitT(u.t, u.scratch, "add", "-A")
	gitT(u.t, u.scratch, "commit", "-q", "-m", "change on "+branch)
	if ref == "" {
		ref = "refs/heads/" + branch
	}
	gitT(u.t, u.scratch, "push", "-q", "-f", "origin", "HEAD:"+ref)
	return gitT(u.t, u.scratch, "rev-parse", "HEAD")
}

// sha is the commit ref names in the upstream, "" when there is none.
func (u *upstream) sha(ref string) string {
	cmd := exec.Command("git", "--git-dir="+u.bare, "rev-parse", "-q", "--verify", ref)
	cmd.Env = testEnv()
	out, _ := cmd.Output()
	return strings.TrimSpace(string(out))
}

// file reads name at ref in the upstream.
func (u *upstream) file(ref, name string) string {
	return gitT(u.t, u.bare, "show", ref+":"+name)
}

var issue12 = task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 12}

func issueSpec(u *upstream, ref task.Ref) Spec {
	return Spec{Ref: ref, CloneURL: u.url, Base: "main", Branch: "coding-agent/issue-" + strconv.Itoa(ref.Number)}
}

func newManager(t testing.TB, o Options) *Manager {
	t.Helper()
	if o.Root == "" {
		o.Root = t.TempDir()
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func prepare(t testing.TB, m *Manager, s Spec) *Workspace {
	t.Helper()
	w, err := m.Prepare(context.Background(), s)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	return w
}

func write(t testing.TB, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t testing.TB, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
