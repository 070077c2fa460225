package plan

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
)

// History entry types (spec 004 §2.2).
const (
	EntryPlan         = "plan"
	EntryRevision     = "revision"
	EntryReflection   = "reflection"
	EntryVerification = "verification"
	EntryReplan       = "replan"
)

// Entry is one line of a task's planning history.
type Entry struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	// Plan is the plan (plan) or the revised plan (revision), with the
	// actions' statuses as they were.
	Plan *Plan `json:"plan,omitempty"`
	// Reason is why the plan was revised (revision) or the decision made
	// (replan).
	Reason  string   `json:"reason,omitempty"`
	Changes []string `json:"changes,omitempty"` // revision: what changed
	// Action is the action a reflection or replan decision is about.
	Action     string      `json:"action,omitempty"`
	Trigger    string      `json:"trigger,omitempty"`    // reflection: "error" or "interval"
	Evaluation *Reflection `json:"evaluation,omitempty"` // reflection
	// Verification is a verification round's result.
	Verification *Verification `json:"verification,omitempty"`
	Round        int           `json:"round,omitempty"`    // verification round
	Decision     string        `json:"decision,omitempty"` // replan: replan, skip or abort
}

// History is a task's planning history: a JSONL file, one entry per line,
// each line written with a single append and fsynced before Append returns.
type History struct {
	mu   sync.Mutex
	path string
}

// HistoryFile is the file name of ref's history: readable, and unique
// because it ends with a hash of the exact ref.
func HistoryFile(ref task.Ref) string {
	sum := sha256.Sum256([]byte(ref.String()))
	readable := unsafeFileChars.ReplaceAllString(ref.Repo, "_")
	if len(readable) > maxReadableName {
		readable = readable[:maxReadableName] // the hash keeps the name unique
	}
	return fmt.Sprintf("%s_%s_%s_%d_%s.jsonl", ref.Forge, readable, ref.Kind, ref.Number, hex.EncodeToString(sum[:4]))
}

// maxReadableName keeps file names well under the usual 255-byte limit.
const maxReadableName = 100

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// OpenHistory returns the history of ref in dir, creating dir if needed.
func OpenHistory(dir string, ref task.Ref) (*History, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating planning history directory: %w", err)
	}
	return &History{path: filepath.Join(dir, HistoryFile(ref))}, nil
}

// Path is the history file.
func (h *History) Path() string { return h.path }

// Append writes e as one line and fsyncs it. A torn last line left by a
// crash is ended first, so it never swallows the new entry.
func (h *History) Append(e Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encoding %s history entry: %w", e.Type, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	f, err := os.OpenFile(h.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening planning history: %w", err)
	}
	defer f.Close()
	if torn, err := endsTorn(f); err != nil {
		return fmt.Errorf("reading planning history %s: %w", h.path, err)
	} else if torn {
		line = append([]byte("\n"), line...)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("appending to planning history %s: %w", h.path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing planning history %s: %w", h.path, err)
	}
	return f.Close()
}

// endsTorn reports whether a non-empty file does not end with a newline.
func endsTorn(f *os.File) (bool, error) {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return false, err
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], st.Size()-1); err != nil {
		return false, err
	}
	return last[0] != '\n', nil
}

// Load reads every entry. A line that cannot be read (a write torn by a
// crash) is skipped and reported in the error alongside the entries read;
// a missing file is an empty history.
func (h *History) Load() ([]Entry, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	data, err := os.ReadFile(h.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading planning history: %w", err)
	}
	var out []Entry
	var bad []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil || e.Type == "" {
			bad = append(bad, strconv.Itoa(n))
			continue
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil && err != io.EOF {
		return out, fmt.Errorf("reading planning history %s: %w", h.path, err)
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("planning history %s: unreadable lines skipped: %v", h.path, bad)
	}
	return out, nil
}

// LatestPlan returns the newest plan among entries (a plan or a revision)
// and its index, or nil and -1.
func LatestPlan(entries []Entry) (*Plan, int) {
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if (e.Type == EntryPlan || e.Type == EntryRevision) && e.Plan != nil {
			return e.Plan, i
		}
	}
	return nil, -1
}
