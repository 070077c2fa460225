package gitlab

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Hooks reads GitLab's webhook deliveries: X-Gitlab-Event names the
// hook, X-Gitlab-Token carries the secret token as configured on the hook,
// X-Gitlab-Event-UUID is the event's id (the same for every hook the event
// fires) and Idempotency-Key the delivery's (kept by a retry).
type Hooks struct{}

var _ forge.Hooks = Hooks{}

// Admit compares X-Gitlab-Token with the token before the body is read;
// it compares digests, so that neither the token's bytes nor its length
// shows in the time taken. The body has nothing more to verify.
func (Hooks) Admit(r *http.Request, secret string) (forge.Proof, bool) {
	got := r.Header.Get("X-Gitlab-Token")
	if got == "" {
		return nil, false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(secret))
	return nil, subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// Reads: the Issue, Merge Request and Note Hooks; the body of another is
// not read at all.
func (Hooks) Reads(r *http.Request) (string, bool) {
	switch hook := r.Header.Get("X-Gitlab-Event"); hook {
	case "Issue Hook", "Confidential Issue Hook", "Merge Request Hook", "Note Hook", "Confidential Note Hook":
		return "", true
	default:
		return fmt.Sprintf("event %q is not read", hook), false
	}
}

// IDs are the delivery's and the event's ids.
func (Hooks) IDs(r *http.Request) []string {
	return []string{r.Header.Get("Idempotency-Key"), r.Header.Get("X-Gitlab-Event-UUID")}
}

type hookLabel struct {
	Title string `json:"title"`
}

type hookIID struct {
	IID int `json:"iid"`
}

// hookPayload is the part of an Issue, Merge Request or Note Hook payload the
// listener reads.
type hookPayload struct {
	ObjectKind string `json:"object_kind"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	Project *struct {
		ID                int64  `json:"id"`
		PathWithNamespace string `json:"path_with_namespace"`
	} `json:"project"`
	ObjectAttributes struct {
		IID          int    `json:"iid"`
		Action       string `json:"action"`
		NoteableType string `json:"noteable_type"`
	} `json:"object_attributes"`
	Labels  []hookLabel `json:"labels"`
	Changes struct {
		Labels *struct {
			Previous []hookLabel `json:"previous"`
			Current  []hookLabel `json:"current"`
		} `json:"labels"`
	} `json:"changes"`
	Issue        *hookIID `json:"issue"`
	MergeRequest *hookIID `json:"merge_request"`
}

// Read reads an Issue, Merge Request or Note Hook delivery.
func (Hooks) Read(r *http.Request, body []byte, labels task.Labels) (forge.Event, error) {
	hook := r.Header.Get("X-Gitlab-Event")
	var p hookPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return forge.Event{}, fmt.Errorf("reading the %s payload: %w", hook, err)
	}
	if p.Project == nil || p.Project.PathWithNamespace == "" {
		return forge.Event{}, fmt.Errorf("the %s payload names no project", hook)
	}
	ref := task.Ref{Forge: task.GitLab, Repo: p.Project.PathWithNamespace}
	a := p.ObjectAttributes
	if p.ObjectKind == "note" {
		switch {
		case a.Action != "" && a.Action != "create":
			return forge.Ignored("note " + a.Action), nil
		case a.NoteableType == "Issue" && p.Issue != nil:
			ref.Kind, ref.Number = task.Issue, p.Issue.IID
		case a.NoteableType == "MergeRequest" && p.MergeRequest != nil:
			ref.Kind, ref.Number = task.MergeRequest, p.MergeRequest.IID
		default:
			return forge.Ignored(fmt.Sprintf("a note on a %s", a.NoteableType)), nil
		}
		if ref.Number <= 0 {
			return forge.Event{}, fmt.Errorf("the %s payload names no iid", hook)
		}
		return forge.Event{What: forge.Commented, Ref: ref, ProjectID: p.Project.ID, Author: p.User.Username}, nil
	}
	switch p.ObjectKind {
	case "issue":
		ref.Kind = task.Issue
	case "merge_request":
		ref.Kind = task.MergeRequest
	default:
		return forge.Ignored(fmt.Sprintf("object_kind %q is not read", p.ObjectKind)), nil
	}
	if ref.Number = a.IID; ref.Number <= 0 {
		return forge.Event{}, fmt.Errorf("the %s payload names no iid", hook)
	}
	has := func(ls []hookLabel, name string) bool {
		return name != "" && slices.ContainsFunc(ls, func(l hookLabel) bool { return l.Title == name })
	}
	ev := forge.Event{What: forge.Labelled, Ref: ref, ProjectID: p.Project.ID}
	if c := p.Changes.Labels; c != nil {
		var added, removed []string
		for _, l := range c.Current {
			if !has(c.Previous, l.Title) {
				added = append(added, l.Title)
			}
		}
		for _, l := range c.Previous {
			if !has(c.Current, l.Title) {
				removed = append(removed, l.Title)
			}
		}
		if labels.Asks(added, removed) {
			return ev, nil
		}
	}
	if forge.Asks(labels, a.Action, "", has(p.Labels, labels.Bot)) {
		return ev, nil
	}
	return forge.Ignored(fmt.Sprintf("%s %s does not ask for the agent", p.ObjectKind, a.Action)), nil
}

// Kind is GitLab, as the registry of forges knows it.
var Kind = forge.Kind{Name: task.GitLab, Open: open, GitUser: "oauth2", BotAdvice: "a dedicated account or a project access token (its user is a bot)", Hooks: Hooks{}}

func open(a forge.Access) (forge.Adapter, error) {
	c, err := New(Options{APIURL: a.APIURL, Token: a.Token, Projects: a.Repositories, Group: a.Owner,
		HTTPClient: a.HTTPClient, Logger: a.Logger, Sleep: a.Sleep})
	if err != nil {
		return nil, err
	}
	return c, nil
}
