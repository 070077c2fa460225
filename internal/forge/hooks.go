package forge

import (
	"io"
	"net/http"

	"github.com/coding-agent/coding-agent/internal/task"
)

// Hooks verifies and reads one forge's webhook deliveries: the listener
// (server) serves POST /webhooks/{forge} with it and does the rest (the
// limits on what a delivery may make it read, duplicates, which
// repositories are watched). Each adapter has its own (its Kind's Hooks).
type Hooks interface {
	// Admit checks what the headers prove under the configured secret,
	// before any of the body is read: false refuses the delivery. The
	// Proof it returns verifies the body as the body is written through
	// it; nil when the headers proved the delivery (GitLab's token).
	Admit(r *http.Request, secret string) (Proof, bool)
	// Reads reports whether the listener reads the delivery's event; why
	// not, when it does not. Only the body of an event read is kept.
	Reads(r *http.Request) (why string, ok bool)
	// IDs are the delivery's ids: it is a duplicate when one was seen.
	IDs(r *http.Request) []string
	// Read turns the delivery into an event, reading label changes with
	// labels; an error is a malformed body.
	Read(r *http.Request, body []byte, labels task.Labels) (Event, error)
}

// Proof verifies a body written through it (an HMAC of the body).
type Proof interface {
	io.Writer
	Valid() bool
}

// Wake is what a delivery asks of the process.
type Wake int

const (
	// Nothing: the delivery is ignored (Event.Why says why).
	Nothing Wake = iota
	// Labelled: the task may ask for the agent now (Labels.Asks).
	Labelled
	// Commented: someone commented on the task.
	Commented
)

// Event is a delivery as the listener acts on it.
type Event struct {
	What Wake
	Ref  task.Ref
	// ProjectID is the repository's numeric id where the forge names
	// repositories by id too (GitLab's project id); 0 otherwise.
	ProjectID int64
	Author    string // a comment's author
	Why       string // why it is ignored
}

// Ignored is an event that asks nothing, for why.
func Ignored(why string) Event { return Event{Why: why} }

// Asks reports whether a change of an issue or pull/merge request, as a
// webhook names it, may ask for the agent: a label added or removed that
// asks (task.Labels.Asks), or the item opened or reopened carrying the
// bot label (has). The actions are the forges' words: GitHub's and
// Gitea's "labeled", "unlabeled", "opened", "reopened"; GitLab's "open"
// and "reopen".
func Asks(l task.Labels, action, label string, has bool) bool {
	switch action {
	case "labeled":
		return l.Asks([]string{label}, nil)
	case "unlabeled":
		return l.Asks(nil, []string{label})
	case "opened", "reopened", "open", "reopen":
		return has
	}
	return false
}
