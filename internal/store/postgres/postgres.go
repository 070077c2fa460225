// Package postgres is the store.Store on PostgreSQL (pgx v5), for several
// hosts sharing one database: the same port as store/sqlite, passing the
// same storetest conformance suite.
//
// Claims are atomic across hosts: a claim inserts the task's row or locks it
// (SELECT ... FOR UPDATE) inside one transaction before deciding, so of two
// processes claiming one task at once exactly one wins. A task running under
// a process holds while its lease runs (judged by the database's clock), or
// until its process is found dead on this host.
//
// Migrations run in one transaction under a transaction-scoped advisory
// lock, so hosts starting at once on an empty database apply each version
// once; the others wait and find it done. schema_version keeps a row per
// applied version.
//
// Times are stored as fixed-width UTC text, as in store/sqlite: timestamptz
// keeps microseconds, and the port's times round-trip to the nanosecond. The
// text columns that are ordered compare bytewise (COLLATE "C"), whatever the
// database's collation.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coding-agent/coding-agent/internal/store"
)

var _ store.Store = (*Store)(nil)

// defaultConnectTimeout bounds one connection attempt when the URL sets no
// connect_timeout.
const defaultConnectTimeout = 30 * time.Second

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
}

// Store is a store.Store on a PostgreSQL database.
type Store struct {
	pool      *pgxpool.Pool
	holders   store.Holders // who still holds a running task
	now       func() time.Time
	fixed     bool // now was given (Options.Now): leases are judged by it too
	log       *slog.Logger
	closeOnce sync.Once
}

// Open connects to the database at url (postgres://…; pgx's parameters,
// such as pool_max_conns and search_path, are honoured) and brings its
// schema up to date.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	return openSchema(ctx, url, opts, migrations)
}

// openSchema opens the store and applies the missing ones of schema (a prefix
// of migrations; tests pass a shorter one to build an older database).
func openSchema(ctx context.Context, url string, opts Options, schema []string) (*Store, error) {
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors repeat the connection string, password included.
		return nil, errors.New("opening store: the database URL cannot be parsed")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// Without connect_timeout in the URL, an unreachable host would
		// hold every new connection for the system's TCP timeout.
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	s.pool = pool
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening store on %s: %w", cfg.ConnConfig.Host, err)
	}
	if err := s.migrate(ctx, schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrating store: %w", err)
	}
	return s, nil
}

func newStore(opts Options) (*Store, error) {
	s := &Store{now: opts.Now, fixed: opts.Now != nil, log: opts.Logger}
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

// Close closes the connection pool. It may be called more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(s.pool.Close)
	return nil
}

// migrationLock is the advisory lock key that serialises migrations across
// every process on the database ("coding-a" in ASCII).
const migrationLock int64 = 0x636f64696e672d61

// migrations are the schema versions in order; migrations[i] takes the
// database from version i to i+1. Append only: never edit a released one.
var migrations = []string{
	`CREATE TABLE tasks (
		ref        TEXT COLLATE "C" PRIMARY KEY,
		forge      TEXT NOT NULL,
		repo       TEXT NOT NULL,
		kind       TEXT NOT NULL,
		number     BIGINT NOT NULL,
		status     TEXT NOT NULL,
		host       TEXT NOT NULL DEFAULT '',
		pid        BIGINT NOT NULL DEFAULT 0,
		provider   TEXT NOT NULL DEFAULT '',
		model      TEXT NOT NULL DEFAULT '',
		llm_calls  BIGINT NOT NULL DEFAULT 0,
		tool_calls BIGINT NOT NULL DEFAULT 0,
		tokens_in  BIGINT NOT NULL DEFAULT 0,
		tokens_out BIGINT NOT NULL DEFAULT 0,
		error      TEXT NOT NULL DEFAULT '',
		created_at TEXT COLLATE "C" NOT NULL,
		updated_at TEXT COLLATE "C" NOT NULL
	);
	CREATE INDEX tasks_by_updated ON tasks (updated_at DESC);
	CREATE TABLE checkpoints (
		ref        TEXT COLLATE "C" PRIMARY KEY REFERENCES tasks (ref) ON DELETE CASCADE,
		step       BIGINT NOT NULL,
		data       BYTEA NOT NULL,
		created_at TEXT NOT NULL
	);
	CREATE TABLE conversations (
		ref       TEXT COLLATE "C" PRIMARY KEY REFERENCES tasks (ref) ON DELETE CASCADE,
		round     BIGINT NOT NULL,
		mark      BIGINT NOT NULL,
		since     TEXT NOT NULL,
		summaries JSON NOT NULL CHECK (json_typeof(summaries) = 'array')
	);`,
	// Version 2: a claim is a lease held by one start of a process (its
	// instance), renewed while it works; '' is no lease (released).
	`ALTER TABLE tasks ADD COLUMN instance TEXT NOT NULL DEFAULT '';
	ALTER TABLE tasks ADD COLUMN lease_until TEXT COLLATE "C" NOT NULL DEFAULT '';
	CREATE INDEX tasks_by_instance ON tasks (instance);`,
	// Version 3: the runs a round of the task has begun, for the
	// dead-letter rule (store.Record.Attempts).
	`ALTER TABLE tasks ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;`,
	// Version 4: what happened in each task, for its page (store.Event),
	// kept after the task ends until pruned.
	`CREATE TABLE events (
		id   BIGSERIAL PRIMARY KEY,
		ref  TEXT COLLATE "C" NOT NULL REFERENCES tasks (ref) ON DELETE CASCADE,
		kind TEXT NOT NULL,
		at   TEXT COLLATE "C" NOT NULL,
		data JSON NOT NULL
	);
	CREATE INDEX events_by_ref ON events (ref, id);
	CREATE INDEX events_by_at ON events (at);`,
}

// migrate applies the missing ones of schema in one transaction that first
// takes the migration lock: a process that starts while another migrates
// waits for it, then finds the versions applied. The lock is released with
// the transaction.
func (s *Store) migrate(ctx context.Context, schema []string) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("taking the migration lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    INTEGER PRIMARY KEY,
		applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("creating schema_version: %w", err)
	}
	var version int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&version); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if version > len(schema) {
		return fmt.Errorf("schema version %d is newer than this program knows (%d)", version, len(schema))
	}
	if version == len(schema) {
		return nil
	}
	for i := version; i < len(schema); i++ {
		if _, err := tx.Exec(ctx, schema[i]); err != nil {
			return fmt.Errorf("applying schema version %d: %w", i+1, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version) VALUES ($1)`, i+1); err != nil {
			return fmt.Errorf("recording schema version %d: %w", i+1, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing schema version %d: %w", len(schema), err)
	}
	s.log.Info("store schema migrated", "from", version, "to", len(schema))
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
