package obs

import (
	"compress/gzip"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/sanitize"
)

// clock is a settable time source for the day logic; the test goroutine is
// the only one that logs, so it needs no lock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestLogger(t *testing.T, opts LogOptions) *slog.Logger {
	t.Helper()
	log, closer, err := NewLogger(opts)
	if err != nil {
		t.Fatalf("NewLogger: %v", err)
	}
	t.Cleanup(func() {
		if err := closer.Close(); err != nil {
			t.Errorf("closing logger: %v", err)
		}
	})
	return log
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// backups lists the rotated files next to file (lumberjack names them
// agent-<time>.log, then agent-<time>.log.gz once compressed).
func backups(t *testing.T, file string) []string {
	t.Helper()
	ext := filepath.Ext(file)
	prefix := strings.TrimSuffix(filepath.Base(file), ext) + "-"
	entries, err := os.ReadDir(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, filepath.Join(filepath.Dir(file), e.Name()))
		}
	}
	return out
}

// waitGzipped waits for lumberjack's background goroutine to compress the
// single backup. It polls the directory in short waits, bounded at 10s:
// lumberjack offers no completion signal, and its goroutine never exits,
// which rules out a synctest bubble.
func waitGzipped(t *testing.T, file string) string {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		b := backups(t, file)
		if len(b) == 1 && strings.HasSuffix(b[0], ".gz") {
			return b[0]
		}
		if len(b) > 1 && !strings.HasSuffix(b[0], ".gz") && !strings.HasSuffix(b[1], ".gz") {
			t.Fatalf("backups %v: want one", b)
		}
		select {
		case <-deadline.C:
			t.Fatalf("rotated file not compressed in time; backups: %v", b)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s is not gzip: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDailyRotation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "logs", "nested", "agent.log")
	clk := &clock{t: time.Date(2026, 3, 1, 23, 58, 0, 0, time.Local)}
	log := newTestLogger(t, LogOptions{File: file, Now: clk.now})

	log.Info("first on day one")
	clk.t = clk.t.Add(time.Minute)
	log.Info("second on day one")
	if b := backups(t, file); len(b) != 0 {
		t.Fatalf("rotated within one day: %v", b)
	}
	clk.t = clk.t.Add(2 * time.Minute) // 00:01 on day two
	log.Info("first on day two")

	cur := readFile(t, file)
	if !strings.Contains(cur, "first on day two") || strings.Contains(cur, "day one") {
		t.Fatalf("current file after midnight:\n%s", cur)
	}
	old := gunzip(t, waitGzipped(t, file))
	if !strings.Contains(old, "first on day one") || !strings.Contains(old, "second on day one") ||
		strings.Contains(old, "day two") {
		t.Errorf("rotated file:\n%s", old)
	}
	for _, line := range strings.Split(strings.TrimSpace(old), "\n") {
		if !strings.HasPrefix(line, `{"time":`) {
			t.Errorf("not a JSON line: %s", line)
		}
	}
}

