package obs

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// fileWriter appends log records to a file that several processes may
// share (two hosts' processes on one machine, `serve` and a `status`, a
// produce/consume pair), and rotates it once a day in agreement with them.
//
//   - Each record is one write(2) on a descriptor opened with O_APPEND, so
//     the kernel puts every record whole at the end of the file, whoever
//     else appends.
//   - The lock file (the log's name + ".lock") is flocked while a process
//     opens, rotates or tidies the files, and holds the day of the lines
//     the current file takes. A process rotates only under the lock and
//     only when that day is older than its own clock's; one that finds the
//     day already turned just opens the new file. Between those moments a
//     process writes without taking the lock: a process whose clock is
//     still in yesterday appends to yesterday's file (its descriptor
//     followed the rename), which is where its lines belong.
//   - The rotated file is named by the day its lines belong to,
//     agent-2026-03-01.log (agent-2026-03-01.1.log if that name is taken).
//     Yesterday's file stays plain, for writers still in yesterday; older
//     days are gzipped, and days older than MaxAgeDays are removed, in the
//     background after a rotation.
type fileWriter struct {
	path   string
	maxAge int // days of rotated files kept; < 0: all
	now    func() time.Time

	mu   sync.Mutex
	lock *os.File // path + ".lock"
	f    *os.File // the file this process appends to; nil before the first write
	day  string   // the day of the lines f takes

	bg      sync.WaitGroup // tidy runs
	errMu   sync.Mutex
	tidyErr error // the first failure of a tidy run, returned by Close
}

func newFileWriter(opts LogOptions) (*fileWriter, error) {
	if err := os.MkdirAll(filepath.Dir(opts.File), 0o750); err != nil {
		return nil, fmt.Errorf("creating log directory for %s: %w", opts.File, err)
	}
	lock, err := os.OpenFile(opts.File+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening log lock file: %w", err)
	}
	w := &fileWriter{path: opts.File, maxAge: opts.MaxAgeDays, now: opts.Now, lock: lock}
	switch {
	case w.maxAge == 0:
		w.maxAge = defaultMaxAgeDays
	case w.maxAge < 0:
		w.maxAge = -1
	}
	if w.now == nil {
		w.now = time.Now
	}
	// The file is opened now, not at the first record: slog drops a
	// handler's errors, so a file that cannot be written would lose every
	// line without a word. At start it is the command's error.
	if err := w.turn(dayOf(w.now())); err != nil {
		lock.Close()
		return nil, err
	}
	return w, nil
}

// unwrapPath is the reason of a *fs.PathError without its repetition of
// the operation and path, which the message already names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func dayOf(t time.Time) string { return t.Local().Format(time.DateOnly) }

// Write appends p, one record, to the file of the clock's day.
func (w *fileWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if today := dayOf(w.now()); today != w.day || w.f == nil {
		if err := w.turn(today); err != nil {
			return 0, err
		}
	}
	return w.f.Write(p)
}

// turn points w at the file for today's lines, rotating the current file
// when its day is older, under the lock.
func (w *fileWriter) turn(today string) error {
	if err := flock(w.lock, syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking log file %s: %w", w.path, err)
	}
	rotated, err := w.turnLocked(today)
	if uerr := flock(w.lock, syscall.LOCK_UN); uerr != nil && err == nil {
		err = fmt.Errorf("unlocking log file %s: %w", w.path, uerr)
	}
	if err != nil {
		return err
	}
	if rotated {
		w.bg.Go(func() { w.keepErr(w.tidy(today)) })
	}
	return nil
}

func (w *fileWriter) turnLocked(today string) (rotated bool, err error) {
	cur, err := w.currentDay(today)
	if err != nil {
		return false, err
	}
	target := w.path
	switch {
	case cur < today:
		if err := w.rotate(cur); err != nil {
			return false, err
		}
		if err := w.setCurrentDay(today); err != nil {
			return false, err
		}
		rotated = true
	case cur > today:
		// Our clock is behind the process that turned the day: our lines
		// go to their day's file while it is still plain.
		if old := w.lastPlain(today); old != "" {
			target = old
		}
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return rotated, fmt.Errorf("opening log file %s: %w", target, unwrapPath(err))
	}
	if w.f != nil {
		w.f.Close()
	}
	w.f, w.day = f, today
	return rotated, nil
}

// currentDay is the day of the current file's lines as the lock file
// records it. A lock file that records none (a first start, or a log left
// by a version without it) takes the day the file was last written, or
// today without a file, and records it.
func (w *fileWriter) currentDay(today string) (string, error) {
	b := make([]byte, len(time.DateOnly)+1)
	n, err := w.lock.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading log lock file: %w", err)
	}
	if day := strings.TrimSpace(string(b[:n])); validDay(day) {
		return day, nil
	}
	day := today
	if fi, err := os.Stat(w.path); err == nil {
		day = dayOf(fi.ModTime())
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("checking log file: %w", err)
	}
	return day, w.setCurrentDay(day)
}

func (w *fileWriter) setCurrentDay(day string) error {
	if err := w.lock.Truncate(0); err != nil {
		return fmt.Errorf("writing log lock file: %w", err)
	}
	if _, err := w.lock.WriteAt([]byte(day+"\n"), 0); err != nil {
		return fmt.Errorf("writing log lock file: %w", err)
	}
	return nil
}

