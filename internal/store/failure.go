package store

import (
	"context"
	"errors"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
)

// Failure is an error of the store itself rather than one of its answers
// (ErrNotFound, ErrClaimed): it could not be read or written (a read-only
// file, a full disk, a lost connection). Nothing a process does is durable
// until it is fixed, so the worker stops instead of going on, and `run`
// exits 1 with it.
type Failure struct{ Err error }

func (f *Failure) Error() string { return "state store: " + f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// IsFailure reports whether err is, or wraps, a *Failure.
func IsFailure(err error) bool {
	var f *Failure
	return errors.As(err, &f)
}

// MarkFailures returns s with every error it returns made a *Failure, but
// the port's answers and the caller's own cancellation.
func MarkFailures(s Store) Store { return marked{s} }

type marked struct{ s Store }

var _ Store = marked{}

// mark makes err a Failure unless it is an answer of the port, or the
// caller's context ended: a statement cut mid-way by the cancellation fails
// with the database's own error (SQLite: interrupted), not the context's.
func mark(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrClaimed) || errors.Is(err, ErrNotHeld) || IsFailure(err) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		return err
	}
	return &Failure{Err: err}
}

func (m marked) Claim(ctx context.Context, ref task.Ref, owner Owner) (Record, error) {
	r, err := m.s.Claim(ctx, ref, owner)
	return r, mark(ctx, err)
}

func (m marked) ClaimQueued(ctx context.Context, ref task.Ref, owner Owner) (Record, error) {
	r, err := m.s.ClaimQueued(ctx, ref, owner)
	return r, mark(ctx, err)
}

func (m marked) TakeOver(ctx context.Context, ref task.Ref, owner Owner) (Record, error) {
	r, err := m.s.TakeOver(ctx, ref, owner)
	return r, mark(ctx, err)
}

func (m marked) Renew(ctx context.Context, owner Owner) ([]task.Ref, error) {
	refs, err := m.s.Renew(ctx, owner)
	return refs, mark(ctx, err)
}

func (m marked) Release(ctx context.Context, ref task.Ref) (Record, error) {
	r, err := m.s.Release(ctx, ref)
	return r, mark(ctx, err)
}

func (m marked) SetStatus(ctx context.Context, ref task.Ref, status task.Status, errMsg string) error {
	return mark(ctx, m.s.SetStatus(ctx, ref, status, errMsg))
}

func (m marked) AddCounters(ctx context.Context, ref task.Ref, delta Counters) error {
	return mark(ctx, m.s.AddCounters(ctx, ref, delta))
}

func (m marked) SaveCheckpoint(ctx context.Context, ref task.Ref, cp Checkpoint) error {
	return mark(ctx, m.s.SaveCheckpoint(ctx, ref, cp))
}

func (m marked) LoadCheckpoint(ctx context.Context, ref task.Ref) (Checkpoint, bool, error) {
	cp, ok, err := m.s.LoadCheckpoint(ctx, ref)
	return cp, ok, mark(ctx, err)
}

func (m marked) ClearCheckpoint(ctx context.Context, ref task.Ref) error {
	return mark(ctx, m.s.ClearCheckpoint(ctx, ref))
}

func (m marked) SaveConversation(ctx context.Context, ref task.Ref, c Conversation) error {
	return mark(ctx, m.s.SaveConversation(ctx, ref, c))
}

func (m marked) LoadConversation(ctx context.Context, ref task.Ref) (Conversation, bool, error) {
	c, ok, err := m.s.LoadConversation(ctx, ref)
	return c, ok, mark(ctx, err)
}

func (m marked) Get(ctx context.Context, ref task.Ref) (Record, error) {
	r, err := m.s.Get(ctx, ref)
	return r, mark(ctx, err)
}

func (m marked) List(ctx context.Context) ([]Record, error) {
	rs, err := m.s.List(ctx)
	return rs, mark(ctx, err)
}

func (m marked) Close() error { return mark(context.Background(), m.s.Close()) }

func (m marked) AddEvent(ctx context.Context, ref task.Ref, e Event) error {
	return mark(ctx, m.s.AddEvent(ctx, ref, e))
}

func (m marked) Events(ctx context.Context, ref task.Ref, kinds ...string) ([]Event, error) {
	es, err := m.s.Events(ctx, ref, kinds...)
	return es, mark(ctx, err)
}

func (m marked) PruneEvents(ctx context.Context, before time.Time) (int, error) {
	n, err := m.s.PruneEvents(ctx, before)
	return n, mark(ctx, err)
}
