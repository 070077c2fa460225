package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// SaveConversation replaces the task's conversation in one statement, so a
// concurrent reader sees the old conversation or the new one, never a mix.
// Since is stored in UTC; nil Summaries are stored as an empty list.
func (s *Store) SaveConversation(ctx context.Context, ref task.Ref, c store.Conversation) error {
	summaries := c.Summaries
	if summaries == nil {
		summaries = []string{}
	}
	enc, err := json.Marshal(summaries)
	if err != nil {
		return fmt.Errorf("saving conversation of %s: encoding summaries: %w", ref, err)
	}
	if err := s.intact(); err != nil {
		return fmt.Errorf("saving conversation of %s: %w", ref, err)
	}
	// As in SaveCheckpoint: nothing is inserted for an unknown task, which
	// RowsAffected turns into ErrNotFound.
	res, err := s.db.ExecContext(ctx, `INSERT INTO conversations (ref, round, mark, since, summaries)
		SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM tasks WHERE ref = ?)
		ON CONFLICT (ref) DO UPDATE SET round = excluded.round, mark = excluded.mark,
			since = excluded.since, summaries = excluded.summaries`,
		ref.String(), c.Round, c.Mark, formatTime(c.Since), string(enc), ref.String())
	if err := affectedOne(res, err); err != nil {
		return fmt.Errorf("saving conversation of %s: %w", ref, s.kept(err))
	}
	return s.kept(nil)
}

// LoadConversation returns the task's conversation; ok is false when it has
// none. Summaries is never nil in a loaded conversation.
func (s *Store) LoadConversation(ctx context.Context, ref task.Ref) (store.Conversation, bool, error) {
	if err := s.intact(); err != nil {
		return store.Conversation{}, false, fmt.Errorf("loading conversation of %s: %w", ref, err)
	}
	c, ok, err := s.loadConversation(ctx, ref)
	if err != nil {
		return store.Conversation{}, false, fmt.Errorf("loading conversation of %s: %w", ref, err)
	}
	return c, ok, nil
}

func (s *Store) loadConversation(ctx context.Context, ref task.Ref) (store.Conversation, bool, error) {
	var (
		round, mark      sql.NullInt64
		since, summaries sql.NullString
	)
	// The join tells an unknown task (no row) from a known task without a
	// conversation (a row of NULLs).
	err := s.db.QueryRowContext(ctx, `SELECT c.round, c.mark, c.since, c.summaries
		FROM tasks t LEFT JOIN conversations c ON c.ref = t.ref WHERE t.ref = ?`, ref.String()).
		Scan(&round, &mark, &since, &summaries)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Conversation{}, false, store.ErrNotFound
	}
	if err != nil {
		return store.Conversation{}, false, err
	}
	if !round.Valid {
		return store.Conversation{}, false, nil
	}
	c := store.Conversation{Round: int(round.Int64), Mark: mark.Int64, Summaries: []string{}}
	if c.Since, err = parseTime(since.String); err != nil {
		return store.Conversation{}, false, err
	}
	if err := json.Unmarshal([]byte(summaries.String), &c.Summaries); err != nil {
		return store.Conversation{}, false, fmt.Errorf("decoding stored summaries: %w", err)
	}
	return c, true, nil
}
