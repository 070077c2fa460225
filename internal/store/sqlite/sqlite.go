// Package sqlite is the embedded default store.Store: one SQLite file per
// installation (dir/coding-agent.db) on the pure-Go modernc.org/sqlite driver.
//
// Several processes on one machine may share the file. The database runs in
// WAL mode, every pooled connection waits on a locked database (busy_timeout)
// instead of failing, and every write transaction starts with BEGIN IMMEDIATE,
// so a Claim reads and writes the task's row while holding the write lock:
// of two processes claiming the same task at the same moment exactly one wins.
//
// Checkpoints: only the latest checkpoint of a task is kept (one row per task,
// replaced on every save). Conversations likewise: one row per task, replaced
// whole on every save, and untouched by ClearCheckpoint.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/coding-agent/coding-agent/internal/store"
)

// FileName is the database file Open creates inside its directory.
const FileName = "coding-agent.db"

const (
	defaultBusyTimeout = 10 * time.Second
	// maxOpenConns bounds the pool: SQLite has one writer at a time, so
	// more connections only add lock waits.
	maxOpenConns = 4
)

var _ store.Store = (*Store)(nil)

// Options tunes a Store. The zero value means defaults.
type Options struct {
	// Logger receives migration and takeover notices; nil discards them.
	Logger *slog.Logger
	// Hostname is this machine's name as recorded in claims; "" means
	// os.Hostname().
	Hostname string
	// Alive reports whether a process on this host is still running; nil
	// means signal 0 (a process is dead when kill(pid, 0) fails with ESRCH).
	Alive func(pid int) bool
	// Now is the clock for created/updated times; nil means time.Now.
	Now func() time.Time
	// BusyTimeout is how long a statement waits for another connection's
	// lock before failing; 0 means 10s.
	BusyTimeout time.Duration
}

// Store is a store.Store on a SQLite file.
type Store struct {
	db        *sql.DB
	pin       *sql.Conn // held open from Open to Close (see watch)
	path      string
	files     []watched                 // the files the store opened (see intact)
	lost      atomic.Pointer[lostError] // set once one of them is gone
	holders   store.Holders             // who still holds a running task
	now       func() time.Time
	log       *slog.Logger
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) dir/coding-agent.db with default options.
func Open(ctx context.Context, dir string) (*Store, error) {
	return OpenWith(ctx, dir, Options{})
}

// OpenWith opens (creating if needed) dir/coding-agent.db and brings its
// schema up to date.
func OpenWith(ctx context.Context, dir string, opts Options) (*Store, error) {
	return openSchema(ctx, dir, opts, migrations)
}

// openSchema opens the store and applies the missing ones of schema (a prefix
// of migrations; tests pass a shorter one to build an older database).
func openSchema(ctx context.Context, dir string, opts Options, schema []string) (*Store, error) {
	s, err := newStore(dir, opts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating store directory %s: %w", dir, err)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = defaultBusyTimeout
	}
	db, err := sql.Open("sqlite", dsn(s.path, busy))
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", s.path, err)
	}
	db.SetMaxOpenConns(maxOpenConns + 1) // and the pinned one (watch)
	s.db = db
	// A connection's first statements (journal_mode WAL on a new file among
	// them) can meet another process opening the same file and get
	// SQLITE_BUSY at once, without the busy handler: asked again within
	// the busy timeout, it succeeds.
	deadline := time.Now().Add(busy)
	for {
		err := db.PingContext(ctx)
		if err != nil {
			err = fmt.Errorf("opening store %s: %w", s.path, err)
		} else if err = s.migrate(ctx, schema); err != nil {
			err = fmt.Errorf("migrating store %s: %w", s.path, err)
		} else if err = s.watch(ctx); err != nil {
			err = fmt.Errorf("opening store %s: %w", s.path, err)
		}
		if err == nil {
			return s, nil
		}
		if !busyErr(err) || time.Now().After(deadline) || ctx.Err() != nil {
			db.Close()
			return nil, err
		}
		time.Sleep(busyRetry)
	}
}

// busyRetry is the pause before an open that met SQLITE_BUSY is tried again.
const busyRetry = 20 * time.Millisecond

// busyErr reports whether err is SQLite's SQLITE_BUSY (5), whatever its
// extended code.
func busyErr(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == 5
}

