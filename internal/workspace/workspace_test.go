package workspace

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/task"
)

func TestIssueWorkspaceIsCommittedAndPushedToItsBranch(t *testing.T) {
	u := newUpstream(t, map[string]string{"README.md": "hello\n", "src/a.go": "package a\n"})
	m := newManager(t, Options{})
	w := prepare(t, m, issueSpec(u, issue12))

	if w.Dir != m.Dir(issue12) || w.Branch != "coding-agent/issue-12" || w.Base != "main" {
		t.Fatalf("workspace = %+v, want Dir %s on coding-agent/issue-12 from main", w, m.Dir(issue12))
	}
	if got := read(t, w.Dir, "src/a.go"); got != "package a\n" {
		t.Fatalf("src/a.go = %q", got)
	}
	if _, err := os.Stat(filepath.Join(w.Dir, ".git")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the checkout holds .git (%v): the model's tools could change git's config", err)
	}
	ctx := context.Background()
	if pushed, err := w.Push(ctx); err != nil || pushed {
		t.Fatalf("Push with no work = %v, %v; want nothing pushed", pushed, err)
	}
	if u.sha("refs/heads/coding-agent/issue-12") != "" {
		t.Fatal("a branch without work reached the forge")
	}
	if sha, err := w.Commit(ctx, "nothing"); err != nil || sha != "" {
		t.Fatalf("Commit with no change = %q, %v", sha, err)
	}

	write(t, w.Dir, "README.md", "hello, world\n")
	write(t, w.Dir, "docs/new.md", "# New\n")
	if changed, err := w.Changes(ctx); err != nil || !changed {
		t.Fatalf("Changes = %v, %v; want true (a modified and an untracked file)", changed, err)
	}
	msg := "Fix #12: greet the world\n\n# What changed\nThe README greets the world.\n"
	sha, err := w.Commit(ctx, msg)
	if err != nil || sha == "" {
		t.Fatalf("Commit = %q, %v", sha, err)
	}
	if changed, err := w.Changes(ctx); err != nil || changed {
		t.Fatalf("Changes after the commit = %v, %v", changed, err)
	}
	if pushed, err := w.Push(ctx); err != nil || !pushed {
		t.Fatalf("Push = %v, %v", pushed, err)
	}
	if got := u.sha("refs/heads/coding-agent/issue-12"); got != sha {
		t.Fatalf("the forge's branch is at %q, want %s", got, sha)
	}
	if got := u.file("coding-agent/issue-12", "docs/new.md"); got != "# New" {
		t.Fatalf("pushed docs/new.md = %q", got)
	}
	if got := gitT(t, u.bare, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", sha); got != DefaultName+" <"+DefaultEmail+">|"+DefaultName+" <"+DefaultEmail+">|"+strings.TrimSpace(msg) {
		t.Fatalf("commit = %q: want the default identity and the message as written", got)
	}
	if pushed, err := w.Push(ctx); err != nil || pushed {
		t.Fatalf("Push again = %v, %v; want nothing to push", pushed, err)
	}
	if got := gitT(t, u.bare, "rev-list", "--count", "main..coding-agent/issue-12"); got != "1" {
		t.Fatalf("%s commits on the branch, want one", got)
	}
}

func TestConfiguredIdentity(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "a\n"})
	m := newManager(t, Options{Author: Identity{"Ann Author", "ann@example.com"}, Committer: Identity{Name: "Bot"}})
	w := prepare(t, m, issueSpec(u, issue12))
	write(t, w.Dir, "a", "b\n")
	sha, err := w.Commit(context.Background(), "change a")
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, w.Dir, "--git-dir="+w.gitDir, "log", "-1", "--format=%an <%ae>|%cn <%ce>", sha); got != "Ann Author <ann@example.com>|Bot <"+DefaultEmail+">" {
		t.Fatalf("identity = %q", got)
	}
}

