package mcptest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
)

const serverPkg = "github.com/coding-agent/coding-agent/internal/toolhost/mcptest/testserver"

var built struct {
	once sync.Once
	path string
	err  error
}

// Build compiles the test server (testserver/) once per test process and returns
// the path of the binary. Binaries are cached under the user cache directory,
// keyed by a hash of the server's sources, go.mod, go.sum and the Go version, so
// the test packages that use it share one build.
func Build(t testing.TB) string {
	t.Helper()
	built.once.Do(func() { built.path, built.err = build() })
	if built.err != nil {
		t.Fatalf("building the MCP test server: %v", built.err)
	}
	return built.path
}

func build() (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("locating mcptest sources: runtime.Caller failed")
	}
	pkgDir := filepath.Dir(self)
	key, err := sourceKey(pkgDir)
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "coding-agent", "mcptest", key)
	bin := filepath.Join(dir, "testserver")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating build cache dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "testserver-*.tmp")
	if err != nil {
		return "", fmt.Errorf("creating build output: %w", err)
	}
	_ = tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command("go", "build", "-o", tmp.Name(), serverPkg)
	cmd.Dir = pkgDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", serverPkg, err, out)
	}
	// Rename is atomic: concurrent test processes never see a partial binary.
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", fmt.Errorf("installing test server binary: %w", err)
	}
	return bin, nil
}

// sourceKey hashes everything the binary depends on that can change in this module.
func sourceKey(pkgDir string) (string, error) {
	root, err := moduleRoot(pkgDir)
	if err != nil {
		return "", err
	}
	files := []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	err = filepath.WalkDir(pkgDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("listing test server sources: %w", err)
	}
	sort.Strings(files[2:])
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("hashing test server sources: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// moduleRoot walks up from dir to the directory holding go.mod.
func moduleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("finding go.mod above %s: not found", dir)
		}
	}
}

// ModuleRoot returns the directory of this module's go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("locating mcptest sources: runtime.Caller failed")
	}
	root, err := moduleRoot(filepath.Dir(self))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// NodeModule returns the path of rel under the module's node_modules directory
// (for example ".bin/mcp-server-filesystem"). The test fails when it is missing:
// the npm packages are part of the test setup, not optional.
func NodeModule(t testing.TB, rel string) string {
	t.Helper()
	root := ModuleRoot(t)
	p := filepath.Join(root, "node_modules", filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run npm ci in %s (%v)", p, root, err)
	}
	return p
}