func newStore(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("opening store: empty directory")
	}
	if strings.Contains(dir, "?") {
		// The driver splits the DSN at the first '?'.
		return nil, fmt.Errorf("opening store: directory %q contains '?'", dir)
	}
	s := &Store{
		path: filepath.Join(dir, FileName),
		now:  opts.Now,
		log:  opts.Logger,
	}
	holders, err := store.NewHolders(opts.Hostname, opts.Alive)
	if err != nil {
		return nil, err
	}
	s.holders = holders
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// dsn builds the driver's data source name. The _pragma parameters run on
// every connection the pool opens (busy_timeout first, the driver sorts it
// so); _txlock=immediate makes every BeginTx a BEGIN IMMEDIATE, which takes
// the write lock at once instead of on the first write. secure_delete
// overwrites what a statement deletes or replaces with zeros, in its page
// and in freed pages: a checkpoint's conversation does not live on in the
// file after the checkpoint is replaced or cleared.
func dsn(path string, busy time.Duration) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busy.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "secure_delete(1)")
	q.Set("_txlock", "immediate")
	return path + "?" + q.Encode()
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database. It may be called more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.pin != nil {
			s.pin.Close()
		}
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("closing store %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// migrations are the schema versions in order; migrations[i] takes the
// database from user_version i to i+1. Append only: never edit a released one.
var migrations = []string{
	`CREATE TABLE tasks (
		ref        TEXT PRIMARY KEY,
		forge      TEXT NOT NULL,
		repo       TEXT NOT NULL,
		kind       TEXT NOT NULL,
		number     INTEGER NOT NULL,
		status     TEXT NOT NULL,
		host       TEXT NOT NULL DEFAULT '',
		pid        INTEGER NOT NULL DEFAULT 0,
		provider   TEXT NOT NULL DEFAULT '',
		model      TEXT NOT NULL DEFAULT '',
		llm_calls  INTEGER NOT NULL DEFAULT 0,
		tool_calls INTEGER NOT NULL DEFAULT 0,
		tokens_in  INTEGER NOT NULL DEFAULT 0,
		tokens_out INTEGER NOT NULL DEFAULT 0,
		error      TEXT NOT NULL DEFAULT '',
		created_at TEXT NOT NULL,
		updated_at TEXT NOT NULL
	) STRICT;
	CREATE INDEX tasks_by_updated ON tasks (updated_at DESC);
	CREATE TABLE checkpoints (
		ref        TEXT PRIMARY KEY REFERENCES tasks (ref) ON DELETE CASCADE,
		step       INTEGER NOT NULL,
		data       BLOB NOT NULL,
		created_at TEXT NOT NULL
	) STRICT;`,
	// Version 2: a task's follow-up conversation, kept apart from its
	// checkpoint so that clearing the checkpoint after a round keeps it.
	`CREATE TABLE conversations (
		ref       TEXT PRIMARY KEY REFERENCES tasks (ref) ON DELETE CASCADE,
		round     INTEGER NOT NULL,
		mark      INTEGER NOT NULL,
		since     TEXT NOT NULL,
		summaries TEXT NOT NULL CHECK (json_type(summaries) = 'array')
	) STRICT;`,
	// Version 3: a claim is a lease held by one start of a process (its
	// instance), renewed while it works; '' is no lease (a row written
	// before, or released).
	`ALTER TABLE tasks ADD COLUMN instance TEXT NOT NULL DEFAULT '';
	ALTER TABLE tasks ADD COLUMN lease_until TEXT NOT NULL DEFAULT '';
	CREATE INDEX tasks_by_instance ON tasks (instance);`,
	// Version 4: the runs a round of the task has begun, for the
	// dead-letter rule (store.Record.Attempts).
	`ALTER TABLE tasks ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;`,
	// Version 5: what happened in each task, for its page (store.Event),
	// kept after the task ends until pruned.
	`CREATE TABLE events (
		id   INTEGER PRIMARY KEY AUTOINCREMENT,
		ref  TEXT NOT NULL REFERENCES tasks (ref) ON DELETE CASCADE,
		kind TEXT NOT NULL,
		at   TEXT NOT NULL,
		data TEXT NOT NULL CHECK (json_valid(data))
	) STRICT;
	CREATE INDEX events_by_ref ON events (ref, id);
	CREATE INDEX events_by_at ON events (at);`,
}

// migrate applies the missing ones of schema in one IMMEDIATE transaction, so
// two processes opening a new file at once do not both create the tables.
func (s *Store) migrate(ctx context.Context, schema []string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if version > len(schema) {
		return fmt.Errorf("schema version %d is newer than this program knows (%d)", version, len(schema))
	}
	if version == len(schema) {
		return nil
	}
	for i := version; i < len(schema); i++ {
		if _, err := tx.ExecContext(ctx, schema[i]); err != nil {
			return fmt.Errorf("applying schema version %d: %w", i+1, err)
		}
	}
	// PRAGMA takes no bound parameters; the value is our own integer.
	if _, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(len(schema))); err != nil {
		return fmt.Errorf("setting schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing schema version %d: %w", len(schema), err)
	}
	s.log.Info("store schema migrated", "path", s.path, "from", version, "to", len(schema))
	return nil
}

// timeLayout is fixed-width so that text order is time order.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("parsing stored time %q: %w", s, err)
	}
	return t, nil
}
