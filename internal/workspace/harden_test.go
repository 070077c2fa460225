package workspace

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/sanitize"
)

// recorder is an HTTP server that counts the requests it gets and records
// their Authorization headers: where a planted URL rewrite would send git.
type recorder struct {
	url  string
	mu   sync.Mutex
	n    int
	auth []string
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.n++
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		r.mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// assertUntouched fails t when the recorder got a request.
func (r *recorder) assertUntouched(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n > 0 {
		t.Errorf("the recording server got %d requests, with Authorization %q", r.n, r.auth)
	}
}

// plantedConfig is config that runs `touch <markers>/<what>` in every way git
// offers, and sends the forge's URL to rec.
func plantedConfig(markers, forgeURL string, rec *recorder) string {
	touch := func(what string) string { return `"touch ` + filepath.Join(markers, what) + `"` }
	return "[core]\n\tfsmonitor = " + touch("fsmonitor") + "\n\tsshCommand = " + touch("ssh") +
		"\n\tpager = " + touch("pager") + "\n\teditor = " + touch("editor") + "\n\thooksPath = hooks\n" +
		"[filter \"x\"]\n\tclean = " + `"touch ` + filepath.Join(markers, "clean") + `; cat"` +
		"\n\tsmudge = " + `"touch ` + filepath.Join(markers, "smudge") + `; cat"` + "\n\trequired = false\n" +
		"[diff \"x\"]\n\tcommand = " + touch("diff") + "\n\ttextconv = " + touch("textconv") + "\n" +
		"[url \"" + rec.url + "/\"]\n\tinsteadOf = " + forgeURL + "\n" +
		"[credential]\n\thelper = " + `"!touch ` + filepath.Join(markers, "helper") + `"` + "\n"
}

// plantHooks writes every hook git knows of into dir, each touching a marker.
func plantHooks(t *testing.T, dir, markers string) {
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "pre-push", "post-checkout",
		"reference-transaction", "post-index-change", "fsmonitor-watchman", "post-merge", "pre-auto-gc"} {
		write(t, dir, h, "#!/bin/sh\ntouch "+filepath.Join(markers, "hook-"+h)+"\n")
		if err := os.Chmod(filepath.Join(dir, h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// nothingRan fails t for each marker below markers.
func nothingRan(t *testing.T, markers string) {
	t.Helper()
	ran, err := os.ReadDir(markers)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ran {
		t.Errorf("planted %s ran", r.Name())
	}
}

// plantRepo makes dir a git repository (with one commit) whose config and
// hooks are planted.
func plantRepo(t *testing.T, dir, markers, forgeURL string, rec *recorder) {
	gitT(t, filepath.Dir(dir), "init", "-q", dir)
	gitT(t, dir, "commit", "-q", "--allow-empty", "-m", "theirs")
	f, err := os.OpenFile(filepath.Join(dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(plantedConfig(markers, forgeURL, rec)); err != nil {
		t.Fatal(err)
	}
	plantHooks(t, filepath.Join(dir, ".git", "hooks"), markers)
}

// upstreamWithSubmodule is an upstream whose main holds a file a and the
// submodule mod, pinned to the returned commit.
func upstreamWithSubmodule(t *testing.T) (*upstream, string) {
	u := newUpstream(t, map[string]string{"a": "1\n", ".gitmodules": "[submodule \"mod\"]\n\tpath = mod\n\turl = ./mod\n"})
	sub := filepath.Join(t.TempDir(), "sub")
	gitT(t, filepath.Dir(sub), "init", "-q", sub)
	gitT(t, sub, "commit", "-q", "--allow-empty", "-m", "sub")
	pin := gitT(t, sub, "rev-parse", "HEAD")
	gitT(t, u.scratch, "update-index", "--add", "--cacheinfo", "160000,"+pin+",mod")
	gitT(t, u.scratch, "commit", "-q", "-m", "a submodule")
	gitT(t, u.scratch, "push", "-q", "origin", "main")
	return u, pin
}

// TestGitInsideTheCheckoutIsNeverEntered: the checkout holds a submodule's
// repository, a repository the model made and a .git file pointing at one,
// each with config and hooks that run commands and rewrite the forge's URL,
// and .gitattributes naming their filter and diff driver. Checking for
// changes, committing, pushing, making a patch and preparing again run none
// of it, send nothing elsewhere, and commit no gitlink: the submodule's
// pointer stays, the other repositories are left out and said so.
func TestGitInsideTheCheckoutIsNeverEntered(t *testing.T) {
	u, pin := upstreamWithSubmodule(t)
	m := newManager(t, Options{})
	w := prepare(t, m, issueSpec(u, issue12))
	markers, rec := t.TempDir(), newRecorder(t)
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	for _, dir := range []string{filepath.Join(w.Dir, "mod"), filepath.Join(w.Dir, "made"), elsewhere} {
		plantRepo(t, dir, markers, u.url, rec)
		write(t, dir, "file", "x\n")
	}
	write(t, w.Dir, "gitfile/.git", "gitdir: "+filepath.Join(elsewhere, ".git")+"\n")
	write(t, w.Dir, "gitfile/file", "x\n")
	write(t, w.Dir, ".gitattributes", "* filter=x diff=x\n")
	write(t, w.Dir, "a", "2\n")

	ctx := context.Background()
	if dirty, err := w.Changes(ctx); err != nil || !dirty {
		t.Fatalf("Changes = %v, %v", dirty, err)
	}
	sha, err := w.Commit(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Push(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Patch(ctx); err != nil {
		t.Fatal(err)
	}
	prepare(t, m, issueSpec(u, issue12))
	nothingRan(t, markers)
	rec.assertUntouched(t)

	tree := gitT(t, u.bare, "ls-tree", "-r", sha)
	if !strings.Contains(tree, "160000 commit "+pin+"\tmod") {
		t.Errorf("the submodule's pointer changed:\n%s", tree)
	}
	for _, p := range []string{"made", "gitfile"} {
		if strings.Contains(tree, "\t"+p) {
			t.Errorf("%s was committed:\n%s", p, tree)
		}
	}
	if !strings.Contains(tree, "\t.gitattributes") || u.file(sha, "a") != "2" {
		t.Errorf("the work was not committed:\n%s", tree)
	}
	want := map[string]bool{"made/": true, "gitfile/": true}
	for _, l := range w.LeftOut {
		if l.Reason == ReasonRepository {
			delete(want, l.Path)
		}
	}
	if len(want) > 0 {
		t.Errorf("LeftOut = %+v, lacks %v", w.LeftOut, want)
	}
}

// TestPlantsInTheGitDirectoryAreRefused: config, attributes, alternates,
// commondir and hooks written into a task's git directory (as a server
// other than the model's sandbox could) make every command refuse with a
// TamperError naming the file: nothing planted runs, and no request (no
// credential) reaches the server a rewritten URL names.
func TestPlantsInTheGitDirectoryAreRefused(t *testing.T) {
	srv := forgetest.NewGitServer(t)
	srv.InitRepo("acme/app")
	url := srv.RepoURL("acme/app")
	appendTo := func(name, text string) func(t *testing.T, gitDir string) string {
		return func(t *testing.T, gitDir string) string {
			p := filepath.Join(gitDir, name)
			b, _ := os.ReadFile(p)
			write(t, gitDir, name, string(b)+text)
			return p
		}
	}
	markers, rec := t.TempDir(), newRecorder(t)
	planted := plantedConfig(markers, url, rec)
	other := filepath.Join(t.TempDir(), "other.git")
	gitT(t, filepath.Dir(other), "init", "-q", "--bare", other)
	write(t, other, "config", "[core]\n\tbare = true\n"+planted)
	include := filepath.Join(t.TempDir(), "included")
	write(t, include, "", planted)
	for name, plant := range map[string]func(t *testing.T, gitDir string) string{
		"config":          appendTo("config", planted),
		"include":         appendTo("config", "[include]\n\tpath = "+include+"\n"),
		"includeIf":       appendTo("config", "[includeIf \"gitdir:/\"]\n\tpath = "+include+"\n"),
		"info/attributes": appendTo("info/attributes", "* filter=x diff=x\n"),
		"alternates":      appendTo("objects/info/alternates", filepath.Join(other, "objects")+"\n"),
		"commondir":       appendTo("commondir", other+"\n"),
		"hooks": func(t *testing.T, gitDir string) string {
			plantHooks(t, filepath.Join(gitDir, "hooks"), markers)
			return filepath.Join(gitDir, "hooks")
		},
	} {
		t.Run(name, func(t *testing.T) {
			m := newManager(t, Options{})
			s := Spec{Ref: issue12, CloneURL: url, Auth: Static(basic("x-access-token", srv.Token)), Base: "main", Branch: "coding-agent/issue-12"}
			w := prepare(t, m, s)
			path := plant(t, w.gitDir)
			write(t, w.Dir, "b", "b\n")
			ctx := context.Background()
			var te *TamperError
			if _, err := w.Commit(ctx, "work"); !errors.As(err, &te) || te.Path != path {
				t.Errorf("Commit = %v, want a TamperError naming %s", err, path)
			} else if !strings.Contains(err.Error(), path) {
				t.Errorf("the error does not name the file: %v", err)
			}
			if _, err := w.Push(ctx); !errors.Is(err, ErrTampered) {
				t.Errorf("Push = %v, want ErrTampered", err)
			}
			if _, err := w.Patch(ctx); !errors.Is(err, ErrTampered) {
				t.Errorf("Patch = %v, want ErrTampered", err)
			}
			if _, err := m.Prepare(ctx, s); !errors.Is(err, ErrTampered) {
				t.Errorf("Prepare = %v, want ErrTampered", err)
			}
			if read(t, w.Dir, "b") != "b\n" {
				t.Error("the checkout's work is gone")
			}
		})
	}
	nothingRan(t, markers)
	rec.assertUntouched(t)
}

// TestNoGitProcessHoldsTheTokenInItsEnvironment: while the forge answers
// each request of a clone, a fetch and a push, every git process of the
// workspace is alive; none holds the token, in any form, in its
// environment (/proc/<pid>/environ, which processes of the same user can
// read).
func TestNoGitProcessHoldsTheTokenInItsEnvironment(t *testing.T) {
	srv := forgetest.NewGitServer(t)
	srv.InitRepo("acme/app")
	auth := basic("x-access-token", srv.Token)
	secrets := sanitize.NewRedactor(credentials(auth))
	m := newManager(t, Options{})
	mark := []byte("GIT_CEILING_DIRECTORIES=" + m.root + "\x00")
	var mu sync.Mutex
	seen, leaks := map[string]bool{}, map[string]bool{}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		procs, _ := filepath.Glob("/proc/[0-9]*/environ")
		for _, p := range procs {
			env, err := os.ReadFile(p)
			if err != nil || !strings.Contains(string(env), string(mark)) {
				continue // gone, or not ours
			}
			cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			mu.Lock()
			seen[strings.ReplaceAll(string(cmdline), "\x00", " ")] = true
			if secrets.Holds(string(env)) {
				leaks[strings.ReplaceAll(string(cmdline), "\x00", " ")] = true
			}
			mu.Unlock()
		}
		srv.ServeHTTP(w, r)
	}))
	defer front.Close()
	s := Spec{Ref: issue12, CloneURL: front.URL + "/acme/app.git", Auth: Static(auth), Base: "main", Branch: "coding-agent/issue-12"}
	w := prepare(t, m, s)
	srv.CommitFile("acme/app", "main", "new", "new\n", "moved on")
	prepare(t, m, s) // fetches
	write(t, w.Dir, "b", "b\n")
	ctx := context.Background()
	if _, err := w.Commit(ctx, "work"); err != nil {
		t.Fatal(err)
	}
	if pushed, err := w.Push(ctx); err != nil || !pushed {
		t.Fatalf("Push = %v, %v", pushed, err)
	}
	mu.Lock()
	defer mu.Unlock()
	var pushers int
	for c := range seen {
		if strings.Contains(c, "push") || strings.Contains(c, "remote-http") {
			pushers++
		}
	}
	if pushers == 0 {
		t.Fatalf("no git process of a push was seen (saw %v): the check looked at nothing", seen)
	}
	for l := range leaks {
		t.Errorf("the token is in the environment of %q", l)
	}
}
