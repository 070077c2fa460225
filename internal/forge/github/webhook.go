package github

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"net/http"
	"slices"
	"strings"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Hooks reads GitHub's webhook deliveries: X-GitHub-Event names the
// event, X-GitHub-Delivery is its id (kept by a redelivery),
// X-Hub-Signature-256 is "sha256=" and the hex HMAC-SHA256 of the body
// under the secret.
type Hooks struct{}

var _ forge.Hooks = Hooks{}

// Admit wants X-Hub-Signature-256 well formed: the body is verified
// against it as it is read.
func (Hooks) Admit(r *http.Request, secret string) (forge.Proof, bool) {
	sig, ok := strings.CutPrefix(r.Header.Get("X-Hub-Signature-256"), "sha256=")
	if !ok {
		return nil, false
	}
	want, err := hex.DecodeString(sig)
	if err != nil || len(want) != sha256.Size {
		return nil, false
	}
	return &hookProof{mac: hmac.New(sha256.New, []byte(secret)), want: want}, true
}

// hookProof is the HMAC-SHA256 of the body under the secret, as it is read,
// and the one the signature says.
type hookProof struct {
	mac  hash.Hash
	want []byte
}

func (p *hookProof) Write(b []byte) (int, error) { return p.mac.Write(b) }

func (p *hookProof) Valid() bool { return hmac.Equal(p.want, p.mac.Sum(nil)) }

// Reads: issues, pull requests and their comments; a ping is answered
// once its body is verified (GitHub shows the answer when a hook is set
// up, so a wrong secret shows there).
func (Hooks) Reads(r *http.Request) (string, bool) {
	switch kind := r.Header.Get("X-GitHub-Event"); kind {
	case "issues", "pull_request", "issue_comment":
		return "", true
	case "ping":
		return "ping", false
	default:
		return fmt.Sprintf("event %q is not read", kind), false
	}
}

// IDs is the delivery id.
func (Hooks) IDs(r *http.Request) []string { return []string{r.Header.Get("X-GitHub-Delivery")} }

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
	Label       *hookLabel `json:"label"`
	Issue       *hookItem  `json:"issue"`
	PullRequest *hookItem  `json:"pull_request"`
	Repository  *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
}

// Read reads an issues, pull_request or issue_comment delivery.
func (Hooks) Read(r *http.Request, body []byte, labels task.Labels) (forge.Event, error) {
	kind := r.Header.Get("X-GitHub-Event")
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
	ref := task.Ref{Forge: task.GitHub, Repo: p.Repository.FullName, Kind: task.Issue, Number: item.Number}
	if kind == "pull_request" || len(item.PullRequest) > 0 && string(item.PullRequest) != "null" {
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
	label := ""
	if p.Label != nil {
		label = p.Label.Name
	}
	has := slices.ContainsFunc(item.Labels, func(l hookLabel) bool { return l.Name == labels.Bot })
	if forge.Asks(labels, p.Action, label, has) {
		return forge.Event{What: forge.Labelled, Ref: ref}, nil
	}
	return forge.Ignored(fmt.Sprintf("%s %s does not ask for the agent", kind, p.Action)), nil
}

// Kind is GitHub, as the registry of forges knows it.
var Kind = forge.Kind{Name: task.GitHub, GitUser: "x-access-token", BotAdvice: "a dedicated account or a GitHub App (github.app)", Hooks: Hooks{}}
