// Package forge is the task-source port: the small role interfaces the core
// uses to find tasks on GitHub or GitLab, read them, talk on them and move
// their labels. Adapters live in forge/github and forge/gitlab.
package forge

import (
	"context"
	"errors"

	"github.com/coding-agent/coding-agent/internal/task"
)

// ErrNotFound is returned (wrapped) when the forge answers 404 for a task,
// comment or project.
var ErrNotFound = errors.New("not found")

// Discoverer finds open tasks carrying a label, inside the configured scope
// (repositories, owner, projects, group). The list is complete: every page
// is read.
type Discoverer interface {
	Discover(ctx context.Context, label string) ([]task.Task, error)
}

// Reader reads one task and its comments in chronological order.
type Reader interface {
	Get(ctx context.Context, ref task.Ref) (task.Task, error)
	Comments(ctx context.Context, ref task.Ref) ([]task.Comment, error)
}

// Commenter posts a comment as the token's user. A comment is posted at most
// once: after an ambiguous failure the adapter checks before posting again.
type Commenter interface {
	PostComment(ctx context.Context, ref task.Ref, body string) (task.Comment, error)
}

// Editor replaces the body of a comment the token's user posted, in place.
// Replacing a body with the same text is harmless, so an edit may be
// retried. A comment that no longer exists gives ErrNotFound.
type Editor interface {
	EditComment(ctx context.Context, ref task.Ref, id int64, body string) error
}

// Labeler adds and removes one label at a time, never replacing the whole
// set, so labels other people set meanwhile survive. Adding a label that is
// present and removing one that is absent are not errors.
type Labeler interface {
	AddLabel(ctx context.Context, ref task.Ref, label string) error
	RemoveLabel(ctx context.Context, ref task.Ref, label string) error
}

// Identity tells who the token belongs to.
type Identity interface {
	BotUser(ctx context.Context) (string, error)
}

// Forge is everything the core needs of a task source.
type Forge interface {
	Discoverer
	Reader
	Commenter
	Editor
	Labeler
	Identity
}
