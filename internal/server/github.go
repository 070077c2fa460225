package server

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

	"github.com/coding-agent/coding-agent/internal/task"
)

// github reads GitHub's deliveries: X-GitHub-Event names the event,
// X-GitHub-Delivery is its id (kept by a redelivery), X-Hub-Signature-256
// is "sha256=" and the hex HMAC-SHA256 of the body under the secret.
type github struct {
	secret []byte
	labels task.Labels
}

func (github) name() string { return task.GitHub }

// admit wants X-Hub-Signature-256 well formed: the body is verified
// against it as it is read.
func (g github) admit(r *http.Request) (proof, bool) {
	sig, ok := strings.CutPrefix(r.Header.Get("X-Hub-Signature-256"), "sha256=")
	if !ok {
		return nil, false
	}
	want, err := hex.DecodeString(sig)
	if err != nil || len(want) != sha256.Size {
		return nil, false
	}
	return &ghProof{mac: hmac.New(sha256.New, g.secret), want: want}, true
}

// ghProof is the HMAC-SHA256 of the body under the secret, as it is read,
// and the one the signature says.
type ghProof struct {
	mac  hash.Hash
	want []byte
}

func (p *ghProof) Write(b []byte) (int, error) { return p.mac.Write(b) }

func (p *ghProof) valid() bool { return hmac.Equal(p.want, p.mac.Sum(nil)) }

// reads: issues, pull requests and their comments; a ping is answered
// once its body is verified (GitHub shows the answer when a hook is set
// up, so a wrong secret shows there).
func (github) reads(r *http.Request) (string, bool) {
	switch kind := r.Header.Get("X-GitHub-Event"); kind {
	case "issues", "pull_request", "issue_comment":
		return "", true
	case "ping":
		return "ping", false
	default:
		return fmt.Sprintf("event %q is not read", kind), false
	}
}

func (github) ids(r *http.Request) []string { return []string{r.Header.Get("X-GitHub-Delivery")} }

type ghLabel struct {
	Name string `json:"name"`
}

type ghItem struct {
	Number      int             `json:"number"`
	PullRequest json.RawMessage `json:"pull_request"` // on an issue: present when it is a pull request
	Labels      []ghLabel       `json:"labels"`
}

// ghPayload is the part of an issues, pull_request or issue_comment
// payload the listener reads.
type ghPayload struct {
	Action  string `json:"action"`
	Comment *struct {
		User struct {
			Login string `json:"login"`
		} `json:"user"`
	} `json:"comment"`
	Label       *ghLabel `json:"label"`
	Issue       *ghItem  `json:"issue"`
	PullRequest *ghItem  `json:"pull_request"`
	Repository  *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
}

func (g github) read(r *http.Request, body []byte) (event, error) {
	kind := r.Header.Get("X-GitHub-Event")
	var p ghPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return event{}, fmt.Errorf("reading the %s payload: %w", kind, err)
	}
	item := p.Issue
	if kind == "pull_request" {
		item = p.PullRequest
	}
	if item == nil || p.Repository == nil || p.Repository.FullName == "" || item.Number <= 0 {
		return event{}, fmt.Errorf("the %s payload names no repository or no number", kind)
	}
	ref := task.Ref{Forge: task.GitHub, Repo: p.Repository.FullName, Kind: task.Issue, Number: item.Number}
	if kind == "pull_request" || len(item.PullRequest) > 0 && string(item.PullRequest) != "null" {
		ref.Kind = task.PullRequest
	}
	if kind == "issue_comment" {
		if p.Action != "created" {
			return event{why: "comment " + p.Action}, nil
		}
		if p.Comment == nil {
			return event{}, fmt.Errorf("the %s payload has no comment", kind)
		}
		return event{what: commented, ref: ref, author: p.Comment.User.Login}, nil
	}
	label := ""
	if p.Label != nil {
		label = p.Label.Name
	}
	has := slices.ContainsFunc(item.Labels, func(l ghLabel) bool { return l.Name == g.labels.Bot })
	if asks(p.Action, label, has, g.labels) {
		return event{what: labelled, ref: ref}, nil
	}
	return event{why: fmt.Sprintf("%s %s does not ask for the agent", kind, p.Action)}, nil
}

// asks reports whether a change of an issue or pull/merge request may ask
// for the agent: a label change that asks (task.Labels.Asks), or the item
// opened (or reopened) with the bot label (has).
func asks(action, label string, has bool, l task.Labels) bool {
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
