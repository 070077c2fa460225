package workspace

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
)

func TestTwoTasksWorkAtOnce(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "1\n"})
	m := newManager(t, Options{})
	refs := []task.Ref{issue12, {Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 13}}
	shas := make([]string, len(refs))
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Go(func() {
			ctx := context.Background()
			w, err := m.Prepare(ctx, issueSpec(u, ref))
			if err == nil {
				err = os.WriteFile(filepath.Join(w.Dir, "a"), []byte(ref.String()+"\n"), 0o644)
			}
			if err == nil {
				shas[i], err = w.Commit(ctx, "work on "+ref.String())
			}
			if err == nil {
				_, err = w.Push(ctx)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, ref := range refs {
		if errs[i] != nil {
			t.Fatalf("%s: %v", ref, errs[i])
		}
		branch := issueSpec(u, ref).Branch
		if got := u.sha("refs/heads/" + branch); got != shas[i] || shas[i] == "" {
			t.Errorf("%s is at %q, want %q", branch, got, shas[i])
		}
		if got := u.file(branch, "a"); got != ref.String() {
			t.Errorf("%s holds a = %q", branch, got)
		}
	}
}

func TestSameTaskPreparedTwiceAtOnceIsClonedOnce(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "1\n"})
	bin, log := recordingGit(t, "")
	m := newManager(t, Options{Git: bin})
	dirs := make([]string, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range dirs {
		wg.Go(func() {
			w, err := m.Prepare(context.Background(), issueSpec(u, issue12))
			if err == nil {
				dirs[i] = w.Dir
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || dirs[0] != dirs[1] {
		t.Fatalf("Prepare twice at once: %v, %v; dirs %q", errs[0], errs[1], dirs)
	}
	inits := 0
	for _, c := range calls(t, log) {
		if strings.HasPrefix(c, "none init ") {
			inits++
		}
	}
	if inits != 1 {
		t.Fatalf("%d clones for one task:\n%s", inits, strings.Join(calls(t, log), "\n"))
	}
}

// TestCrashMidCloneIsClonedAgain kills a process while git fetches its
// first clone, then prepares the same workspace in this one.
func TestCrashMidCloneIsClonedAgain(t *testing.T) {
	if os.Getenv("WORKSPACE_CRASH_ROOT") != "" {
		crashingPrepare(t)
		return
	}
	u := newUpstream(t, map[string]string{"a": "1\n"})
	root := t.TempDir()
	// The wrapper kills its parent (the test process below) when git is to
	// fetch, then lets git go on: a clone cut short by a crash.
	bin, _ := recordingGit(t, `[ "$1" = fetch ] && kill -9 $PPID`)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashMidCloneIsClonedAgain$")
	cmd.Env = append(os.Environ(), "WORKSPACE_CRASH_ROOT="+root, "WORKSPACE_CRASH_URL="+u.url, "WORKSPACE_CRASH_GIT="+bin)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Exited() {
		t.Fatalf("the process was not killed: %v\n%s", err, out)
	}
	left, _ := filepath.Glob(filepath.Join(root, tmpDir, "*"))
	if len(left) != 1 {
		t.Fatalf("the crash left %q in %s, want one clone cut short", left, tmpDir)
	}

	m := newManager(t, Options{Root: root})
	w := prepare(t, m, issueSpec(u, issue12))
	if got := read(t, w.Dir, "a"); got != "1\n" {
		t.Fatalf("a = %q", got)
	}
	if left, _ := filepath.Glob(filepath.Join(root, tmpDir, "*")); len(left) != 0 {
		t.Fatalf("the clone cut short is still there: %q", left)
	}
}

// TestRemoveTakesAClonesCutShort: a task that ends after a crash cut its
// clone short leaves nothing behind.
func TestRemoveTakesAClonesCutShort(t *testing.T) {
	m := newManager(t, Options{})
	other := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 120}
	for _, ref := range []task.Ref{issue12, other} {
		if err := os.MkdirAll(filepath.Join(m.root, tmpDir, folderName(ref)+"~123", gitDir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Remove(context.Background(), issue12); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(m.root, tmpDir, "*"))
	if len(left) != 1 || !strings.HasPrefix(filepath.Base(left[0]), folderName(other)+"~") {
		t.Fatalf("left in %s: %q, want only the other task's", tmpDir, left)
	}
}

// crashingPrepare is the process TestCrashMidCloneIsClonedAgain kills.
func crashingPrepare(t *testing.T) {
	m := newManager(t, Options{Root: os.Getenv("WORKSPACE_CRASH_ROOT"), Git: os.Getenv("WORKSPACE_CRASH_GIT")})
	s := issueSpec(&upstream{url: os.Getenv("WORKSPACE_CRASH_URL")}, issue12)
	_, err := m.Prepare(context.Background(), s)
	t.Fatalf("Prepare returned (%v): the wrapper should have killed this process", err)
}

// TestIncompleteWorkspaceIsClonedAgain: a task folder that is not a whole
// workspace (left by hand, or by an older version) is replaced.
func TestIncompleteWorkspaceIsClonedAgain(t *testing.T) {
	u := newUpstream(t, map[string]string{"a": "1\n"})
	m := newManager(t, Options{})
	for _, d := range []string{gitDir, workDir} {
		if err := os.MkdirAll(filepath.Join(m.folder(issue12), d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(m.folder(issue12), workDir), "stray", "x")
	w := prepare(t, m, issueSpec(u, issue12))
	if got := read(t, w.Dir, "a"); got != "1\n" {
		t.Fatalf("a = %q", got)
	}
	if _, err := os.Stat(filepath.Join(w.Dir, "stray")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the incomplete workspace was kept: %v", err)
	}
}

// TestGitCommandsHaveATimeout: a forge that never answers ends the command
// at the timeout with the context's error, and git's helper that holds the
// connection (git-remote-http) ends with it. On a loaded machine the
// timeout may end git before its helper connected: then no process of it
// may be left either.
func TestGitCommandsHaveATimeout(t *testing.T) {
	hang, gone := make(chan struct{}), make(chan struct{}, 8)
	var arrived atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-r.Context().Done(): // the client went away
			gone <- struct{}{}
		case <-hang:
		}
	}))
	defer srv.Close()
	defer close(hang)
	m := newManager(t, Options{Timeout: 200 * time.Millisecond})
	_, err := m.Prepare(context.Background(), Spec{Ref: issue12, CloneURL: srv.URL + "/acme/app.git",
		Base: "main", Branch: "coding-agent/issue-12"})
	var e *Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || e.Command != "ls-remote" {
		t.Fatalf("Prepare against a forge that hangs = %v, want ls-remote's deadline", err)
	}
	if arrived.Load() == 0 {
		if pids := processesNaming(srv.URL); len(pids) > 0 {
			t.Fatalf("git was stopped before it connected, and processes %v naming the forge are left", pids)
		}
		return
	}
	select {
	case <-gone:
	case <-time.After(30 * time.Second): // a bound, not a measurement
		t.Fatal("the connection is still open: git's helper outlived the timeout")
	}
}

// processesNaming lists the live processes whose command line holds s.
func processesNaming(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if cmdline, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")); strings.Contains(string(cmdline), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}
