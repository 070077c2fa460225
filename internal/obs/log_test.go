package obs

import (
	"compress/gzip"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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

// backups lists the rotated files next to file (agent-<day>.log, gzipped
// agent-<day>.log.gz), sorted by name.
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

// names are the base names of paths.
func names(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	return out
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

// openLogger is NewLogger whose closer the test calls itself (closing
// waits for the background tidying of rotated files).
func openLogger(t *testing.T, opts LogOptions) (*slog.Logger, func()) {
	t.Helper()
	log, closer, err := NewLogger(opts)
	if err != nil {
		t.Fatalf("NewLogger: %v", err)
	}
	return log, func() {
		if err := closer.Close(); err != nil {
			t.Errorf("closing logger: %v", err)
		}
	}
}

// The file turns at the first write after midnight: the day's lines move
// to a file named by their day, which stays plain while it is yesterday's
// and is gzipped once it is older.
func TestDailyRotation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "logs", "nested", "agent.log")
	clk := &clock{t: time.Date(2026, 3, 1, 23, 58, 0, 0, time.Local)}
	log, closeLog := openLogger(t, LogOptions{File: file, Now: clk.now})

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
	dayOne := filepath.Join(filepath.Dir(file), "agent-2026-03-01.log")
	if b := backups(t, file); len(b) != 1 || b[0] != dayOne {
		t.Fatalf("rotated files %v, want %s", names(b), filepath.Base(dayOne))
	}
	old := readFile(t, dayOne)
	if !strings.Contains(old, "first on day one") || !strings.Contains(old, "second on day one") ||
		strings.Contains(old, "day two") {
		t.Errorf("rotated file:\n%s", old)
	}
	for _, line := range strings.Split(strings.TrimSpace(old), "\n") {
		if !strings.HasPrefix(line, `{"time":`) {
			t.Errorf("not a JSON line: %s", line)
		}
	}

	clk.t = time.Date(2026, 3, 4, 8, 0, 0, 0, time.Local) // nothing logged on day three
	log.Info("day four")
	closeLog()
	want := []string{"agent-2026-03-01.log.gz", "agent-2026-03-02.log.gz"}
	if b := names(backups(t, file)); !slices.Equal(b, want) {
		t.Fatalf("rotated files on day four %v, want %v", b, want)
	}
	if got := gunzip(t, dayOne+".gz"); got != old {
		t.Errorf("gzipped day one:\n%s\nwant:\n%s", got, old)
	}
	if got := gunzip(t, filepath.Join(filepath.Dir(file), want[1])); !strings.Contains(got, "first on day two") {
		t.Errorf("gzipped day two:\n%s", got)
	}
	if cur := readFile(t, file); !strings.Contains(cur, "day four") || strings.Contains(cur, "day two") {
		t.Errorf("current file on day four:\n%s", cur)
	}
}

// TestRotatesFileFromEarlierRun: a file last written yesterday by a previous
// run (of a version without the lock file) is rotated at today's first
// write, named by the day it was written.
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
	if old := readFile(t, filepath.Join(filepath.Dir(file), "agent-2026-03-01.log")); !strings.Contains(old, "yesterday") {
		t.Errorf("rotated file:\n%s", old)
	}
}

