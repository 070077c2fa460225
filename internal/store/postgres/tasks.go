package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

const recordColumns = `forge, repo, kind, number, status, host, pid, instance, lease_until, provider, model, attempts,
	llm_calls, tool_calls, tokens_in, tokens_out, error, created_at, updated_at`

func scanRecord(row pgx.Row) (store.Record, error) {
	var (
		r                store.Record
		kind, status     string
		created, updated string
		lease            string
	)
	err := row.Scan(&r.Ref.Forge, &r.Ref.Repo, &kind, &r.Ref.Number, &status,
		&r.Host, &r.PID, &r.Instance, &lease, &r.Provider, &r.Model, &r.Attempts,
		&r.Counters.LLMCalls, &r.Counters.ToolCalls, &r.Counters.TokensIn, &r.Counters.TokensOut,
		&r.Error, &created, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Record{}, store.ErrNotFound
	}
	if err != nil {
		return store.Record{}, err
	}
	r.Ref.Kind = task.Kind(kind)
	r.Status = task.Status(status)
	if r.CreatedAt, err = parseTime(created); err != nil {
		return store.Record{}, err
	}
	if r.UpdatedAt, err = parseTime(updated); err != nil {
		return store.Record{}, err
	}
	if lease != "" {
		if r.LeaseUntil, err = parseTime(lease); err != nil {
			return store.Record{}, err
		}
	}
	return r, nil
}

// querier is what *pgxpool.Pool and pgx.Tx share for reading one row.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func getRecord(ctx context.Context, q querier, ref task.Ref) (store.Record, error) {
	return scanRecord(q.QueryRow(ctx, `SELECT `+recordColumns+` FROM tasks WHERE ref = $1`, ref.String()))
}

// Claim marks the task running for owner in one transaction. A new task's
// row is inserted (a concurrent insert of the same row waits for the other
// transaction and then inserts nothing); a known task's row is locked FOR
// UPDATE before its holder is judged, so concurrent claimers, on any host,
// are serialised and only the first finds the task free. Leases are
// judged by the database's clock, so the hosts' clocks need not agree.
func (s *Store) Claim(ctx context.Context, ref task.Ref, owner store.Owner) (store.Record, error) {
	rec, _, err := s.claim(ctx, ref, owner, store.ClaimAny)
	if err != nil {
		return store.Record{}, fmt.Errorf("claiming %s: %w", ref, lost(err))
	}
	return rec, nil
}

// ClaimQueued is Claim for a task that must be queued, or running under a
// holder that no longer holds it.
func (s *Store) ClaimQueued(ctx context.Context, ref task.Ref, owner store.Owner) (store.Record, error) {
	rec, _, err := s.claim(ctx, ref, owner, store.ClaimQueued)
	if err != nil {
		return store.Record{}, fmt.Errorf("claiming queued %s: %w", ref, lost(err))
	}
	return rec, nil
}

// TakeOver is Claim for a task that must be running under a holder that
// no longer holds it; it returns the record as it was.
func (s *Store) TakeOver(ctx context.Context, ref task.Ref, owner store.Owner) (store.Record, error) {
	_, prev, err := s.claim(ctx, ref, owner, store.ClaimTakeOver)
	if err != nil {
		return store.Record{}, fmt.Errorf("taking over %s: %w", ref, lost(err))
	}
	return prev, nil
}

// claim claims ref for owner and returns the new record and the one before
// (zero for a new task); mode says which statuses it may claim from.
func (s *Store) claim(ctx context.Context, ref task.Ref, owner store.Owner, mode store.ClaimMode) (rec, prev store.Record, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return rec, prev, fmt.Errorf("beginning transaction: %w", err)
	}
	defer tx.Rollback(context.Background())
	at, err := s.clock(ctx, tx)
	if err != nil {
		return rec, prev, err
	}
	now, lease := formatTime(s.now()), formatTime(at.Add(owner.Lease))
	if mode == store.ClaimAny {
		rec, err = scanRecord(tx.QueryRow(ctx, `INSERT INTO tasks
			(ref, forge, repo, kind, number, status, host, pid, instance, lease_until, provider, model, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)
			ON CONFLICT (ref) DO NOTHING RETURNING `+recordColumns,
			ref.String(), ref.Forge, ref.Repo, string(ref.Kind), ref.Number, string(task.Running),
			owner.Host, owner.PID, owner.Instance, lease, owner.Provider, owner.Model, now))
		switch {
		case err == nil:
			return rec, prev, commit(ctx, tx)
		case !errors.Is(err, store.ErrNotFound): // ErrNotFound: the row was there
			return rec, prev, fmt.Errorf("writing task: %w", err)
		}
	}
	prev, err = scanRecord(tx.QueryRow(ctx, `SELECT `+recordColumns+` FROM tasks WHERE ref = $1 FOR UPDATE`, ref.String()))
	if errors.Is(err, store.ErrNotFound) && mode != store.ClaimAny {
		return rec, prev, mode.Unknown()
	}
	if err != nil {
		return rec, prev, fmt.Errorf("reading task: %w", err)
	}
	if err := mode.Allows(prev, s.holders, at); err != nil {
		return rec, prev, err
	}
	if prev.Status == task.Running {
		s.log.Info("taking over a task its holder no longer holds", "task", ref.String(),
			"host", prev.Host, "pid", prev.PID, "instance", prev.Instance)
	}
	rec, err = scanRecord(tx.QueryRow(ctx, `UPDATE tasks SET status = $1, host = $2, pid = $3, instance = $4,
		lease_until = $5, provider = $6, model = $7, attempts = $8, error = '', updated_at = $9 WHERE ref = $10 RETURNING `+recordColumns,
		string(task.Running), owner.Host, owner.PID, owner.Instance, lease, owner.Provider, owner.Model,
		mode.Attempts(prev.Attempts), now, ref.String()))
	if err != nil {
		return rec, prev, fmt.Errorf("writing task: %w", err)
	}
	return rec, prev, commit(ctx, tx)
}

