// Package obs sets up observability: the process's structured logger (JSON
// to a daily-rotated, gzip-compressed file, optionally text to stdout) with
// secrets redacted from everything it writes.
package obs

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"
)

const (
	defaultMaxAgeDays = 30
	// maxSizeMB caps one day's file; past it lumberjack rotates early.
	maxSizeMB = 500
)

// LogOptions configures NewLogger. The zero value logs at info to stderr.
type LogOptions struct {
	// File is the JSON log file; rotated at the first write after local
	// midnight, rotated files gzipped. "" means no file.
	File string
	// Level is "debug", "info", "warn" or "error"; "" means info.
	Level string
	// Stdout also writes human-readable text lines to stdout.
	Stdout bool
	// MaxAgeDays is how long rotated files are kept; 0 means 30, negative
	// means forever.
	MaxAgeDays int
	// Secrets are redacted from every message and attribute.
	Secrets []string
	// Now is the clock that decides the day; nil means time.Now.
	Now func() time.Time
	// Terminal, when set, shows an operator the task events as human
	// lines (see Terminal); secrets are redacted there too.
	Terminal io.Writer
}

// ParseLevel reads "debug", "info", "warn" or "error" (any case); "" is info.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
}

// NewLogger builds the process logger. Closing the returned io.Closer closes
// the log file. With neither File nor Stdout it writes text to stderr.
func NewLogger(opts LogOptions) (*slog.Logger, io.Closer, error) {
	level, err := ParseLevel(opts.Level)
	if err != nil {
		return nil, nil, err
	}
	hopts := &slog.HandlerOptions{Level: level}
	var (
		handlers []slog.Handler
		closer   io.Closer = nopCloser{}
	)
	if opts.File != "" {
		w, err := newDailyWriter(opts)
		if err != nil {
			return nil, nil, err
		}
		handlers = append(handlers, slog.NewJSONHandler(w, hopts))
		closer = w
	}
	if opts.Stdout {
		handlers = append(handlers, slog.NewTextHandler(os.Stdout, hopts))
	}
	if opts.Terminal != nil {
		handlers = append(handlers, NewTerminal(opts.Terminal))
	}
	if len(handlers) == 0 {
		handlers = append(handlers, slog.NewTextHandler(os.Stderr, hopts))
	}
	var h slog.Handler = handlers[0]
	if len(handlers) > 1 {
		h = slog.NewMultiHandler(handlers...)
	}
	return slog.New(NewRedactHandler(h, opts.Secrets)), closer, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// dailyWriter hands writes to lumberjack and asks it to rotate at the first
// write of a new local day.
type dailyWriter struct {
	mu  sync.Mutex
	lj  *lumberjack.Logger
	now func() time.Time
	day string // local date of the last write, "" before the first
}

func newDailyWriter(opts LogOptions) (*dailyWriter, error) {
	if err := os.MkdirAll(filepath.Dir(opts.File), 0o750); err != nil {
		return nil, fmt.Errorf("creating log directory for %s: %w", opts.File, err)
	}
	maxAge := opts.MaxAgeDays
	switch {
	case maxAge == 0:
		maxAge = defaultMaxAgeDays
	case maxAge < 0:
		maxAge = 0 // lumberjack keeps everything
	}
	w := &dailyWriter{
		lj: &lumberjack.Logger{
			Filename:  opts.File,
			MaxSize:   maxSizeMB,
			MaxAge:    maxAge,
			LocalTime: true,
			Compress:  true,
		},
		now: opts.Now,
	}
	if w.now == nil {
		w.now = time.Now
	}
	// A file left by an earlier run belongs to the day it was last written.
	fi, err := os.Stat(opts.File)
	switch {
	case err == nil:
		w.day = dayOf(fi.ModTime())
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("checking log file %s: %w", opts.File, err)
	}
	return w, nil
}

func dayOf(t time.Time) string { return t.Local().Format(time.DateOnly) }

func (w *dailyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	today := dayOf(w.now())
	if w.day != "" && w.day != today {
		if err := w.lj.Rotate(); err != nil {
			return 0, fmt.Errorf("rotating log file %s: %w", w.lj.Filename, err)
		}
	}
	w.day = today
	return w.lj.Write(p)
}

func (w *dailyWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.lj.Close(); err != nil {
		return fmt.Errorf("closing log file %s: %w", w.lj.Filename, err)
	}
	return nil
}
