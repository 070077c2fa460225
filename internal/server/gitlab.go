package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/coding-agent/coding-agent/internal/task"
)

// gitlab reads GitLab's deliveries: X-Gitlab-Event names the hook,
// X-Gitlab-Token carries the secret token as configured on the hook,
// X-Gitlab-Event-UUID is the event's id (the same for every hook the event
// fires) and Idempotency-Key the delivery's (kept by a retry).
type gitlab struct {
	token  string
	labels task.Labels
}

func (gitlab) name() string { return task.GitLab }

// admit compares X-Gitlab-Token with the token before the body is read;
// it compares digests, so that neither the token's bytes nor its length
// shows in the time taken. The body has nothing more to verify.
func (g gitlab) admit(r *http.Request) (proof, bool) {
	got := r.Header.Get("X-Gitlab-Token")
	if got == "" {
		return nil, false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(g.token))
	return nil, subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// reads: the Issue, Merge Request and Note Hooks; the body of another is
// not read at all.
func (gitlab) reads(r *http.Request) (string, bool) {
	switch hook := r.Header.Get("X-Gitlab-Event"); hook {
	case "Issue Hook", "Confidential Issue Hook", "Merge Request Hook", "Note Hook", "Confidential Note Hook":
		return "", true
	default:
		return fmt.Sprintf("event %q is not read", hook), false
	}
}

func (gitlab) ids(r *http.Request) []string {
	return []string{r.Header.Get("Idempotency-Key"), r.Header.Get("X-Gitlab-Event-UUID")}
}

type glLabel struct {
	Title string `json:"title"`
}

type glIID struct {
	IID int `json:"iid"`
}

// glPayload is the part of an Issue, Merge Request or Note Hook payload the
// listener reads.
type glPayload struct {
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
	Labels  []glLabel `json:"labels"`
	Changes struct {
		Labels *struct {
			Previous []glLabel `json:"previous"`
			Current  []glLabel `json:"current"`
		} `json:"labels"`
	} `json:"changes"`
	Issue        *glIID `json:"issue"`
	MergeRequest *glIID `json:"merge_request"`
}

func (g gitlab) read(r *http.Request, body []byte) (event, error) {
	hook := r.Header.Get("X-Gitlab-Event")
	var p glPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return event{}, fmt.Errorf("reading the %s payload: %w", hook, err)
	}
	if p.Project == nil || p.Project.PathWithNamespace == "" {
		return event{}, fmt.Errorf("the %s payload names no project", hook)
	}
	ref := task.Ref{Forge: task.GitLab, Repo: p.Project.PathWithNamespace}
	a := p.ObjectAttributes
	if p.ObjectKind == "note" {
		switch {
		case a.Action != "" && a.Action != "create":
			return event{why: "note " + a.Action}, nil
		case a.NoteableType == "Issue" && p.Issue != nil:
			ref.Kind, ref.Number = task.Issue, p.Issue.IID
		case a.NoteableType == "MergeRequest" && p.MergeRequest != nil:
			ref.Kind, ref.Number = task.MergeRequest, p.MergeRequest.IID
		default:
			return event{why: fmt.Sprintf("a note on a %s", a.NoteableType)}, nil
		}
		if ref.Number <= 0 {
			return event{}, fmt.Errorf("the %s payload names no iid", hook)
		}
		return event{what: commented, ref: ref, id: p.Project.ID, author: p.User.Username}, nil
	}
	switch p.ObjectKind {
	case "issue":
		ref.Kind = task.Issue
	case "merge_request":
		ref.Kind = task.MergeRequest
	default:
		return event{why: fmt.Sprintf("object_kind %q is not read", p.ObjectKind)}, nil
	}
	if ref.Number = a.IID; ref.Number <= 0 {
		return event{}, fmt.Errorf("the %s payload names no iid", hook)
	}
	has := func(ls []glLabel, name string) bool {
		return name != "" && slices.ContainsFunc(ls, func(l glLabel) bool { return l.Title == name })
	}
	ev := event{what: labelled, ref: ref, id: p.Project.ID}
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
		if g.labels.Asks(added, removed) {
			return ev, nil
		}
	}
	if asks(a.Action, "", has(p.Labels, g.labels.Bot), g.labels) {
		return ev, nil
	}
	return event{why: fmt.Sprintf("%s %s does not ask for the agent", p.ObjectKind, a.Action)}, nil
}