// TestRotatesFileFromEarlierRun: a file last written yesterday by a previous
// run is rotated at today's first write.
func TestRotatesFileFromEarlierRun(t *testing.T) {
	file := filepath.Join(t.TempDir(), "agent.log")
	clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.Local)}
	if err := os.WriteFile(file, []byte(`{"msg":"yesterday"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yesterday := clk.t.Add(-24 * time.Hour)
	if err := os.Chtimes(file, yesterday, yesterday); err != nil {
		t.Fatal(err)
	}
	log := newTestLogger(t, LogOptions{File: file, Now: clk.now})
	log.Info("today")
	if cur := readFile(t, file); strings.Contains(cur, "yesterday") {
		t.Fatalf("yesterday's lines still in the current file:\n%s", cur)
	}
	if old := gunzip(t, waitGzipped(t, file)); !strings.Contains(old, "yesterday") {
		t.Errorf("rotated file:\n%s", old)
	}
}

func TestLevelFiltering(t *testing.T) {
	file := filepath.Join(t.TempDir(), "agent.log")
	log := newTestLogger(t, LogOptions{File: file, Level: "WARN"})
	log.Debug("debug line")
	log.Info("info line")
	log.Warn("warn line")
	log.Error("error line")
	got := readFile(t, file)
	if strings.Contains(got, "debug line") || strings.Contains(got, "info line") ||
		!strings.Contains(got, "warn line") || !strings.Contains(got, "error line") {
		t.Errorf("level warn wrote:\n%s", got)
	}

	file = filepath.Join(t.TempDir(), "agent.log")
	newTestLogger(t, LogOptions{File: file}).Debug("hidden")
	newTestLogger(t, LogOptions{File: file}).Info("shown")
	if got := readFile(t, file); strings.Contains(got, "hidden") || !strings.Contains(got, "shown") {
		t.Errorf("default level wrote:\n%s", got)
	}

	if _, _, err := NewLogger(LogOptions{Level: "verbose"}); err == nil {
		t.Error("NewLogger accepted level \"verbose\"")
	}
}

func TestFileLoggerRedacts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "agent.log")
	log := newTestLogger(t, LogOptions{File: file, Secrets: []string{token}})
	log.Info("using "+token, "token", token)
	got := readFile(t, file)
	if strings.Contains(got, token) || strings.Count(got, sanitize.Redacted) != 2 {
		t.Errorf("file:\n%s", got)
	}
}

// captureStd points *std (os.Stdout or os.Stderr) at a temporary file for the
// rest of the test and returns a function reading what was written.
func captureStd(t *testing.T, std **os.File) func() string {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "std"))
	if err != nil {
		t.Fatal(err)
	}
	saved := *std
	*std = f
	t.Cleanup(func() { *std = saved; f.Close() })
	return func() string { return readFile(t, f.Name()) }
}

func TestStdoutOnlyWhenAsked(t *testing.T) {
	stdout := captureStd(t, &os.Stdout)
	stderr := captureStd(t, &os.Stderr)
	file := filepath.Join(t.TempDir(), "agent.log")

	newTestLogger(t, LogOptions{File: file}).Info("file only")
	if out := stdout(); out != "" {
		t.Errorf("stdout without Stdout:\n%s", out)
	}
	newTestLogger(t, LogOptions{File: file, Stdout: true, Secrets: []string{apiKey}}).Info("both", "k", apiKey)
	out := stdout()
	if !strings.Contains(out, "msg=both") || !strings.Contains(out, "k="+sanitize.Redacted) {
		t.Errorf("stdout with Stdout (text, redacted):\n%s", out)
	}
	if got := readFile(t, file); !strings.Contains(got, `"msg":"both"`) {
		t.Errorf("file with Stdout:\n%s", got)
	}
	if e := stderr(); e != "" {
		t.Errorf("stderr while a file is set:\n%s", e)
	}

	newTestLogger(t, LogOptions{}).Info("nowhere else")
	if e := stderr(); !strings.Contains(e, "msg=\"nowhere else\"") {
		t.Errorf("stderr without File and Stdout:\n%s", e)
	}
}

func TestFileWriterDefaults(t *testing.T) {
	dir := t.TempDir()
	w, err := newDailyWriter(LogOptions{File: filepath.Join(dir, "a.log")})
	if err != nil {
		t.Fatal(err)
	}
	if w.lj.MaxAge != 30 || !w.lj.Compress || w.lj.MaxSize != maxSizeMB {
		t.Errorf("lumberjack defaults: %+v", w.lj)
	}
	w, err = newDailyWriter(LogOptions{File: filepath.Join(dir, "b.log"), MaxAgeDays: -1})
	if err != nil {
		t.Fatal(err)
	}
	if w.lj.MaxAge != 0 {
		t.Errorf("MaxAgeDays -1 gave lumberjack MaxAge %d, want 0 (keep all)", w.lj.MaxAge)
	}
}
