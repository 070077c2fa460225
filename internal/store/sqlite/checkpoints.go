package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// SaveCheckpoint replaces the task's checkpoint. A zero cp.CreatedAt is
// stamped with the store's clock.
func (s *Store) SaveCheckpoint(ctx context.Context, ref task.Ref, cp store.Checkpoint) error {
	created := cp.CreatedAt
	if created.IsZero() {
		created = s.now()
	}
	data := cp.Data
	if data == nil {
		data = []byte{}
	}
	if err := s.intact(); err != nil {
		return fmt.Errorf("saving checkpoint of %s: %w", ref, err)
	}
	// INSERT ... SELECT ... WHERE EXISTS inserts nothing for an unknown task,
	// which RowsAffected turns into ErrNotFound.
	res, err := s.db.ExecContext(ctx, `INSERT INTO checkpoints (ref, step, data, created_at)
		SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM tasks WHERE ref = ? AND (? = '' OR instance = ?))
		ON CONFLICT (ref) DO UPDATE SET step = excluded.step, data = excluded.data,
			created_at = excluded.created_at`,
		ref.String(), cp.Step, data, formatTime(created), ref.String(), cp.Holder, cp.Holder)
	err = affectedOne(res, err)
	if errors.Is(err, store.ErrNotFound) && cp.Holder != "" {
		err = s.notHeld(ctx, ref, cp.Holder)
	}
	if err != nil {
		return fmt.Errorf("saving checkpoint of %s: %w", ref, s.kept(err))
	}
	return s.kept(nil)
}

// LoadCheckpoint returns the task's checkpoint; ok is false when it has none.
func (s *Store) LoadCheckpoint(ctx context.Context, ref task.Ref) (store.Checkpoint, bool, error) {
	if err := s.intact(); err != nil {
		return store.Checkpoint{}, false, fmt.Errorf("loading checkpoint of %s: %w", ref, err)
	}
	var (
		step    sql.NullInt64
		data    []byte
		created sql.NullString
	)
	err := s.db.QueryRowContext(ctx, `SELECT c.step, c.data, c.created_at
		FROM tasks t LEFT JOIN checkpoints c ON c.ref = t.ref WHERE t.ref = ?`, ref.String()).
		Scan(&step, &data, &created)
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Checkpoint{}, false, fmt.Errorf("loading checkpoint of %s: %w", ref, err)
	}
	if !step.Valid {
		return store.Checkpoint{}, false, nil
	}
	t, err := parseTime(created.String)
	if err != nil {
		return store.Checkpoint{}, false, fmt.Errorf("loading checkpoint of %s: %w", ref, err)
	}
	if data == nil {
		data = []byte{}
	}
	return store.Checkpoint{Step: int(step.Int64), Data: data, CreatedAt: t}, true, nil
}

// ClearCheckpoint deletes the task's checkpoint, if any. secure_delete
// zeroes it in the database; the WAL still holds the pages written while
// it lived, so they are copied back and the WAL is truncated.
func (s *Store) ClearCheckpoint(ctx context.Context, ref task.Ref) error {
	if err := s.intact(); err != nil {
		return fmt.Errorf("clearing checkpoint of %s: %w", ref, err)
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM checkpoints WHERE ref = ?`, ref.String())
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			// Nothing deleted: fine for a known task, an error for an unknown one.
			_, err = getRecord(ctx, s.db, ref)
		}
	}
	if err != nil {
		return fmt.Errorf("clearing checkpoint of %s: %w", ref, s.kept(err))
	}
	s.truncateWAL(ctx)
	return s.kept(nil)
}

// truncateWAL checkpoints the WAL into the database and truncates it. It
// cannot finish while another connection (or process) is reading; then the
// old frames stay until the next truncation, or until the last connection
// closes and SQLite removes the WAL.
func (s *Store) truncateWAL(ctx context.Context) {
	var busy, frames, moved int
	err := s.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &moved)
	if err != nil || busy != 0 {
		s.log.Debug("the WAL could not be truncated now", "path", s.path, "error", err)
	}
}

// notHeld says why a save fenced by holder wrote nothing: the task is
// unknown (ErrNotFound), or another instance holds it (ErrClaimed).
func (s *Store) notHeld(ctx context.Context, ref task.Ref, holder string) error {
	rec, err := getRecord(ctx, s.db, ref)
	if err != nil {
		return err
	}
	return fmt.Errorf("%s no longer holds it (%q does): %w", holder, rec.Instance, store.ErrClaimed)
}
