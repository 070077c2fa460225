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

// ErrNotHeld is returned by Release for a task that is neither running nor
// queued: nothing holds it.
var ErrNotHeld = errors.New("task is not running or queued")

// ErrLost is wrapped by every error of a store whose database was removed,
// replaced or dropped under the running process (the SQLite file deleted,
// the PostgreSQL schema dropped): nothing written to it is kept or seen by
// anyone, and it does not come back, so the command stops with it rather
// than retry. It is a failure of the store (MarkFailures marks it so).
var ErrLost = errors.New("the state database was removed or replaced while running")

// Counters are what a task has cost so far.
type Counters struct {
	LLMCalls  int `json:"llm_calls"`
	ToolCalls int `json:"tool_calls"`
	TokensIn  int `json:"tokens_in"`
	TokensOut int `json:"tokens_out"`
}

// Record is a task's row.
type Record struct {
	Ref      task.Ref
	Status   task.Status
	Host     string // host that last claimed it
	PID      int    // process that last claimed it
	Instance string // process start that last claimed it; "" once released
	// LeaseUntil is when a running task's claim lapses unless its holder
	// renews it; zero once released.
	LeaseUntil time.Time
	Provider   string
	Model      string
	// Attempts is how many runs of the task this round has begun: every
	// ClaimQueued adds one (a job delivered again, a takeover's job, a
	// resume), and Claim, which starts a round, sets it to 0. A run that
	// leaves the task in hand (its process died, was stopped or lost its
	// lease) is thus counted once, however the task comes back.
	Attempts  int
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
	// Holder, when set, is the instance that must hold the task for the
	// save to happen: a run whose lease was lost or released cannot
	// overwrite its new holder's checkpoint (SaveCheckpoint fails with
	// ErrClaimed). Not stored.
	Holder string
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

// Event is one thing that happened in a task, for its page (internal/ui):
// a model request, a tool call, a comment heard, a check, the round's end.
// It is kept after the task ends, until PruneEvents drops it. Its text is
// redacted before it is added; the store keeps it as given.
type Event struct {
	At    time.Time `json:"at"`
	Kind  string    `json:"kind"`            // EventRequest, EventCall, …
	Phase string    `json:"phase,omitempty"` // planning mode's phase
	// Title is the event in a line: the reply's comment, the tool, the
	// check's command, the outcome.
	Title string `json:"title,omitempty"`
	// Args and Text are a call's arguments and result (a check's output,
	// an end's reason), cut where the event says.
	Args  string `json:"args,omitempty"`
	Text  string `json:"text,omitempty"`
	Error bool   `json:"error,omitempty"`
	// TokensIn and TokensOut are a request's; Millis how long it (or a
	// call, a check) took; Count the comments ignored (heard); Exit a
	// check's exit status (-1: it did not exit on its own).
	TokensIn  int    `json:"tokens_in,omitempty"`
	TokensOut int    `json:"tokens_out,omitempty"`
	Millis    int64  `json:"ms,omitempty"`
	Count     int    `json:"count,omitempty"`
	Exit      int    `json:"exit,omitempty"`
	Host      string `json:"host,omitempty"`
	// URL is the task's page on the forge (a round's), or the pull or
	// merge request (a delivery's).
	URL string `json:"url,omitempty"`
}

// The kinds of events.
const (
	EventRound      = "round"      // a run began (a new round, or a resume)
	EventRequest    = "request"    // a model request and its reply
	EventCall       = "call"       // a tool call and its result
	EventHeard      = "heard"      // comments handed to the model, and those ignored (counted)
	EventCompaction = "compaction" // the conversation compacted to fit
	EventCheck      = "check"      // a repository check run before a done
	EventQuestion   = "question"   // a tool server's question, asked or answered
	EventDelivery   = "delivery"   // the commit pushed, the pull or merge request
	EventEnd        = "end"        // how the run ended
	EventStatus     = "status"     // the task moved (its labels and status)
)

// Owner identifies the process claiming a task.
type Owner struct {
	Host     string
	PID      int
	Instance string // this start of the process: unique across hosts and restarts
	Provider string
	Model    string
	// Lease is how long a claim holds without a renewal (Renew).
	Lease time.Duration
}

// Store holds task state. Every method is safe for concurrent use, and for
// use by several processes sharing one store.
type Store interface {
	// Claim marks the task running for owner, atomically, with a lease of
	// owner.Lease, and starts a round (Record.Attempts 0). It fails with ErrClaimed when the task is running and
	// its holder still holds it (Holders.Hold: its lease has not lapsed,
	// and it is not a dead process of this host).
	Claim(ctx context.Context, ref task.Ref, owner Owner) (Record, error)
	// ClaimQueued is Claim for the task of a job: it claims only a task
	// that is queued, or running under a holder that no longer holds it,
	// atomically, and counts the run it begins (Record.Attempts). It fails with ErrClaimed when the holder still holds it,
	// ErrNotHeld when the task is in any other status (another process
	// worked on it and finished since the job was queued: a queued or
	// finished task is claimable by Claim, so a check before Claim would
	// leave a gap), and ErrNotFound for an unknown task.
	ClaimQueued(ctx context.Context, ref task.Ref, owner Owner) (Record, error)
	// TakeOver claims for owner a task that is running under a holder
	// that no longer holds it (its lease lapsed, or it was released, or
	// it is a dead process of this host), atomically, and returns the
	// task's record as it was before. It fails with ErrClaimed when the
	// holder still holds it and ErrNotHeld when the task is not running.
	TakeOver(ctx context.Context, ref task.Ref, owner Owner) (Record, error)
	// Renew extends by owner.Lease the lease of every running task whose
	// holder is owner.Instance, and returns those tasks: a task this
	// process works on that is missing was released or taken over.
	Renew(ctx context.Context, owner Owner) ([]task.Ref, error)
	// Release frees a running or queued task from its holder, whoever
	// that is: its lease lapses at once and its instance is cleared, so
	// its holder's next Renew misses it and any process may take it over
	// from its checkpoint. It fails with ErrNotHeld for a task in any
	// other status and ErrNotFound for an unknown one.
	Release(ctx context.Context, ref task.Ref) (Record, error)
	// SetStatus moves the task to status; errMsg is kept for failed tasks.
	SetStatus(ctx context.Context, ref task.Ref, status task.Status, errMsg string) error
	// AddCounters adds delta to the task's counters.
	AddCounters(ctx context.Context, ref task.Ref, delta Counters) error
	// SaveCheckpoint stores the task's latest checkpoint (replacing older
	// ones); with cp.Holder set, only while that instance holds the task.
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
	// AddEvent records an event of the task (its At in UTC).
	AddEvent(ctx context.Context, ref task.Ref, e Event) error
	// Events returns the task's events, oldest first; with kinds, only
	// the events of those kinds.
	Events(ctx context.Context, ref task.Ref, kinds ...string) ([]Event, error)
	// PruneEvents drops the events older than before, and says how many.
	PruneEvents(ctx context.Context, before time.Time) (int, error)
	Close() error
}

// HeldBy returns s with every checkpoint saved through it fenced by
// instance (Checkpoint.Holder): the saves of a run stop the moment its
// process no longer holds the task.
func HeldBy(s Store, instance string) Store { return heldBy{Store: s, instance: instance} }

type heldBy struct {
	Store
	instance string
}

func (h heldBy) SaveCheckpoint(ctx context.Context, ref task.Ref, cp Checkpoint) error {
	cp.Holder = h.instance
	return h.Store.SaveCheckpoint(ctx, ref, cp)
}
