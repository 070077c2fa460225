// Package buildtest builds this module's commands for tests: the daemon's
// binary and the MCP test server. A command is built once for each state of
// the sources and kept in the user's cache folder, and the builds of every
// test process on the machine take turns under one lock: go test runs
// several packages' tests at once, and on a cold build cache each of them
// compiling the whole tree again for its own `go build` took minutes.
package buildtest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// keep is how long a built command no test used stays in the cache.
const keep = time.Hour

var (
	mu     sync.Mutex
	builds = map[string]*build{} // by package
)

type build struct {
	once sync.Once
	path string
	err  error
}

// Command returns the path of the binary of pkg, a package of this module
// given from its root ("./cmd/coding-agent"), built with the go command on
// PATH (no -race: the binary is run as users run it). The test fails when it
// cannot be built.
func Command(t testing.TB, pkg string) string {
	t.Helper()
	mu.Lock()
	b := builds[pkg]
	if b == nil {
		b = &build{}
		builds[pkg] = b
	}
	mu.Unlock()
	b.once.Do(func() { b.path, b.err = command(pkg) })
	if b.err != nil {
		t.Fatalf("building %s: %v", pkg, b.err)
	}
	return b.path
}

func command(pkg string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	key, err := sourceKey(root)
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	name := path.Base(pkg)
	dir := filepath.Join(base, "coding-agent", "bin", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the build cache folder: %w", err)
	}
	bin := filepath.Join(dir, key, name)
	var out []byte
	err = Locked(func() error {
		if _, err := os.Stat(bin); err == nil {
			now := time.Now()
			return os.Chtimes(filepath.Dir(bin), now, now) // in use: not pruned
		}
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return fmt.Errorf("creating the build folder: %w", err)
		}
		tmp := bin + ".tmp"
		cmd := exec.Command("go", "build", "-o", tmp, pkg)
		cmd.Dir = root
		if out, err = cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
		if err := os.Rename(tmp, bin); err != nil {
			return fmt.Errorf("installing the built binary: %w", err)
		}
		prune(dir, key)
		return nil
	})
	if err != nil {
		return "", err
	}
	return bin, nil
}

// prune removes the builds of other source states no test used for keep.
func prune(dir, key string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && e.IsDir() && e.Name() != key && time.Since(fi.ModTime()) > keep {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// Locked runs f holding the machine-wide build lock: a test that runs the
// go command to build (with flags of its own) takes turns with the others.
func Locked(f func() error) error {
	lock := filepath.Join(os.TempDir(), "coding-agent-test-build.lock")
	l, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return fmt.Errorf("opening the build lock: %w", err)
	}
	defer l.Close()
	for {
		err = unix.Flock(int(l.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("taking the build lock %s: %w", lock, err)
	}
	defer unix.Flock(int(l.Fd()), unix.LOCK_UN)
	return f()
}

// sourceKey hashes what a build of the module's commands depends on that
// can change: the Go version, go.mod, go.sum and every file of cmd/ and
// internal/ but tests and test data (the templates are embedded).
func sourceKey(root string) (string, error) {
	files := []string{"go.mod", "go.sum"}
	for _, top := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && d.Name() == "testdata":
				return filepath.SkipDir
			case d.Type().IsRegular() && !strings.HasSuffix(p, "_test.go"):
				rel, _ := filepath.Rel(root, p)
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("listing the sources: %w", err)
		}
	}
	sort.Strings(files[2:])
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, os.Getenv("GOFLAGS")+" "+os.Getenv("CGO_ENABLED"))
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "", fmt.Errorf("hashing the sources: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// PublicDir is a new folder under parent ("" → the temporary folder) that
// every user may enter (t.TempDir's are its user's alone), removed when
// the test ends: where a test runs a binary as another user.
func PublicDir(t testing.TB, parent, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// CopyExecutable copies the program from to a new file to, mode 0755: a
// binary where another user may run it, or where a sandbox does not hide
// it.
func CopyExecutable(t testing.TB, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// ModuleRoot returns the folder of this module's go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// moduleRoot walks up from this file's folder to the one holding go.mod.
func moduleRoot() (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("locating the module: runtime.Caller failed")
	}
	for d := filepath.Dir(self); ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("finding go.mod above %s: not found", self)
		}
	}
}
