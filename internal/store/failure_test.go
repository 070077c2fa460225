package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
)

// MarkFailures marks what the store could not do, not what it answered nor
// what the caller cancelled.
func TestMarkFailures(t *testing.T) {
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := store.MarkFailures(st)
	ref := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 1}
	if _, err := s.Get(t.Context(), ref); !errors.Is(err, store.ErrNotFound) || store.IsFailure(err) {
		t.Errorf("Get of an unknown task: %v, want ErrNotFound unmarked", err)
	}
	if _, err := s.Claim(t.Context(), ref, store.Owner{Host: "h", PID: 1}); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.SetStatus(cancelled, ref, task.Queued, ""); !errors.Is(err, context.Canceled) || store.IsFailure(err) {
		t.Errorf("SetStatus with a cancelled context: %v, want the cancellation unmarked", err)
	}
	st.Close()
	err = s.SaveCheckpoint(t.Context(), ref, store.Checkpoint{Step: 1, Data: []byte(`{}`)})
	if !store.IsFailure(err) || !strings.HasPrefix(err.Error(), "state store: ") {
		t.Errorf("SaveCheckpoint on a closed store: %v, want a Failure", err)
	}
}
