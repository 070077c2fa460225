package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// AddEvent appends an event to the task's record; an unknown task is
// ErrNotFound. A zero At is stamped with the store's clock.
func (s *Store) AddEvent(ctx context.Context, ref task.Ref, e store.Event) error {
	if e.At.IsZero() {
		e.At = s.now()
	}
	e.At = e.At.UTC()
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("adding an event of %s: %w", ref, err)
	}
	if err := s.intact(); err != nil {
		return fmt.Errorf("adding an event of %s: %w", ref, err)
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO events (ref, kind, at, data)
		SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM tasks WHERE ref = ?)`,
		ref.String(), e.Kind, formatTime(e.At), string(data), ref.String())
	if err := affectedOne(res, err); err != nil {
		return fmt.Errorf("adding an event of %s: %w", ref, s.kept(err))
	}
	return s.kept(nil)
}

// Events returns the task's events in the order they were added (of
// kinds, when given).
func (s *Store) Events(ctx context.Context, ref task.Ref, kinds ...string) ([]store.Event, error) {
	if err := s.intact(); err != nil {
		return nil, fmt.Errorf("reading the events of %s: %w", ref, err)
	}
	query, args := `SELECT data FROM events WHERE ref = ?`, []any{ref.String()}
	if len(kinds) > 0 {
		query += ` AND kind IN (?` + strings.Repeat(", ?", len(kinds)-1) + `)`
		for _, k := range kinds {
			args = append(args, k)
		}
	}
	rows, err := s.db.QueryContext(ctx, query+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the events of %s: %w", ref, s.kept(err))
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var data string
		var e store.Event
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("reading the events of %s: %w", ref, s.kept(err))
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return nil, fmt.Errorf("reading the events of %s: an event is not JSON: %w", ref, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the events of %s: %w", ref, s.kept(err))
	}
	return out, s.kept(nil)
}

// PruneEvents drops every event older than before.
func (s *Store) PruneEvents(ctx context.Context, before time.Time) (int, error) {
	if err := s.intact(); err != nil {
		return 0, fmt.Errorf("pruning events: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM events WHERE at < ?`, formatTime(before))
	if err != nil {
		return 0, fmt.Errorf("pruning events: %w", s.kept(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("pruning events: %w", s.kept(err))
	}
	return int(n), s.kept(nil)
}
