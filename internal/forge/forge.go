// Package forge is the task-source port: the small role interfaces the core
// uses to find tasks on a forge, read them, talk on them and move their
// labels, and what an adapter says of itself (Kind, Hooks). Adapters live
// in forge/github, forge/gitlab and forge/gitea.
package forge

import (
	"context"
	"errors"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
)

// ErrNotFound is returned (wrapped) when the forge answers 404 for a task,
// comment or project.
var ErrNotFound = errors.New("not found")

// ErrLabelAbsent is returned (wrapped) by Labeler.TakeLabel when the label
// was not on the task: another caller took it first, or nobody put it there.
var ErrLabelAbsent = errors.New("label is not on the task")

// ErrAuth is returned (wrapped) when the forge refuses the credentials the
// process acts with, and renewing them did not help: a GitHub App whose
// installation was removed or whose key is not the app's. Until someone
// fixes them nothing on the forge can be read or changed, so the worker
// leaves its tasks for the next run rather than failing them.
var ErrAuth = errors.New("the forge refuses the credentials")

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
	// CommentsSince returns the comments created or updated at or after
	// since, in chronological order (GitHub's since parameter; GitLab has
	// none, so its notes are filtered after reading).
	CommentsSince(ctx context.Context, ref task.Ref, since time.Time) ([]task.Comment, error)
}

// Permissions tells who may steer a task besides its author: people with
// write access to its repository or project.
type Permissions interface {
	// CanWrite reports whether user may write to the task's repository:
	// GitHub collaborator permission write, maintain or admin; GitLab
	// member access level Developer (30) or higher, inherited membership
	// included. A user who is not a member is false, not an error.
	CanWrite(ctx context.Context, ref task.Ref, user string) (bool, error)
}

// LabelHistory tells who asked for a task: who put a label on it.
type LabelHistory interface {
	// LabeledBy returns the user who most recently added label to the
	// task (GitHub: the labeled events; GitLab: its resource
	// label events), or "" when the forge has no record of it.
	LabeledBy(ctx context.Context, ref task.Ref, label string) (string, error)
}

// Reactor acknowledges a comment with an emoji reaction (a GitLab award
// emoji). Reacting twice with the same emoji is not an error.
type Reactor interface {
	React(ctx context.Context, ref task.Ref, commentID int64, emoji string) error
}

// ReactionSeen is the reaction that says a comment was read and applied.
const ReactionSeen = "eyes"

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

// Deleter deletes a comment the token's user posted. Of callers racing to
// delete one comment, one gets nil; the others, and a caller finding it
// gone, get ErrNotFound.
type Deleter interface {
	DeleteComment(ctx context.Context, ref task.Ref, id int64) error
}

// Labeler adds and removes one label at a time, never replacing the whole
// set, so labels other people set meanwhile survive. Adding a label that is
// present and removing one that is absent are not errors.
type Labeler interface {
	AddLabel(ctx context.Context, ref task.Ref, label string) error
	RemoveLabel(ctx context.Context, ref task.Ref, label string) error
	// TakeLabel removes label as a claim, the forge arbitrating: of
	// callers racing to take one label (on any number of hosts, with the
	// same token), exactly one gets nil; every other gets ErrLabelAbsent,
	// as does a caller finding the label already gone. An error of any
	// other kind says nothing about who took it: the caller must not act
	// as the taker. A retry after an ambiguous failure (a 502 after the
	// forge acted) finds the label gone and says ErrLabelAbsent to the
	// caller that took it: that errs on the safe side (nobody works on
	// the task until it is put up again).
	TakeLabel(ctx context.Context, ref task.Ref, label string) error
}

// Identity tells who the token belongs to.
type Identity interface {
	BotUser(ctx context.Context) (string, error)
}

// Account is the forge user the agent acts as.
type Account struct {
	Login string
	// Bot: a bot user (a GitHub App's, a GitLab project or group access
	// token's), not a person's or a machine user's account, whose owner
	// might also write comments as it.
	Bot bool
}

// Setup is what `coding-agent doctor` asks of a forge about a repository
// (GitHub "owner/name", GitLab project path or id) before any task.
type Setup interface {
	Account(ctx context.Context) (Account, error)
	// CanPush reports whether the agent may push to repo and open changes
	// there (write access: GitHub push, GitLab Developer or higher).
	CanPush(ctx context.Context, repo string) (bool, error)
	// RepoLabels lists the labels repo defines.
	RepoLabels(ctx context.Context, repo string) ([]string, error)
	// CreateLabel defines a label in repo; color is "#rrggbb".
	CreateLabel(ctx context.Context, repo, name, color string) error
}

// Repo is how to reach a task's repository with git.
type Repo struct {
	// CloneURL is the repository's HTTPS URL (GitHub's clone_url,
	// GitLab's http_url_to_repo), without credentials.
	CloneURL      string
	DefaultBranch string
}

// Change is a pull request (GitHub) or merge request (GitLab) that carries
// work.
type Change struct {
	Number int    // the pull request's number, the merge request's iid
	URL    string // its web page
	Draft  bool
	Head   string // the branch it proposes (in the task's repository)
	Base   string // the branch it proposes to merge into
	Body   string // its description, as it is now
}

// NewChange is a change to open: Head into Base of the task's repository.
type NewChange struct {
	Head, Base, Title, Body string
	Draft                   bool
}

// Delivery opens and finds the pull or merge request for a branch of the
// task's repository. The changes it deals in have their head in that very
// repository, never in a fork.
type Delivery interface {
	Repository(ctx context.Context, ref task.Ref) (Repo, error)
	// FindChange returns the open change whose head is branch; false
	// when there is none.
	FindChange(ctx context.Context, ref task.Ref, branch string) (Change, bool, error)
	// OpenChange opens a change, once: after an ambiguous failure (a 5xx,
	// a timeout) it looks for the change before asking again, and when
	// the forge refuses it because an open change for Head into Base
	// already exists, that one is returned (its title, body and draft
	// state as they are, not as c says).
	OpenChange(ctx context.Context, ref task.Ref, c NewChange) (Change, error)
	// EditChange replaces the description of the task's repository's
	// change number (a pull request's number, a merge request's iid);
	// its title, state and draft state stay. Replacing it with the same
	// text is harmless, so an edit may be retried.
	EditChange(ctx context.Context, ref task.Ref, number int, body string) error
}

// Forge is everything the core needs of a task source.
type Forge interface {
	Delivery
	Discoverer
	Reader
	Commenter
	Editor
	Deleter
	Labeler
	Identity
	Permissions
	LabelHistory
	Reactor
}