// rotate renames the current file after day, its lines' day.
func (w *fileWriter) rotate(day string) error {
	if _, err := os.Stat(w.path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for n := 0; ; n++ {
		name := w.dated(day, n)
		_, err1 := os.Lstat(name)
		_, err2 := os.Lstat(name + ".gz")
		if !errors.Is(err1, os.ErrNotExist) || !errors.Is(err2, os.ErrNotExist) {
			continue
		}
		if err := os.Rename(w.path, name); err != nil {
			return fmt.Errorf("rotating log file: %w", err)
		}
		return nil
	}
}

// dated is the name of the n-th rotated file of day: agent-2026-03-01.log,
// then agent-2026-03-01.1.log.
func (w *fileWriter) dated(day string, n int) string {
	ext := filepath.Ext(w.path)
	base := strings.TrimSuffix(w.path, ext) + "-" + day
	if n > 0 {
		base += "." + strconv.Itoa(n)
	}
	return base + ext
}

// lastPlain is the newest rotated file of day that is not gzipped, "" if
// none.
func (w *fileWriter) lastPlain(day string) string {
	last := ""
	for n := 0; ; n++ {
		name := w.dated(day, n)
		if _, err := os.Stat(name); err == nil {
			last = name
			continue
		}
		if _, err := os.Stat(name + ".gz"); err == nil {
			last = ""
			continue
		}
		return last
	}
}

// rotatedFile is a rotated log file found beside the current one.
type rotatedFile struct {
	path string
	day  string
	gz   bool
}

// rotatedFiles lists the rotated files beside the current one.
func (w *fileWriter) rotatedFiles() ([]rotatedFile, error) {
	dir := filepath.Dir(w.path)
	ext := filepath.Ext(w.path)
	prefix := strings.TrimSuffix(filepath.Base(w.path), ext) + "-"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing rotated log files: %w", err)
	}
	var out []rotatedFile
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || len(name) < len(time.DateOnly) || !e.Type().IsRegular() {
			continue
		}
		day, rest := name[:len(time.DateOnly)], name[len(time.DateOnly):]
		gz := strings.HasSuffix(rest, ".gz")
		rest = strings.TrimSuffix(strings.TrimSuffix(rest, ".gz"), ext)
		if n, ok := strings.CutPrefix(rest, "."); ok {
			if _, err := strconv.Atoi(n); err != nil {
				continue
			}
		} else if rest != "" {
			continue
		}
		if !validDay(day) {
			continue
		}
		out = append(out, rotatedFile{path: filepath.Join(dir, e.Name()), day: day, gz: gz})
	}
	return out, nil
}

// tidy gzips the rotated files of days before yesterday and removes those
// older than maxAge days.
func (w *fileWriter) tidy(today string) error {
	t, err := time.ParseInLocation(time.DateOnly, today, time.Local)
	if err != nil {
		return err
	}
	yesterday := t.AddDate(0, 0, -1).Format(time.DateOnly)
	oldest := ""
	if w.maxAge >= 0 {
		oldest = t.AddDate(0, 0, -w.maxAge).Format(time.DateOnly)
	}
	files, err := w.rotatedFiles()
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range files {
		switch {
		case r.day < oldest:
			if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing old log file: %w", err))
			}
		case !r.gz && r.day < yesterday:
			errs = append(errs, w.compress(r.path))
		}
	}
	return errors.Join(errs...)
}

// compress gzips path into path.gz and removes path. The copy is made
// without the lock; it replaces the file only if, under the lock, the file
// has not grown since (a late writer's lines would be lost otherwise).
func (w *fileWriter) compress(path string) error {
	tmp := fmt.Sprintf("%s.gz.%d.tmp", path, os.Getpid())
	size, err := gzipFile(path, tmp)
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("compressing old log file: %w", err)
	}
	if err := flock(w.lock, syscall.LOCK_EX); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("locking log file %s: %w", w.path, err)
	}
	defer flock(w.lock, syscall.LOCK_UN)
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != size {
		os.Remove(tmp) // gone (another process did it) or grown: the next rotation tries again
		return nil
	}
	if err := os.Rename(tmp, path+".gz"); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("compressing old log file: %w", err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("removing compressed log file: %w", err)
	}
	return nil
}

// gzipFile writes src gzipped to dst and returns how many bytes of src it
// read.
func gzipFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	zw := gzip.NewWriter(out)
	n, err := io.Copy(zw, in)
	if err == nil {
		err = zw.Close()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func (w *fileWriter) keepErr(err error) {
	if err == nil {
		return
	}
	w.errMu.Lock()
	defer w.errMu.Unlock()
	if w.tidyErr == nil {
		w.tidyErr = fmt.Errorf("tidying rotated log files of %s: %w", w.path, err)
	}
}

// Close waits for tidying in the background and closes the files.
func (w *fileWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bg.Wait()
	var errs []error
	if w.f != nil {
		if err := w.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing log file %s: %w", w.path, err))
		}
		w.f = nil
	}
	if err := w.lock.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing log lock file: %w", err))
	}
	w.errMu.Lock()
	errs = append(errs, w.tidyErr)
	w.errMu.Unlock()
	return errors.Join(errs...)
}

func validDay(s string) bool {
	_, err := time.Parse(time.DateOnly, s)
	return err == nil
}

// flock takes or releases an advisory lock on f, retrying when a signal
// interrupts the wait.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
