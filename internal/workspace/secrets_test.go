package workspace

import (
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// recordingGit writes a git wrapper that appends one line per invocation to
// the returned log: "auth" or "none" (whether it was given the credential
// pipe, descriptor 3), "env" when its environment names an Authorization
// header, then its arguments. Before the real git
// runs, the wrapper runs before (shell code; "" for none).
func recordingGit(t testing.TB, before string) (bin, log string) {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, log = filepath.Join(dir, "git"), filepath.Join(dir, "log")
	script := "#!/bin/sh\nauth=none\n" +
		"[ -e /proc/$$/fd/3 ] && auth=auth\n" +
		"env | grep -qi 'Authorization' && auth=\"$auth env\"\n" +
		"echo \"$auth $*\" >> '" + log + "'\n" + before + "\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, log
}

// calls reads a recording wrapper's log.
func calls(t testing.TB, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// grepTree fails t for every file below root whose bytes hold one of
// secrets.
func grepTree(t testing.TB, root string, secrets ...string) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds the secret %q", p, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Fatalf("only %d files below %s: nothing was looked at", files, root)
	}
}

// basic is the Authorization value a forge's git clients send.
func basic(user, token string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+token))
}

// TestCredentialReachesGitOnlyThroughThePipeOfForgeCommands runs a whole
// task through a recording git: only ls-remote, fetch and push get the
// credential's pipe, no environment names it, no argument holds it, and no
// file below the root holds it afterwards.
func TestCredentialReachesGitOnlyThroughThePipeOfForgeCommands(t *testing.T) {
	const token = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"
	u := newUpstream(t, map[string]string{"a": "1\n"})
	bin, log := recordingGit(t, "")
	m := newManager(t, Options{Git: bin})
	s := issueSpec(u, issue12)
	s.Auth = Static(basic("x-access-token", token))
	prepare(t, m, s)
	u.commit("main", "", map[string]string{"b": "2\n"})
	w := prepare(t, m, s) // a reuse that fetches
	write(t, w.Dir, "a", "changed\n")
	ctx := context.Background()
	if _, err := w.Commit(ctx, "change"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Push(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Patch(ctx); err != nil {
		t.Fatal(err)
	}

	seen := map[string]bool{}
	for _, line := range calls(t, log) {
		auth, args, _ := strings.Cut(line, " ")
		if rest, ok := strings.CutPrefix(args, "env "); ok {
			t.Errorf("git %s ran with an Authorization header in its environment", rest)
			args = rest
		}
		cmd, _, _ := strings.Cut(args, " ")
		forge := cmd == "ls-remote" || cmd == "fetch" || cmd == "push"
		if (auth == "auth") != forge {
			t.Errorf("git %s ran with the credential: %v", args, auth == "auth")
		}
		if strings.Contains(args, token) || strings.Contains(args, basic("x-access-token", token)) {
			t.Errorf("the credential is in an argument: %s", args)
		}
		seen[cmd] = true
	}
	for _, cmd := range []string{"ls-remote", "fetch", "push", "commit"} {
		if !seen[cmd] {
			t.Errorf("git %s never ran: the check above looked at nothing", cmd)
		}
	}
	grepTree(t, m.root, token, strings.TrimPrefix(basic("x-access-token", token), "Basic "), base64.StdEncoding.EncodeToString([]byte(token)))
}

// forgeSide is one emulated forge serving a repository over smart HTTP.
type forgeSide struct {
	repos *forgetest.GitRepos
	repo  string
	url   string
	user  string // the Basic user name the forge's git clients send
	token string
	ref   func(kind task.Kind, n int) task.Ref
}

func forgeSides(t *testing.T) map[string]func() forgeSide {
	return map[string]func() forgeSide{
		task.GitHub: func() forgeSide {
			g := forgetest.NewGitHub(t)
			g.AddRepo("acme/app")
			return forgeSide{g.GitRepos, "acme/app", g.RepoURL("acme/app"), "x-access-token", g.Token,
				func(k task.Kind, n int) task.Ref {
					return task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: k, Number: n}
				}}
		},
		task.GitLab: func() forgeSide {
			g := forgetest.NewGitLab(t)
			g.AddProject("grp/sub/app")
			return forgeSide{g.GitRepos, "grp/sub/app", g.RepoURL("grp/sub/app"), "oauth2", g.Token,
				func(k task.Kind, n int) task.Ref {
					if k == task.PullRequest {
						k = task.MergeRequest
					}
					return task.Ref{Forge: task.GitLab, Repo: "grp/sub/app", Kind: k, Number: n}
				}}
		},
	}
}

// TestOverHTTPWithTheTokenInNoFile clones, commits and pushes through each
// emulated forge, which wants the token as HTTP Basic (git gets it from the
// credential helper's pipe after the forge's 401); a fork's
// pull request is fetched from the forge's ref for it; afterwards no file
// below the root holds the token in any form.
func TestOverHTTPWithTheTokenInNoFile(t *testing.T) {
	for name, side := range forgeSides(t) {
		t.Run(name, func(t *testing.T) {
			f := side()
			m := newManager(t, Options{})
			ctx := context.Background()
			s := Spec{Ref: f.ref(task.Issue, 12), CloneURL: f.url, Auth: Static(basic(f.user, f.token)),
				Base: "main", Branch: "coding-agent/issue-12"}
			w := prepare(t, m, s)
			if got := read(t, w.Dir, "README.md"); !strings.HasPrefix(got, "# ") {
				t.Fatalf("README.md = %q", got)
			}
			write(t, w.Dir, "fix.txt", "fixed\n")
			sha, err := w.Commit(ctx, "Fix the thing")
			if err != nil {
				t.Fatal(err)
			}
			if pushed, err := w.Push(ctx); err != nil || !pushed {
				t.Fatalf("Push = %v, %v", pushed, err)
			}
			if got, _ := f.repos.Head(f.repo, "coding-agent/issue-12"); got != sha {
				t.Fatalf("the forge's branch is at %q, want %s", got, sha)
			}
			if log := f.repos.Log(f.repo, "coding-agent/issue-12"); log[0].AuthorName != DefaultName || log[0].Subject != "Fix the thing" {
				t.Fatalf("the forge's newest commit = %+v", log[0])
			}

			// A later round, after the forge's branch moved: fast-forwarded.
			theirs := f.repos.CommitFile(f.repo, "coding-agent/issue-12", "more.txt", "more\n", "more")
			w = prepare(t, m, s)
			if head, _ := w.Head(ctx); head != theirs {
				t.Fatalf("head = %s, want %s", head, theirs)
			}

			// A fork's pull request: its head only under the forge's ref.
			forkHead := f.repos.CommitFile(f.repo, "fork-work", "fork.txt", "from a fork\n", "fork work")
			pr := f.ref(task.PullRequest, 7)
			headRef := "refs/pull/7/head"
			if pr.Kind == task.MergeRequest {
				headRef = "refs/merge-requests/7/head"
			}
			gitT(t, f.repos.GitDir(f.repo), "update-ref", headRef, forkHead)
			gitT(t, f.repos.GitDir(f.repo), "update-ref", "-d", "refs/heads/fork-work")
			fork := prepare(t, m, Spec{Ref: pr, CloneURL: f.url, Auth: s.Auth, Base: "main", Branch: "main", ReadOnly: true})
			if got := read(t, fork.Dir, "fork.txt"); got != "from a fork\n" {
				t.Fatalf("fork.txt = %q", got)
			}
			write(t, fork.Dir, "fork.txt", "improved\n")
			if patch, err := fork.Patch(ctx); err != nil || !strings.Contains(patch, "+improved") {
				t.Fatalf("Patch = %q, %v", patch, err)
			}

			grepTree(t, m.root, f.token, strings.TrimPrefix(basic(f.user, f.token), "Basic "),
				base64.StdEncoding.EncodeToString([]byte(f.token)))
		})
	}
}

// TestWrongTokenFailsClearly: a token the forge refuses fails the clone and
// the push with ErrAuth, and no error holds the token.
func TestWrongTokenFailsClearly(t *testing.T) {
	for name, side := range forgeSides(t) {
		t.Run(name, func(t *testing.T) {
			f := side()
			m := newManager(t, Options{})
			ctx := context.Background()
			wrong := "glpat-wrongwrongwrongwrong"
			s := Spec{Ref: f.ref(task.Issue, 1), CloneURL: f.url, Auth: Static(basic(f.user, wrong)),
				Base: "main", Branch: "coding-agent/issue-1"}
			_, err := m.Prepare(ctx, s)
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("Prepare with a wrong token = %v, want ErrAuth", err)
			}
			noSecret(t, err, wrong, basic(f.user, wrong))
			t.Logf("clone: %v", err)
			if _, err := os.Stat(m.folder(s.Ref)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused clone left a workspace: %v", err)
			}

			s.Auth = Static(basic(f.user, f.token))
			w := prepare(t, m, s)
			write(t, w.Dir, "x", "x\n")
			if _, err := w.Commit(ctx, "x"); err != nil {
				t.Fatal(err)
			}
			w.auth = Static(basic(f.user, wrong)) // as if the token had been revoked since
			_, err = w.Push(ctx)
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("Push with a wrong token = %v, want ErrAuth", err)
			}
			noSecret(t, err, wrong, basic(f.user, wrong))
			t.Logf("push: %v", err)
			if _, ok := f.repos.Head(f.repo, "coding-agent/issue-1"); ok {
				t.Fatal("a refused push made the branch")
			}
		})
	}
}

func noSecret(t *testing.T, err error, secrets ...string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Stderr == "" {
		t.Fatalf("error %v carries no git message", err)
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("the error holds a secret: %v", err)
		}
	}
}
