package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

const recordColumns = `forge, repo, kind, number, status, host, pid, provider, model,
	llm_calls, tool_calls, tokens_in, tokens_out, error, created_at, updated_at`

func scanRecord(row pgx.Row) (store.Record, error) {
	var (
		r                store.Record
		kind, status     string
		created, updated string
	)
	err := row.Scan(&r.Ref.Forge, &r.Ref.Repo, &kind, &r.Ref.Number, &status,
		&r.Host, &r.PID, &r.Provider, &r.Model,
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
// are serialised and only the first finds the task free.
func (s *Store) Claim(ctx context.Context, ref task.Ref, owner store.Owner) (store.Record, error) {
	rec, err := s.claim(ctx, ref, owner)
	if err != nil {
		return store.Record{}, fmt.Errorf("claiming %s: %w", ref, err)
	}
	return rec, nil
}

func (s *Store) claim(ctx context.Context, ref task.Ref, owner store.Owner) (store.Record, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return store.Record{}, fmt.Errorf("beginning transaction: %w", err)
	}
	defer tx.Rollback(context.Background())
	now := formatTime(s.now())
	rec, err := scanRecord(tx.QueryRow(ctx, `INSERT INTO tasks
		(ref, forge, repo, kind, number, status, host, pid, provider, model, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
		ON CONFLICT (ref) DO NOTHING RETURNING `+recordColumns,
		ref.String(), ref.Forge, ref.Repo, string(ref.Kind), ref.Number, string(task.Running),
		owner.Host, owner.PID, owner.Provider, owner.Model, now))
	switch {
	case err == nil:
		return rec, commit(ctx, tx)
	case !errors.Is(err, store.ErrNotFound): // ErrNotFound: the row was there
		return store.Record{}, fmt.Errorf("writing task: %w", err)
	}
	cur, err := scanRecord(tx.QueryRow(ctx, `SELECT `+recordColumns+` FROM tasks WHERE ref = $1 FOR UPDATE`, ref.String()))
	if err != nil {
		return store.Record{}, fmt.Errorf("reading task: %w", err)
	}
	if cur.Status == task.Running && s.holders.Hold(cur) {
		return store.Record{}, fmt.Errorf("held by pid %d on %s: %w", cur.PID, cur.Host, store.ErrClaimed)
	}
	if cur.Status == task.Running {
		s.log.Info("taking over task of a dead process", "task", ref.String(), "host", cur.Host, "pid", cur.PID)
	}
	rec, err = scanRecord(tx.QueryRow(ctx, `UPDATE tasks SET status = $1, host = $2, pid = $3, provider = $4,
		model = $5, error = '', updated_at = $6 WHERE ref = $7 RETURNING `+recordColumns,
		string(task.Running), owner.Host, owner.PID, owner.Provider, owner.Model, now, ref.String()))
	if err != nil {
		return store.Record{}, fmt.Errorf("writing task: %w", err)
	}
	return rec, commit(ctx, tx)
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
		return fmt.Errorf("setting status of %s to %s: %w", ref, status, err)
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
		return fmt.Errorf("adding counters of %s: %w", ref, err)
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
		return store.Record{}, fmt.Errorf("getting %s: %w", ref, err)
	}
	return r, nil
}

// List returns every row, most recently updated first (ties by ref).
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+recordColumns+` FROM tasks ORDER BY updated_at DESC, ref`)
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	defer rows.Close()
	out := []store.Record{}
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("listing tasks: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	return out, nil
}