// A rotated file's name already taken (a clock set back, a copy restored)
// is kept: the rotation takes the next free name of the same day.
func TestRotationKeepsATakenName(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "agent.log")
	for _, n := range []string{"agent-2026-03-01.log", "agent-2026-03-01.1.log.gz"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("before\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clk := &clock{t: time.Date(2026, 3, 1, 23, 0, 0, 0, time.Local)}
	log, closeLog := openLogger(t, LogOptions{File: file, Now: clk.now})
	log.Info("late on day one")
	clk.t = clk.t.Add(2 * time.Hour)
	log.Info("day two")
	closeLog()
	if got := readFile(t, filepath.Join(dir, "agent-2026-03-01.log")); got != "before\n" {
		t.Errorf("the earlier file of the day changed:\n%s", got)
	}
	if got := readFile(t, filepath.Join(dir, "agent-2026-03-01.2.log")); !strings.Contains(got, "late on day one") {
		t.Errorf("the rotated file:\n%s", got)
	}
}

// Rotated files older than MaxAgeDays are removed at a rotation; younger
// ones and files that are not rotated logs stay.
func TestMaxAgePrunesOldDays(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "agent.log")
	for _, n := range []string{"agent-2026-02-20.log.gz", "agent-2026-02-25.log", "agent-2026-02-26.3.log.gz",
		"agent-2026-02-27.log.gz", "agent-2026-02-28.log", "agent-notes.txt", "other-2026-01-01.log"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clk := &clock{t: time.Date(2026, 3, 1, 23, 0, 0, 0, time.Local)}
	log, closeLog := openLogger(t, LogOptions{File: file, Now: clk.now, MaxAgeDays: 3})
	log.Info("day one")
	clk.t = clk.t.Add(2 * time.Hour) // 2026-03-02: keep 02-27 and later
	log.Info("day two")
	closeLog()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{"agent-2026-02-27.log.gz", "agent-2026-02-28.log.gz", "agent-2026-03-01.log", "agent-notes.txt",
		"agent.log", "agent.log.lock", "other-2026-01-01.log"}
	if !slices.Equal(got, want) {
		t.Errorf("files after the rotation:\n%v\nwant\n%v", got, want)
	}

	// Negative keeps every day.
	file = filepath.Join(t.TempDir(), "agent.log")
	old := filepath.Join(filepath.Dir(file), "agent-2020-01-01.log.gz")
	if err := os.WriteFile(old, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	clk.t = time.Date(2026, 3, 1, 23, 0, 0, 0, time.Local)
	log, closeLog = openLogger(t, LogOptions{File: file, Now: clk.now, MaxAgeDays: -1})
	log.Info("day one")
	clk.t = clk.t.Add(2 * time.Hour)
	log.Info("day two")
	closeLog()
	if _, err := os.Stat(old); err != nil {
		t.Errorf("MaxAgeDays -1 removed a rotated file: %v", err)
	}
}

// A writer whose clock is behind the one that turned the day writes its
// lines to their day's file: one that already had the file open appends
// through its descriptor, one that opens it now finds the dated file.
func TestWriterBehindTheDayWritesToItsDay(t *testing.T) {
	file := filepath.Join(t.TempDir(), "agent.log")
	early := &clock{t: time.Date(2026, 3, 1, 23, 59, 0, 0, time.Local)}
	late := &clock{t: early.t.Add(2 * time.Minute)}
	a := newTestLogger(t, LogOptions{File: file, Now: early.now})
	a.Info("a before midnight")
	b := newTestLogger(t, LogOptions{File: file, Now: late.now})
	b.Info("b after midnight")
	a.Info("a still before midnight")
	c := newTestLogger(t, LogOptions{File: file, Now: early.now})
	c.Info("c before midnight")
	old := readFile(t, filepath.Join(filepath.Dir(file), "agent-2026-03-01.log"))
	cur := readFile(t, file)
	for _, m := range []string{"a before midnight", "a still before midnight", "c before midnight"} {
		if !strings.Contains(old, m) || strings.Contains(cur, m) {
			t.Errorf("%q is not in the file of its day only\nday one:\n%s\ncurrent:\n%s", m, old, cur)
		}
	}
	if !strings.Contains(cur, "b after midnight") {
		t.Errorf("current file:\n%s", cur)
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
	for _, c := range []struct{ in, want int }{{0, 30}, {-1, -1}, {-5, -1}, {7, 7}} {
		w, err := newFileWriter(LogOptions{File: filepath.Join(dir, "a.log"), MaxAgeDays: c.in})
		if err != nil {
			t.Fatal(err)
		}
		if w.maxAge != c.want {
			t.Errorf("MaxAgeDays %d kept %d days, want %d", c.in, w.maxAge, c.want)
		}
		w.Close()
	}
}

// BenchmarkLogWrite is one info record with a few attributes through the
// redacting JSON logger to the shared log file.
func BenchmarkLogWrite(b *testing.B) {
	file := filepath.Join(b.TempDir(), "agent.log")
	log, closer, err := NewLogger(LogOptions{File: file, Secrets: []string{token}})
	if err != nil {
		b.Fatal(err)
	}
	defer closer.Close()
	log = log.With("task", "github:acme/app#12")
	for b.Loop() {
		log.Info("model request done", "llm_calls", 3, "tokens_in", 1200, "duration", 850*time.Millisecond)
	}
}
