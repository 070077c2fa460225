package postgres

import (
	"context"
	"encoding/json"
	"fmt"
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
	// The JSON type keeps the text as given, \u0000 included.
	tag, err := s.pool.Exec(ctx, `INSERT INTO events (ref, kind, at, data)
		SELECT $1, $2, $3, CAST($4::text AS json) WHERE EXISTS (SELECT 1 FROM tasks WHERE ref = $1)`,
		ref.String(), e.Kind, formatTime(e.At), string(data))
	if err := affectedOne(tag, err); err != nil {
		return fmt.Errorf("adding an event of %s: %w", ref, lost(err))
	}
	return nil
}

// Events returns the task's events in the order they were added (of
// kinds, when given).
func (s *Store) Events(ctx context.Context, ref task.Ref, kinds ...string) ([]store.Event, error) {
	if kinds == nil {
		kinds = []string{} // an empty array, not NULL: all kinds
	}
	rows, err := s.pool.Query(ctx, `SELECT data::text FROM events WHERE ref = $1 AND (cardinality($2::text[]) = 0 OR kind = ANY($2))
		ORDER BY id`, ref.String(), kinds)
	if err != nil {
		return nil, fmt.Errorf("reading the events of %s: %w", ref, lost(err))
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var data string
		var e store.Event
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("reading the events of %s: %w", ref, lost(err))
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return nil, fmt.Errorf("reading the events of %s: an event is not JSON: %w", ref, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the events of %s: %w", ref, lost(err))
	}
	return out, nil
}

// PruneEvents drops every event older than before.
func (s *Store) PruneEvents(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM events WHERE at < $1`, formatTime(before))
	if err != nil {
		return 0, fmt.Errorf("pruning events: %w", lost(err))
	}
	return int(tag.RowsAffected()), nil
}