func TestReuseKeepsUncommittedWorkAndFastForwardsOtherwise(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "1\n"})
	m := newManager(t, Options{})
	w := prepare(t, m, issueSpec(u, issue12))
	write(t, w.Dir, "mine.txt", "work in progress\n")
	moved := u.commit("main", "", map[string]string{"b": "2\n"})

	w = prepare(t, m, issueSpec(u, issue12)) // a resume: the work is kept where it stands
	if got := read(t, w.Dir, "mine.txt"); got != "work in progress\n" {
		t.Fatalf("the uncommitted file = %q", got)
	}
	if head, _ := w.Head(context.Background()); head == moved {
		t.Fatal("a checkout with uncommitted work was moved")
	}

	if err := os.Remove(filepath.Join(w.Dir, "mine.txt")); err != nil {
		t.Fatal(err)
	}
	w = prepare(t, m, issueSpec(u, issue12)) // clean, and the forge has no branch: to Base
	if head, _ := w.Head(context.Background()); head != moved {
		t.Fatalf("head = %s, want main's new commit %s", head, moved)
	}

	// The branch on the forge (pushed by a round on another host) wins over Base.
	theirs := u.commit("coding-agent/issue-12", "", map[string]string{"c": "3\n"})
	w = prepare(t, m, issueSpec(u, issue12))
	if head, _ := w.Head(context.Background()); head != theirs {
		t.Fatalf("head = %s, want the forge's branch %s", head, theirs)
	}
	if got := read(t, w.Dir, "c"); got != "3\n" {
		t.Fatalf("c = %q", got)
	}
}

func TestLocalCommitsSurviveAResumeAndArePushed(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "1\n"})
	m := newManager(t, Options{})
	w := prepare(t, m, issueSpec(u, issue12))
	write(t, w.Dir, "a", "2\n")
	sha, err := w.Commit(context.Background(), "round one")
	if err != nil {
		t.Fatal(err)
	}
	// A crash between the commit and the push, and main moved meanwhile.
	u.commit("main", "", map[string]string{"b": "x\n"})
	w = prepare(t, m, issueSpec(u, issue12))
	if head, _ := w.Head(context.Background()); head != sha {
		t.Fatalf("head = %s, want the unpushed commit %s", head, sha)
	}
	if pushed, err := w.Push(context.Background()); err != nil || !pushed {
		t.Fatalf("Push = %v, %v", pushed, err)
	}
	if u.sha("refs/heads/coding-agent/issue-12") != sha {
		t.Fatal("the unpushed commit did not reach the forge")
	}
}

func TestPushRefusesToOverwriteAMovedBranch(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "1\n"})
	m := newManager(t, Options{})
	pr := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.PullRequest, Number: 5}
	head := u.commit("feature", "", map[string]string{"f": "1\n"})
	w := prepare(t, m, Spec{Ref: pr, CloneURL: u.url, Base: "main", Branch: "feature"})
	if got, _ := w.Head(context.Background()); got != head {
		t.Fatalf("a pull request's workspace is at %s, want its head %s", got, head)
	}
	theirs := u.commit("feature", "", map[string]string{"f": "theirs\n"})
	write(t, w.Dir, "f", "ours\n")
	if _, err := w.Commit(context.Background(), "ours"); err != nil {
		t.Fatal(err)
	}
	_, err := w.Push(context.Background())
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("Push over a moved branch = %v, want ErrRejected", err)
	}
	if u.sha("refs/heads/feature") != theirs {
		t.Fatal("the forge's branch was overwritten")
	}
}

func TestSameRepositoryPullRequestPushesToItsHead(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "1\n"})
	u.commit("feature", "", map[string]string{"f": "1\n"})
	m := newManager(t, Options{})
	mr := task.Ref{Forge: task.GitLab, Repo: "group/sub/app", Kind: task.MergeRequest, Number: 3}
	w := prepare(t, m, Spec{Ref: mr, CloneURL: u.url, Base: "main", Branch: "feature"})
	write(t, w.Dir, "f", "2\n")
	sha, err := w.Commit(context.Background(), "review fix")
	if err != nil {
		t.Fatal(err)
	}
	if pushed, err := w.Push(context.Background()); err != nil || !pushed {
		t.Fatalf("Push = %v, %v", pushed, err)
	}
	if u.sha("refs/heads/feature") != sha {
		t.Fatal("the head branch did not get the commit")
	}
}

