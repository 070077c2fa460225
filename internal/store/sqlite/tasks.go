package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

const recordColumns = `forge, repo, kind, number, status, host, pid, instance, lease_until, provider, model, attempts,
	llm_calls, tool_calls, tokens_in, tokens_out, error, created_at, updated_at`

type scanner interface {
	Scan(dest ...any) error
}

func scanRecord(row scanner) (store.Record, error) {
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
	rec, _, err := s.claim(ctx, ref, owner, store.ClaimAny)
	if err != nil {
		return store.Record{}, fmt.Errorf("claiming %s: %w", ref, err)
	}
	return rec, nil
}

// ClaimQueued is Claim for a task that must be queued, or running under a
// holder that no longer holds it.
func (s *Store) ClaimQueued(ctx context.Context, ref task.Ref, owner store.Owner) (store.Record, error) {
	rec, _, err := s.claim(ctx, ref, owner, store.ClaimQueued)
	if err != nil {
		return store.Record{}, fmt.Errorf("claiming queued %s: %w", ref, err)
	}
	return rec, nil
}

// TakeOver is Claim for a task that must be running under a holder that
// no longer holds it; it returns the record as it was.
func (s *Store) TakeOver(ctx context.Context, ref task.Ref, owner store.Owner) (store.Record, error) {
	_, prev, err := s.claim(ctx, ref, owner, store.ClaimTakeOver)
	if err != nil {
		return store.Record{}, fmt.Errorf("taking over %s: %w", ref, err)
	}
	return prev, nil
}