// clock is the time leases are judged by: the database's, shared by every
// host, unless Options.Now sets one.
func (s *Store) clock(ctx context.Context, q querier) (time.Time, error) {
	if s.fixed {
		return s.now(), nil
	}
	var at time.Time
	if err := q.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("reading the database's clock: %w", err)
	}
	return at.UTC(), nil
}

// Renew extends the lease of the running tasks owner.Instance holds.
func (s *Store) Renew(ctx context.Context, owner store.Owner) ([]task.Ref, error) {
	at, err := s.clock(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("renewing the leases of %s: %w", owner.Instance, lost(err))
	}
	rows, err := s.pool.Query(ctx, `UPDATE tasks SET lease_until = $1 WHERE instance = $2 AND instance != '' AND status = $3
		RETURNING forge, repo, kind, number`, formatTime(at.Add(owner.Lease)), owner.Instance, string(task.Running))
	if err != nil {
		return nil, fmt.Errorf("renewing the leases of %s: %w", owner.Instance, lost(err))
	}
	defer rows.Close()
	var refs []task.Ref
	for rows.Next() {
		var r task.Ref
		var kind string
		if err := rows.Scan(&r.Forge, &r.Repo, &kind, &r.Number); err != nil {
			return nil, fmt.Errorf("renewing the leases of %s: %w", owner.Instance, lost(err))
		}
		r.Kind = task.Kind(kind)
		refs = append(refs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("renewing the leases of %s: %w", owner.Instance, lost(err))
	}
	return refs, nil
}

// Release frees a running or queued task from its holder.
func (s *Store) Release(ctx context.Context, ref task.Ref) (store.Record, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return store.Record{}, fmt.Errorf("releasing %s: beginning transaction: %w", ref, lost(err))
	}
	defer tx.Rollback(context.Background())
	prev, err := scanRecord(tx.QueryRow(ctx, `SELECT `+recordColumns+` FROM tasks WHERE ref = $1 FOR UPDATE`, ref.String()))
	if err != nil {
		return store.Record{}, fmt.Errorf("releasing %s: %w", ref, lost(err))
	}
	if err := store.InHand(prev); err != nil {
		return store.Record{}, fmt.Errorf("releasing %s: %w", ref, lost(err))
	}
	if _, err := tx.Exec(ctx, `UPDATE tasks SET instance = '', lease_until = '', updated_at = $1 WHERE ref = $2`,
		formatTime(s.now()), ref.String()); err != nil {
		return store.Record{}, fmt.Errorf("releasing %s: %w", ref, lost(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return store.Record{}, fmt.Errorf("releasing %s: committing: %w", ref, lost(err))
	}
	return prev, nil
}

func commit(ctx context.Context, tx pgx.Tx) error {
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing claim: %w", err)
	}
	return nil
}

// SetStatus moves the task to status. errMsg is kept only for task.Failed;
// any other status clears the error.
func (s *Store) SetStatus(ctx context.Context, ref task.Ref, status task.Status, errMsg string) error {
	if status != task.Failed {
		errMsg = ""
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET status = $1, error = $2, updated_at = $3 WHERE ref = $4`,
		string(status), errMsg, formatTime(s.now()), ref.String())
	if err := affectedOne(tag, err); err != nil {
		return fmt.Errorf("setting status of %s to %s: %w", ref, status, lost(err))
	}
	return nil
}

// AddCounters adds delta to the task's counters in one statement.
func (s *Store) AddCounters(ctx context.Context, ref task.Ref, delta store.Counters) error {
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET llm_calls = llm_calls + $1,
		tool_calls = tool_calls + $2, tokens_in = tokens_in + $3, tokens_out = tokens_out + $4,
		updated_at = $5 WHERE ref = $6`,
		delta.LLMCalls, delta.ToolCalls, delta.TokensIn, delta.TokensOut, formatTime(s.now()), ref.String())
	if err := affectedOne(tag, err); err != nil {
		return fmt.Errorf("adding counters of %s: %w", ref, lost(err))
	}
	return nil
}

// affectedOne turns a statement that matched no row into store.ErrNotFound.
func affectedOne(tag pgconn.CommandTag, err error) error {
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// Get returns the task's row.
func (s *Store) Get(ctx context.Context, ref task.Ref) (store.Record, error) {
	r, err := getRecord(ctx, s.pool, ref)
	if err != nil {
		return store.Record{}, fmt.Errorf("getting %s: %w", ref, lost(err))
	}
	return r, nil
}

// List returns every row, most recently updated first (ties by ref).
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+recordColumns+` FROM tasks ORDER BY updated_at DESC, ref`)
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", lost(err))
	}
	defer rows.Close()
	out := []store.Record{}
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("listing tasks: %w", lost(err))
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing tasks: %w", lost(err))
	}
	return out, nil
}
