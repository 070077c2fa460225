// Package store is the state port: a row per task with its status and
// counters, and a checkpoint of the task's conversation after every step.
// The embedded default is store/sqlite.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
)

// ErrNotFound is returned (wrapped) for a task the store has never seen.
var ErrNotFound = errors.New("task not in store")

// ErrClaimed is returned by Claim when another live process holds the task.
var ErrClaimed = errors.New("task is claimed by another process")

// Counters are what a task has cost so far.
type Counters struct {
	LLMCalls  int `json:"llm_calls"`
	ToolCalls int `json:"tool_calls"`
	TokensIn  int `json:"tokens_in"`
	TokensOut int `json:"tokens_out"`
}

// Record is a task's row.
type Record struct {
	Ref       task.Ref
	Status    task.Status
	Host      string // host that last claimed it
	PID       int    // process that last claimed it
	Provider  string
	Model     string
	Counters  Counters
	Error     string // last failure, empty unless Status is failed
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Checkpoint is the saved state of a task's conversation after a step. Data
// is opaque to the store (the agent's JSON).
type Checkpoint struct {
	Step      int
	Data      []byte
	CreatedAt time.Time
}

// Conversation is what a task's follow-up conversation keeps between
// rounds (spec 003): it outlives the checkpoint, which a finished round
// clears.
type Conversation struct {
	Round     int       `json:"round"`     // rounds finished
	Mark      int64     `json:"mark"`      // newest comment id already answered or judged
	Since     time.Time `json:"since"`     // when the task began to await a reply
	Summaries []string  `json:"summaries"` // what each finished round did, oldest first
}

// Owner identifies the process claiming a task.
type Owner struct {
	Host     string
	PID      int
	Provider string
	Model    string
}

// Store holds task state. Every method is safe for concurrent use, and for
// use by several processes sharing one store.
type Store interface {
	// Claim marks the task running for owner, atomically. It fails with
	// ErrClaimed when the task is running under another process that is
	// still alive (a dead process on the same host does not hold it).
	Claim(ctx context.Context, ref task.Ref, owner Owner) (Record, error)
	// SetStatus moves the task to status; errMsg is kept for failed tasks.
	SetStatus(ctx context.Context, ref task.Ref, status task.Status, errMsg string) error
	// AddCounters adds delta to the task's counters.
	AddCounters(ctx context.Context, ref task.Ref, delta Counters) error
	// SaveCheckpoint stores the task's latest checkpoint (replacing older ones).
	SaveCheckpoint(ctx context.Context, ref task.Ref, cp Checkpoint) error
	// LoadCheckpoint returns the latest checkpoint; ok is false when none.
	LoadCheckpoint(ctx context.Context, ref task.Ref) (cp Checkpoint, ok bool, err error)
	// ClearCheckpoint forgets the task's checkpoint (a new round starts fresh).
	ClearCheckpoint(ctx context.Context, ref task.Ref) error
	// SaveConversation stores the task's conversation (replacing the old).
	SaveConversation(ctx context.Context, ref task.Ref, c Conversation) error
	// LoadConversation returns it; ok is false when the task has none.
	LoadConversation(ctx context.Context, ref task.Ref) (c Conversation, ok bool, err error)
	// Get returns the task's row.
	Get(ctx context.Context, ref task.Ref) (Record, error)
	// List returns every row, most recently updated first.
	List(ctx context.Context) ([]Record, error)
	Close() error
}
