package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// SaveCheckpoint replaces the task's checkpoint in one statement. A zero
// cp.CreatedAt is stamped with the store's clock.
func (s *Store) SaveCheckpoint(ctx context.Context, ref task.Ref, cp store.Checkpoint) error {
	created := cp.CreatedAt
	if created.IsZero() {
		created = s.now()
	}
	data := cp.Data
	if data == nil {
		data = []byte{}
	}
	// INSERT ... SELECT ... WHERE EXISTS inserts nothing for an unknown task,
	// which affectedOne turns into ErrNotFound.
	tag, err := s.pool.Exec(ctx, `INSERT INTO checkpoints (ref, step, data, created_at)
		SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM tasks WHERE ref = $1 AND ($5 = '' OR instance = $5))
		ON CONFLICT (ref) DO UPDATE SET step = excluded.step, data = excluded.data,
			created_at = excluded.created_at`,
		ref.String(), cp.Step, data, formatTime(created), cp.Holder)
	err = affectedOne(tag, err)
	if errors.Is(err, store.ErrNotFound) && cp.Holder != "" {
		err = s.notHeld(ctx, ref, cp.Holder)
	}
	if err != nil {
		return fmt.Errorf("saving checkpoint of %s: %w", ref, lost(err))
	}
	return nil
}

// LoadCheckpoint returns the task's checkpoint; ok is false when it has none.
func (s *Store) LoadCheckpoint(ctx context.Context, ref task.Ref) (store.Checkpoint, bool, error) {
	var (
		step    *int64
		data    []byte
		created *string
	)
	// The join tells an unknown task (no row) from a known task without a
	// checkpoint (a row of NULLs).
	err := s.pool.QueryRow(ctx, `SELECT c.step, c.data, c.created_at
		FROM tasks t LEFT JOIN checkpoints c ON c.ref = t.ref WHERE t.ref = $1`, ref.String()).
		Scan(&step, &data, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Checkpoint{}, false, fmt.Errorf("loading checkpoint of %s: %w", ref, lost(err))
	}
	if step == nil || created == nil {
		return store.Checkpoint{}, false, nil
	}
	t, err := parseTime(*created)
	if err != nil {
		return store.Checkpoint{}, false, fmt.Errorf("loading checkpoint of %s: %w", ref, lost(err))
	}
	if data == nil {
		data = []byte{}
	}
	return store.Checkpoint{Step: int(*step), Data: data, CreatedAt: t}, true, nil
}

// ClearCheckpoint deletes the task's checkpoint, if any.
func (s *Store) ClearCheckpoint(ctx context.Context, ref task.Ref) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM checkpoints WHERE ref = $1`, ref.String())
	if err == nil && tag.RowsAffected() == 0 {
		// Nothing deleted: fine for a known task, an error for an unknown one.
		_, err = getRecord(ctx, s.pool, ref)
	}
	if err != nil {
		return fmt.Errorf("clearing checkpoint of %s: %w", ref, lost(err))
	}
	return nil
}

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
	// The JSON type (not JSONB) keeps the text as given, \u0000 included.
	tag, err := s.pool.Exec(ctx, `INSERT INTO conversations (ref, round, mark, since, summaries)
		SELECT $1, $2, $3, $4, CAST($5::text AS json) WHERE EXISTS (SELECT 1 FROM tasks WHERE ref = $1)
		ON CONFLICT (ref) DO UPDATE SET round = excluded.round, mark = excluded.mark,
			since = excluded.since, summaries = excluded.summaries`,
		ref.String(), c.Round, c.Mark, formatTime(c.Since), string(enc))
	if err := affectedOne(tag, err); err != nil {
		return fmt.Errorf("saving conversation of %s: %w", ref, lost(err))
	}
	return nil
}

// LoadConversation returns the task's conversation; ok is false when it has
// none. Summaries is never nil in a loaded conversation.
func (s *Store) LoadConversation(ctx context.Context, ref task.Ref) (store.Conversation, bool, error) {
	c, ok, err := s.loadConversation(ctx, ref)
	if err != nil {
		return store.Conversation{}, false, fmt.Errorf("loading conversation of %s: %w", ref, lost(err))
	}
	return c, ok, nil
}

func (s *Store) loadConversation(ctx context.Context, ref task.Ref) (store.Conversation, bool, error) {
	var (
		round, mark      *int64
		since, summaries *string
	)
	err := s.pool.QueryRow(ctx, `SELECT c.round, c.mark, c.since, c.summaries::text
		FROM tasks t LEFT JOIN conversations c ON c.ref = t.ref WHERE t.ref = $1`, ref.String()).
		Scan(&round, &mark, &since, &summaries)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Conversation{}, false, store.ErrNotFound
	}
	if err != nil {
		return store.Conversation{}, false, err
	}
	if round == nil || mark == nil || since == nil || summaries == nil {
		return store.Conversation{}, false, nil
	}
	c := store.Conversation{Round: int(*round), Mark: *mark, Summaries: []string{}}
	if c.Since, err = parseTime(*since); err != nil {
		return store.Conversation{}, false, err
	}
	if err := json.Unmarshal([]byte(*summaries), &c.Summaries); err != nil {
		return store.Conversation{}, false, fmt.Errorf("decoding stored summaries: %w", err)
	}
	return c, true, nil
}

// notHeld says why a save fenced by holder wrote nothing: the task is
// unknown (ErrNotFound), or another instance holds it (ErrClaimed).
func (s *Store) notHeld(ctx context.Context, ref task.Ref, holder string) error {
	rec, err := getRecord(ctx, s.pool, ref)
	if err != nil {
		return err
	}
	return fmt.Errorf("%s no longer holds it (%q does): %w", holder, rec.Instance, store.ErrClaimed)
}
