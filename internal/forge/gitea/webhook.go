package gitea

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"net/http"
	"slices"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Kind is Gitea (and Forgejo), as the registry of forges knows it.
var Kind = forge.Kind{Name: task.Gitea, Open: open, GitUser: "oauth2",
	BotAdvice: "a dedicated account (Gitea's API marks no user as a bot)", Hooks: Hooks{}}

// Hooks reads Gitea's and Forgejo's webhook deliveries: X-Gitea-Event (or
// X-Forgejo-Event) names the event, X-Gitea-Delivery (X-Forgejo-Delivery)
// is its id, X-Gitea-Signature (X-Forgejo-Signature) is the hex
// HMAC-SHA256 of the body under the secret.
type Hooks struct{}

var _ forge.Hooks = Hooks{}

// header is Gitea's header name, or Forgejo's when only that is set.
func header(r *http.Request, name string) string {
	if v := r.Header.Get("X-Gitea-" + name); v != "" {
		return v
	}
	return r.Header.Get("X-Forgejo-" + name)
}

// Admit wants the signature well formed: the body is verified against it
// as it is read.
func (Hooks) Admit(r *http.Request, secret string) (forge.Proof, bool) {
	want, err := hex.DecodeString(header(r, "Signature"))
	if err != nil || len(want) != sha256.Size {
		return nil, false
	}
	return &hookProof{mac: hmac.New(sha256.New, []byte(secret)), want: want}, true
}

type hookProof struct {
	mac  hash.Hash
	want []byte
}

func (p *hookProof) Write(b []byte) (int, error) { return p.mac.Write(b) }

func (p *hookProof) Valid() bool { return hmac.Equal(p.want, p.mac.Sum(nil)) }

// Reads: issues and pull requests (label changes among them) and their
// comments.
func (Hooks) Reads(r *http.Request) (string, bool) {
	switch kind := header(r, "Event"); kind {
	case "issues", "pull_request", "issue_comment":
		return "", true
	default:
		return fmt.Sprintf("event %q is not read", kind), false
	}
}

// IDs is the delivery id.
func (Hooks) IDs(r *http.Request) []string { return []string{header(r, "Delivery")} }

type hookLabel struct {
	Name string `json:"name"`
}

type hookItem struct {
	Number      int             `json:"number"`
	PullRequest json.RawMessage `json:"pull_request"` // on an issue: present when it is a pull request
	Labels      []hookLabel     `json:"labels"`
}

// hookPayload is the part of an issues, pull_request or issue_comment
// payload the listener reads.
type hookPayload struct {
	Action  string `json:"action"`
	Comment *struct {
		User struct {
			Login string `json:"login"`
		} `json:"user"`
	} `json:"comment"`
	IsPull      bool      `json:"is_pull"`
	Issue       *hookItem `json:"issue"`
	PullRequest *hookItem `json:"pull_request"`
	Repository  *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
}

// Read reads an issues, pull_request or issue_comment delivery. Gitea's
// label events (label_updated, label_cleared) do not say which label
// changed: one wakes the producer unless the item keeps the paused label
// without the bot label (then it neither asks nor resumes).
func (Hooks) Read(r *http.Request, body []byte, labels task.Labels) (forge.Event, error) {
	kind := header(r, "Event")
	var p hookPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return forge.Event{}, fmt.Errorf("reading the %s payload: %w", kind, err)
	}
	item := p.Issue
	if kind == "pull_request" {
		item = p.PullRequest
	}
	if item == nil || p.Repository == nil || p.Repository.FullName == "" || item.Number <= 0 {
		return forge.Event{}, fmt.Errorf("the %s payload names no repository or no number", kind)
	}
	ref := task.Ref{Forge: task.Gitea, Repo: p.Repository.FullName, Kind: task.Issue, Number: item.Number}
	if kind == "pull_request" || p.IsPull || len(item.PullRequest) > 0 && string(item.PullRequest) != "null" {
		ref.Kind = task.PullRequest
	}
	if kind == "issue_comment" {
		if p.Action != "created" {
			return forge.Ignored("comment " + p.Action), nil
		}
		if p.Comment == nil {
			return forge.Event{}, fmt.Errorf("the %s payload has no comment", kind)
		}
		return forge.Event{What: forge.Commented, Ref: ref, Author: p.Comment.User.Login}, nil
	}
	has := func(name string) bool {
		return name != "" && slices.ContainsFunc(item.Labels, func(l hookLabel) bool { return l.Name == name })
	}
	switch {
	case p.Action == "label_updated" || p.Action == "label_cleared":
		if has(labels.Bot) || !has(labels.Paused) {
			return forge.Event{What: forge.Labelled, Ref: ref}, nil
		}
	case forge.Asks(labels, p.Action, "", has(labels.Bot)):
		return forge.Event{What: forge.Labelled, Ref: ref}, nil
	}
	return forge.Ignored(fmt.Sprintf("%s %s does not ask for the agent", kind, p.Action)), nil
}

func open(a forge.Access) (forge.Adapter, error) {
	c, err := New(a)
	if err != nil {
		return nil, err
	}
	return c, nil
}