// claim claims ref for owner and returns the new record and the one before
// (zero for a new task); mode says which statuses it may claim from.
func (s *Store) claim(ctx context.Context, ref task.Ref, owner store.Owner, mode store.ClaimMode) (rec, prev store.Record, err error) {
	if err := s.intact(); err != nil {
		return rec, prev, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return rec, prev, fmt.Errorf("beginning transaction: %w", err)
	}
	defer tx.Rollback()
	at := s.now()
	now, lease := formatTime(at), formatTime(at.Add(owner.Lease))
	prev, err = getRecord(ctx, tx, ref)
	switch {
	case errors.Is(err, store.ErrNotFound) && mode != store.ClaimAny:
		return rec, prev, mode.Unknown()
	case errors.Is(err, store.ErrNotFound):
		_, err = tx.ExecContext(ctx, `INSERT INTO tasks
			(ref, forge, repo, kind, number, status, host, pid, instance, lease_until, provider, model, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			ref.String(), ref.Forge, ref.Repo, string(ref.Kind), ref.Number, string(task.Running),
			owner.Host, owner.PID, owner.Instance, lease, owner.Provider, owner.Model, now, now)
	case err != nil:
		return rec, prev, fmt.Errorf("reading task: %w", err)
	default:
		if err := mode.Allows(prev, s.holders, at); err != nil {
			return rec, prev, err
		}
		if prev.Status == task.Running {
			s.log.Info("taking over a task its holder no longer holds", "task", ref.String(),
				"host", prev.Host, "pid", prev.PID, "instance", prev.Instance)
		}
		_, err = tx.ExecContext(ctx, `UPDATE tasks SET status = ?, host = ?, pid = ?, instance = ?, lease_until = ?,
			provider = ?, model = ?, attempts = ?, error = '', updated_at = ? WHERE ref = ?`,
			string(task.Running), owner.Host, owner.PID, owner.Instance, lease, owner.Provider, owner.Model,
			mode.Attempts(prev.Attempts), now, ref.String())
	}
	if err != nil {
		return rec, prev, fmt.Errorf("writing task: %w", err)
	}
	if rec, err = getRecord(ctx, tx, ref); err != nil {
		return rec, prev, fmt.Errorf("reading task: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return rec, prev, fmt.Errorf("committing claim: %w", err)
	}
	return rec, prev, s.kept(nil)
}

// Renew extends the lease of the running tasks owner.Instance holds.
func (s *Store) Renew(ctx context.Context, owner store.Owner) ([]task.Ref, error) {
	if err := s.intact(); err != nil {
		return nil, fmt.Errorf("renewing the leases of %s: %w", owner.Instance, err)
	}
	at := s.now()
	rows, err := s.db.QueryContext(ctx, `UPDATE tasks SET lease_until = ? WHERE instance = ? AND instance != '' AND status = ?
		RETURNING forge, repo, kind, number`, formatTime(at.Add(owner.Lease)), owner.Instance, string(task.Running))
	if err != nil {
		return nil, fmt.Errorf("renewing the leases of %s: %w", owner.Instance, err)
	}
	refs, err := scanRefs(rows)
	if err != nil {
		return nil, fmt.Errorf("renewing the leases of %s: %w", owner.Instance, err)
	}
	return refs, s.kept(nil)
}

func scanRefs(rows *sql.Rows) ([]task.Ref, error) {
	defer rows.Close()
	var refs []task.Ref
	for rows.Next() {
		var r task.Ref
		var kind string
		if err := rows.Scan(&r.Forge, &r.Repo, &kind, &r.Number); err != nil {
			return nil, err
		}
		r.Kind = task.Kind(kind)
		refs = append(refs, r)
	}
	return refs, rows.Err()
}

// Release frees a running or queued task from its holder.
func (s *Store) Release(ctx context.Context, ref task.Ref) (store.Record, error) {
	if err := s.intact(); err != nil {
		return store.Record{}, fmt.Errorf("releasing %s: %w", ref, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Record{}, fmt.Errorf("releasing %s: beginning transaction: %w", ref, err)
	}
	defer tx.Rollback()
	prev, err := getRecord(ctx, tx, ref)
	if err != nil {
		return store.Record{}, fmt.Errorf("releasing %s: %w", ref, err)
	}
	if err := store.InHand(prev); err != nil {
		return store.Record{}, fmt.Errorf("releasing %s: %w", ref, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET instance = '', lease_until = '', updated_at = ? WHERE ref = ?`,
		formatTime(s.now()), ref.String()); err != nil {
		return store.Record{}, fmt.Errorf("releasing %s: %w", ref, err)
	}
	if err := tx.Commit(); err != nil {
		return store.Record{}, fmt.Errorf("releasing %s: committing: %w", ref, err)
	}
	return prev, s.kept(nil)
}

// SetStatus moves the task to status. errMsg is kept only for task.Failed;
// any other status clears the error.
func (s *Store) SetStatus(ctx context.Context, ref task.Ref, status task.Status, errMsg string) error {
	if status != task.Failed {
		errMsg = ""
	}
	if err := s.intact(); err != nil {
		return fmt.Errorf("setting status of %s to %s: %w", ref, status, err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE tasks SET status = ?, error = ?, updated_at = ? WHERE ref = ?`,
		string(status), errMsg, formatTime(s.now()), ref.String())
	if err := affectedOne(res, err); err != nil {
		return fmt.Errorf("setting status of %s to %s: %w", ref, status, s.kept(err))
	}
	return s.kept(nil)
}

// AddCounters adds delta to the task's counters in one statement.
func (s *Store) AddCounters(ctx context.Context, ref task.Ref, delta store.Counters) error {
	if err := s.intact(); err != nil {
		return fmt.Errorf("adding counters of %s: %w", ref, err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE tasks SET llm_calls = llm_calls + ?,
		tool_calls = tool_calls + ?, tokens_in = tokens_in + ?, tokens_out = tokens_out + ?,
		updated_at = ? WHERE ref = ?`,
		delta.LLMCalls, delta.ToolCalls, delta.TokensIn, delta.TokensOut, formatTime(s.now()), ref.String())
	if err := affectedOne(res, err); err != nil {
		return fmt.Errorf("adding counters of %s: %w", ref, s.kept(err))
	}
	return s.kept(nil)
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
	if err := s.intact(); err != nil {
		return store.Record{}, fmt.Errorf("getting %s: %w", ref, err)
	}
	r, err := getRecord(ctx, s.db, ref)
	if err != nil {
		return store.Record{}, fmt.Errorf("getting %s: %w", ref, err)
	}
	return r, nil
}

// List returns every row, most recently updated first (ties by ref).
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	if err := s.intact(); err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
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
