package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

const recordColumns = `forge, repo, kind, number, status, host, pid, provider, model,
	llm_calls, tool_calls, tokens_in, tokens_out, error, created_at, updated_at`

type scanner interface {
	Scan(dest ...any) error
}

func scanRecord(row scanner) (store.Record, error) {
	var (
		r                store.Record
		kind, status     string
		created, updated string
	)
	err := row.Scan(&r.Ref.Forge, &r.Ref.Repo, &kind, &r.Ref.Number, &status,
		&r.Host, &r.PID, &r.Provider, &r.Model,
		&r.Counters.LLMCalls, &r.Counters.ToolCalls, &r.Counters.TokensIn, &r.Counters.TokensOut,
		&r.Error, &created, &updated)
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

// queryer is what *sql.DB and *sql.Tx share for reading one row.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getRecord(ctx context.Context, q queryer, ref task.Ref) (store.Record, error) {
	row := q.QueryRowContext(ctx, `SELECT `+recordColumns+` FROM tasks WHERE ref = ?`, ref.String())
	r, err := scanRecord(row)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Record{}, store.ErrNotFound
	}
	return r, err
}

// Claim marks the task running for owner inside one BEGIN IMMEDIATE
// transaction: the row is read and written under the database's write lock,
// so concurrent claimers (goroutines or processes) are serialised and only the
// first finds the task free.
func (s *Store) Claim(ctx context.Context, ref task.Ref, owner store.Owner) (store.Record, error) {
	rec, err := s.claim(ctx, ref, owner)
	if err != nil {
		return store.Record{}, fmt.Errorf("claiming %s: %w", ref, err)
	}
	return rec, nil
}

func (s *Store) claim(ctx context.Context, ref task.Ref, owner store.Owner) (store.Record, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Record{}, fmt.Errorf("beginning transaction: %w", err)
	}
	defer tx.Rollback()
	now := formatTime(s.now())
	cur, err := getRecord(ctx, tx, ref)
	switch {
	case errors.Is(err, store.ErrNotFound):
		_, err = tx.ExecContext(ctx, `INSERT INTO tasks
			(ref, forge, repo, kind, number, status, host, pid, provider, model, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			ref.String(), ref.Forge, ref.Repo, string(ref.Kind), ref.Number, string(task.Running),
			owner.Host, owner.PID, owner.Provider, owner.Model, now, now)
	case err != nil:
		return store.Record{}, fmt.Errorf("reading task: %w", err)
	case cur.Status == task.Running && s.holders.Hold(cur):
		return store.Record{}, fmt.Errorf("held by pid %d on %s: %w", cur.PID, cur.Host, store.ErrClaimed)
	default:
		if cur.Status == task.Running {
			s.log.Info("taking over task of a dead process", "task", ref.String(), "host", cur.Host, "pid", cur.PID)
		}
		_, err = tx.ExecContext(ctx, `UPDATE tasks SET status = ?, host = ?, pid = ?, provider = ?,
			model = ?, error = '', updated_at = ? WHERE ref = ?`,
			string(task.Running), owner.Host, owner.PID, owner.Provider, owner.Model, now, ref.String())
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("writing task: %w", err)
	}
	rec, err := getRecord(ctx, tx, ref)
	if err != nil {
		return store.Record{}, fmt.Errorf("reading task: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return store.Record{}, fmt.Errorf("committing claim: %w", err)
	}
	return rec, nil
}

// SetStatus moves the task to status. errMsg is kept only for task.Failed;
// any other status clears the error.
func (s *Store) SetStatus(ctx context.Context, ref task.Ref, status task.Status, errMsg string) error {
	if status != task.Failed {
		errMsg = ""
	}
	res, err := s.db.ExecContext(ctx, `UPDATE tasks SET status = ?, error = ?, updated_at = ? WHERE ref = ?`,
		string(status), errMsg, formatTime(s.now()), ref.String())
	if err := affectedOne(res, err); err != nil {
		return fmt.Errorf("setting status of %s to %s: %w", ref, status, err)
	}
	return nil
}

// AddCounters adds delta to the task's counters in one statement.
func (s *Store) AddCounters(ctx context.Context, ref task.Ref, delta store.Counters) error {
	res, err := s.db.ExecContext(ctx, `UPDATE tasks SET llm_calls = llm_calls + ?,
		tool_calls = tool_calls + ?, tokens_in = tokens_in + ?, tokens_out = tokens_out + ?,
		updated_at = ? WHERE ref = ?`,
		delta.LLMCalls, delta.ToolCalls, delta.TokensIn, delta.TokensOut, formatTime(s.now()), ref.String())
	if err := affectedOne(res, err); err != nil {
		return fmt.Errorf("adding counters of %s: %w", ref, err)
	}
	return nil
}

// affectedOne turns an UPDATE that matched no row into store.ErrNotFound.
func affectedOne(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// Get returns the task's row.
func (s *Store) Get(ctx context.Context, ref task.Ref) (store.Record, error) {
	r, err := getRecord(ctx, s.db, ref)
	if err != nil {
		return store.Record{}, fmt.Errorf("getting %s: %w", ref, err)
	}
	return r, nil
}

// List returns every row, most recently updated first (ties by ref).
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+recordColumns+` FROM tasks ORDER BY updated_at DESC, ref`)
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