func TestForkPullRequestIsReadOnlyAndGivesAPatch(t *testing.T) {
	for _, tc := range []struct {
		ref  task.Ref
		head string
	}{
		{task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.PullRequest, Number: 7}, "refs/pull/7/head"},
		{task.Ref{Forge: task.GitLab, Repo: "group/app", Kind: task.MergeRequest, Number: 7}, "refs/merge-requests/7/head"},
	} {
		t.Run(tc.ref.Forge, func(t *testing.T) {
			u := newUpstream(t, map[string]string{"a": "1\n", "b": "keep\n"})
			// The fork's branch is named like the base: only the forge's
			// ref for the request holds it.
			head := u.commit("fork-main", tc.head, map[string]string{"a": "fork\n"})
			m := newManager(t, Options{})
			w := prepare(t, m, Spec{Ref: tc.ref, CloneURL: u.url, Base: "main", Branch: "main", ReadOnly: true})
			if got, _ := w.Head(context.Background()); got != head || !w.ReadOnly {
				t.Fatalf("head = %s (read-only %v), want the fork's %s", got, w.ReadOnly, head)
			}
			write(t, w.Dir, "a", "fixed\n")
			write(t, w.Dir, "new.txt", "added\n")
			if err := os.Remove(filepath.Join(w.Dir, "b")); err != nil {
				t.Fatal(err)
			}
			patch, err := w.Patch(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"+fixed", "-fork", "new file mode", "+added", "deleted file mode"} {
				if !strings.Contains(patch, want) {
					t.Errorf("patch lacks %q:\n%s", want, patch)
				}
			}
			if changed, _ := w.Changes(context.Background()); !changed {
				t.Fatal("Patch changed the checkout's state: no changes left")
			}
			if _, err := w.Push(context.Background()); !errors.Is(err, ErrReadOnly) {
				t.Fatalf("Push of a fork = %v, want ErrReadOnly", err)
			}
			// The patch applies on the fork's head.
			check := t.TempDir()
			gitT(t, check, "init", "-q")
			gitT(t, check, "fetch", "-q", u.bare, tc.head)
			gitT(t, check, "checkout", "-q", "FETCH_HEAD")
			write(t, check, "p.diff", patch)
			gitT(t, check, "apply", "--index", "p.diff")
			if got := read(t, check, "a") + read(t, check, "new.txt"); got != "fixed\nadded\n" {
				t.Fatalf("after the patch: %q", got)
			}
			if u.sha("refs/heads/main") == "" || gitT(t, u.bare, "for-each-ref", "--count=1", "--contains", head, "refs/heads/main") != "" {
				t.Fatal("the fork's commit reached main")
			}
		})
	}
}

func TestPatchHoldsCommittedAndUncommittedWork(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "1\n"})
	m := newManager(t, Options{})
	w := prepare(t, m, issueSpec(u, issue12))
	write(t, w.Dir, "a", "2\n")
	if _, err := w.Commit(context.Background(), "one"); err != nil {
		t.Fatal(err)
	}
	write(t, w.Dir, "b", "3\n")
	patch, err := w.Patch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(patch, "+2") || !strings.Contains(patch, "+3") {
		t.Fatalf("patch lacks the committed or the uncommitted change:\n%s", patch)
	}
	if err := os.Remove(filepath.Join(w.Dir, "b")); err != nil {
		t.Fatal(err)
	}
	gitT(t, w.Dir, "--git-dir="+w.gitDir, "--work-tree="+w.Dir, "reset", "-q", "--hard", baseRef)
	if patch, err := w.Patch(context.Background()); err != nil || patch != "" {
		t.Fatalf("Patch with no work = %q, %v", patch, err)
	}
}

// TestHooksInTheRepositoryDoNotRun: hooks planted in the task's git
// directory make every command refuse (ErrTampered, naming hooks), and none
// runs.
func TestHooksInTheRepositoryDoNotRun(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "1\n"})
	m := newManager(t, Options{})
	w := prepare(t, m, issueSpec(u, issue12))
	marker := filepath.Join(t.TempDir(), "ran")
	hook := "#!/bin/sh\ntouch " + marker + "\nexit 1\n"
	for _, h := range []string{"pre-commit", "commit-msg", "pre-push", "post-checkout", "reference-transaction"} {
		write(t, filepath.Join(w.gitDir, "hooks"), h, hook)
		if err := os.Chmod(filepath.Join(w.gitDir, "hooks", h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, w.Dir, "a", "2\n")
	var te *TamperError
	if _, err := w.Commit(context.Background(), "c"); !errors.As(err, &te) || te.Path != filepath.Join(w.gitDir, "hooks") {
		t.Fatalf("Commit with hooks planted = %v, want a TamperError naming hooks", err)
	}
	if _, err := w.Push(context.Background()); !errors.Is(err, ErrTampered) {
		t.Fatalf("Push with hooks planted = %v, want ErrTampered", err)
	}
	if _, err := m.Prepare(context.Background(), issueSpec(u, issue12)); !errors.Is(err, ErrTampered) {
		t.Fatalf("Prepare with hooks planted = %v, want ErrTampered", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a hook ran")
	}
}

func TestBadSpecsAreRefused(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "1\n"})
	m := newManager(t, Options{})
	for name, s := range map[string]Spec{
		"branch like an option": {Ref: issue12, CloneURL: u.url, Base: "main", Branch: "-x"},
		"empty branch":          {Ref: issue12, CloneURL: u.url, Base: "main"},
		"branch is the base":    {Ref: issue12, CloneURL: u.url, Base: "main", Branch: "main"},
		"bad base":              {Ref: issue12, CloneURL: u.url, Base: "a..b", Branch: "x"},
		"scheme":                {Ref: issue12, CloneURL: "ext::sh -c touch% /tmp/x", Base: "main", Branch: "x"},
		"missing base":          {Ref: issue12, CloneURL: u.url, Base: "trunk", Branch: "x"},
		"fork without its head": {Ref: issue12, CloneURL: u.url, Base: "main", Branch: "x", ReadOnly: true},
		"request without its head": {Ref: task.Ref{Forge: task.GitLab, Repo: "g/app", Kind: task.MergeRequest, Number: 2},
			CloneURL: u.url, Base: "main", Branch: "gone"},
	} {
		if _, err := m.Prepare(context.Background(), s); err == nil {
			t.Errorf("%s: Prepare took %+v", name, s)
		}
	}
	_, err := m.Prepare(context.Background(), Spec{Ref: issue12, CloneURL: "https://x-access-token:s3cr3tvalue@example.com/a/b.git",
		Base: "main", Branch: "x"})
	if err == nil || strings.Contains(err.Error(), "s3cr3tvalue") {
		t.Fatalf("a URL with a credential: %v", err)
	}
	if entries, _ := os.ReadDir(m.root); len(entries) != 3 {
		t.Fatalf("refused specs left %d entries in the root, want .exclude, .home and .tmp", len(entries))
	}
}

