package obs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Terminal is a slog.Handler that shows an operator, one human line each,
// the events of the tasks in the log's records: a task claimed, worked on,
// each tool step, and how it ended (done with its link, failed with the
// reason, paused, stopped, awaiting a reply), every warning and error, and
// what the daemon does besides: what serve listens on and watches, that it
// is idle, that it stops and why, that a run found nothing to do. The log file
// keeps everything; this is a view of the same records, not a second
// channel. Lines are written whole, one Write each.
type Terminal struct {
	st    *terminalState
	attrs []slog.Attr // from WithAttrs
	group string      // records in a group are not shown
}

type terminalState struct {
	mu   sync.Mutex
	out  io.Writer
	now  func() time.Time
	urls map[string]string // task → its web page, from "working on task"
}

// CommandFailed is the message of the record a command logs when it fails:
// the command prints that error itself as it exits, so the terminal does not
// show the record (each error once, whole).
const CommandFailed = "command failed"

// Fatal is the key of an attribute that marks a record whose error ends the
// command: the terminal shows its message without the error, which the
// command prints as it exits.
const Fatal = "fatal"

// NewTerminal writes the lines to out (stderr on a terminal).
func NewTerminal(out io.Writer) *Terminal {
	return &Terminal{st: &terminalState{out: out, now: time.Now, urls: map[string]string{}}}
}

// Enabled shows info and above.
func (t *Terminal) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

// WithAttrs keeps attrs for the records' lookups (the task a logger is for).
func (t *Terminal) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *t
	c.attrs = append(append([]slog.Attr(nil), t.attrs...), attrs...)
	return &c
}

// WithGroup hides the records of a group: none of the events are in one.
func (t *Terminal) WithGroup(name string) slog.Handler {
	c := *t
	c.group = name
	return &c
}

// Handle writes the record's line, if it is an event.
func (t *Terminal) Handle(_ context.Context, r slog.Record) error {
	if t.group != "" {
		return nil
	}
	a := map[string]string{}
	for _, x := range t.attrs {
		a[x.Key] = x.Value.Resolve().String()
	}
	r.Attrs(func(x slog.Attr) bool {
		a[x.Key] = x.Value.Resolve().String()
		return true
	})
	line := t.line(r, a)
	if line == "" {
		return nil
	}
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	_, err := io.WriteString(t.st.out, t.st.now().Format("15:04:05")+" "+line+"\n")
	return err
}

// line renders the record, "" when it is no event.
func (t *Terminal) line(r slog.Record, a map[string]string) string {
	ref := a["task"]
	with := func(k, prefix string) string {
		if v := oneLine(a[k]); v != "" && v != "<nil>" {
			return prefix + v
		}
		return ""
	}
	switch {
	case r.Message == "claimed task":
		return ref + " claimed"
	case r.Message == "working on task":
		t.st.mu.Lock()
		t.st.urls[ref] = a["url"]
		t.st.mu.Unlock()
		return ref + " working: " + oneLine(a["title"])
	case r.Message == "tool call":
		return ref + "   step: " + a["tool"] + map[string]string{"true": " (error)"}[a["is_error"]]
	case r.Message == "took over a task its holder no longer holds":
		return ref + " taken over from " + a["holder_host"]
	case strings.HasPrefix(r.Message, "task ") && a["status"] != "":
		ev := strings.TrimPrefix(r.Message, "task ")
		t.st.mu.Lock()
		url := t.st.urls[ref]
		delete(t.st.urls, ref) // the run is over: a serve running for months keeps no list
		t.st.mu.Unlock()
		if url != "" && (ev == "done" || ev == "round done" || ev == "conversation ended") {
			return ref + " " + ev + " " + url
		}
		return ref + " " + ev + with("reason", ": ")
	case r.Message == "listening":
		return "listening on " + a["address"] + ": " + listening(a)
	case r.Message == "serving":
		workers := a["workers"] + " worker" + map[bool]string{true: "", false: "s"}[a["workers"] == "1"]
		return fmt.Sprintf("watching %s %s for %q (%s mode, %s), looking every %s", a["forge"], a["watching"], a["label"],
			a["mode"], workers, a["interval"])
	case r.Message == "idle":
		return fmt.Sprintf("idle: nothing labelled %q to work on; looking again every %s", a["label"], a["interval"])
	case strings.HasPrefix(r.Message, "shutting down:"):
		return "stopping (" + a["reason"] + "): the tasks in hand stop at their next checkpoint (grace " + a["grace"] + ")"
	case r.Message == "serve stopped":
		if a["reason"] == "error" {
			return "stopped by the error below"
		}
		return "stopped: " + a["reason"]
	case r.Message == "run: nothing to do":
		return fmt.Sprintf("nothing to do: nothing labelled %q in %s %s", a["label"], a["forge"], a["watching"])
	case r.Message == CommandFailed:
		return "" // the command prints it as it exits
	case r.Level >= slog.LevelWarn:
		s := map[bool]string{true: "error: ", false: "warning: "}[r.Level >= slog.LevelError] + r.Message
		if a[Fatal] != "true" {
			s += whole(a["error"])
		}
		if ref != "" {
			s = ref + " " + s
		}
		return s
	}
	return ""
}

// listening says what serve's listener serves.
func listening(a map[string]string) string {
	var s []string
	if a["github_webhook"] == "true" {
		s = append(s, "GitHub webhooks at /webhooks/github")
	}
	if a["gitlab_webhook"] == "true" {
		s = append(s, "GitLab webhooks at /webhooks/gitlab")
	}
	return strings.Join(append(s, "/healthz", "/readyz", "/metrics"), ", ")
}

// whole is an error as ": " and its text, every line of it, the lines after
// the first indented; "" for none.
func whole(err string) string {
	err = strings.TrimSpace(err)
	if err == "" || err == "<nil>" {
		return ""
	}
	return ": " + strings.ReplaceAll(err, "\n", "\n    ")
}

// oneLine keeps the first line of s, cut at 200 characters.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:199]) + "…"
	}
	return s
}
