package engine

import (
	"context"

	"github.com/coding-agent/coding-agent/internal/task"
)

// Watch is the checkpoint check, made before every model request: what
// changed on the task meanwhile (new comments to hand to the model), and
// whether the run must end here (paused, stopped, or the process shutting
// down).
type Watch interface {
	// At returns what to do at checkpoint at. mark is the id of the newest
	// comment the conversation already holds.
	At(ctx context.Context, at Step, mark int64) (Steer, error)
	// Close ends the watch of one run (it logs its statistics).
	Close()
}

// Step says where a run is at a checkpoint.
type Step struct {
	Phase  string // the policy's phase; "" in the plain loop
	Turn   int    // the model request about to be made, from 1
	Action string // the action in progress (planning mode)
}

// Steer is what a checkpoint found.
type Steer struct {
	// Message hands new comments to the model ("" when there are none).
	Message string
	// Mark is the newest comment id seen, including comments not handed
	// over (the bot's, outsiders'); it is saved with the conversation.
	Mark int64
	// Applied are the comments Message carries.
	Applied []Applied
	// Ignored counts the comments this check found from people not
	// allowed to steer the task (never shown to the model).
	Ignored int
	// End ends the run at this checkpoint, for Reason: Paused, Stopped or
	// Interrupted. "" carries on.
	End    End
	Reason string
}

// Applied is a comment handed to the model.
type Applied struct {
	ID     int64
	Author string
}

// MarkOf is the newest comment id among comments: where a new run's
// conversation starts.
func MarkOf(comments []task.Comment) int64 {
	var m int64
	for _, c := range comments {
		m = max(m, c.ID)
	}
	return m
}
