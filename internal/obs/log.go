// Package obs sets up observability: the process's structured logger (JSON
// to a daily-rotated, gzip-compressed file, optionally text to stdout) with
// secrets redacted from everything it writes.
package obs

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
)

const defaultMaxAgeDays = 30

// LogOptions configures NewLogger. The zero value logs at info to stderr.
type LogOptions struct {
	// File is the JSON log file, which several processes may share; rotated
	// at the first write after local midnight into a file named by the day
	// of its lines, older days gzipped (see fileWriter). "" means no file.
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
	hopts := &slog.HandlerOptions{Level: level, ReplaceAttr: oneDuration}
	var (
		handlers []slog.Handler
		closer   io.Closer = nopCloser{}
	)
	if opts.File != "" {
		w, err := newFileWriter(opts)
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

// oneDuration writes every duration in one format, Go's ("1.5s", "250ms"):
// slog's JSON handler would write a time.Duration as nanoseconds, beside
// the ones logged as text.
func oneDuration(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