func TestDirIsStableAndDistinct(t *testing.T) {
	m := newManager(t, Options{})
	a := task.Ref{Forge: task.GitLab, Repo: "a_b/c", Kind: task.Issue, Number: 1}
	b := task.Ref{Forge: task.GitLab, Repo: "a/b_c", Kind: task.Issue, Number: 1}
	c := task.Ref{Forge: task.GitLab, Repo: "a/b_c", Kind: task.MergeRequest, Number: 1}
	if m.Dir(a) == m.Dir(b) || m.Dir(b) == m.Dir(c) {
		t.Fatalf("two refs share a directory: %s %s %s", m.Dir(a), m.Dir(b), m.Dir(c))
	}
	again := newManager(t, Options{Root: m.root}) // another process on the same root
	if again.Dir(a) != m.Dir(a) || filepath.Dir(filepath.Dir(m.Dir(a))) != m.root {
		t.Fatalf("Dir(a) = %s, want a stable folder in %s", m.Dir(a), m.root)
	}
	long := task.Ref{Forge: task.GitLab, Repo: strings.Repeat("g/", 200) + "p", Kind: task.Issue, Number: 1}
	if n := len(filepath.Base(filepath.Dir(m.Dir(long)))); n > 160 {
		t.Fatalf("a folder name of %d bytes", n)
	}
}

func TestRemove(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "1\n"})
	m := newManager(t, Options{})
	w := prepare(t, m, issueSpec(u, issue12))
	write(t, w.Dir, "a", "2\n")
	if err := m.Remove(context.Background(), issue12); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.folder(issue12)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the folder is still there: %v", err)
	}
	if err := m.Remove(context.Background(), issue12); err != nil {
		t.Fatalf("removing again: %v", err)
	}
	w = prepare(t, m, issueSpec(u, issue12))
	if got := read(t, w.Dir, "a"); got != "1\n" {
		t.Fatalf("after Remove, Prepare kept old work: a = %q", got)
	}
}

// TestMachineConfigIsNotRead puts a config that sends the clone URL
// elsewhere in the user's home and in a repository around the root: git
// must read neither.
func TestMachineConfigIsNotRead(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "1\n"})
	redirect := "[url \"file:///nonexistent/\"]\n\tinsteadOf = " + u.url + "\n"
	home := t.TempDir()
	write(t, home, ".gitconfig", redirect)
	t.Setenv("HOME", home)
	outer := t.TempDir()
	gitT(t, outer, "init", "-q")
	cmd := exec.Command("git", "config", "--file", filepath.Join(outer, ".git", "config"), "url.file:///nonexistent/.insteadOf", u.url)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m := newManager(t, Options{Root: filepath.Join(outer, "workspaces")})
	w := prepare(t, m, issueSpec(u, issue12))
	write(t, w.Dir, "a", "2\n")
	if _, err := w.Commit(context.Background(), "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Push(context.Background()); err != nil {
		t.Fatal(err)
	}
}
