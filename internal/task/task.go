// Package task is the domain vocabulary shared by every other package: what a
// task is, where it lives, and the states it moves through. It imports nothing
// of ours.
package task

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Forge names the system a task lives on.
const (
	GitHub = "github"
	GitLab = "gitlab"
	Gitea  = "gitea" // Gitea and Forgejo
)

// ForgeFacts are what the daemon knows of a forge's tasks, wherever it
// writes or reads them: one entry per forge (Forges), so that nothing
// else asks which forge a task is on.
type ForgeFacts struct {
	// Change is what the forge calls a change: "pull request".
	Change string
	// ChangeKind is the Kind of a change task there.
	ChangeKind Kind
	// Nested: a repository may sit in nested groups (group/sub/project);
	// otherwise it is owner/name.
	Nested bool
	// RepoForm is how a repository is written, for messages.
	RepoForm string
	// MaxComment is the longest comment the forge takes, in characters.
	MaxComment int
}

// Forges are the forges' facts, by name.
var Forges = map[string]ForgeFacts{
	GitHub: {Change: "pull request", ChangeKind: PullRequest, RepoForm: "owner/name", MaxComment: 65536},
	GitLab: {Change: "merge request", ChangeKind: MergeRequest, Nested: true, RepoForm: "group/project", MaxComment: 1000000},
	Gitea:  {Change: "pull request", ChangeKind: PullRequest, RepoForm: "owner/name", MaxComment: 65536},
}

// Facts are the facts of r's forge (zero for a forge not in Forges).
func (r Ref) Facts() ForgeFacts { return Forges[r.Forge] }

// Kind is the kind of item a task is.
type Kind string

const (
	Issue        Kind = "issue"
	PullRequest  Kind = "pull_request"
	MergeRequest Kind = "merge_request"
)

// Ref identifies a task across forges: github:acme/app#12 is an issue,
// github:acme/app!13 a pull request, gitlab:group/app!7 a merge request.
type Ref struct {
	Forge  string // a key of Forges: GitHub, GitLab or Gitea
	Repo   string // "owner/name" on GitHub, the full project path on GitLab
	Kind   Kind
	Number int // issue/PR number on GitHub, iid on GitLab
}

// String renders the ref in the form ParseRef reads.
func (r Ref) String() string {
	sep := "#"
	if r.Kind == PullRequest || r.Kind == MergeRequest {
		sep = "!"
	}
	return r.Forge + ":" + r.Repo + sep + strconv.Itoa(r.Number)
}

// Mention is how the forge itself writes a reference to the task in text
// of the same repository: "#12" for an issue or a GitHub pull request
// (which shares the issues' numbers), "!7" for a GitLab merge request. The
// "!" of String is the ref's own spelling, never GitHub's.
func (r Ref) Mention() string {
	if r.Kind == MergeRequest {
		return "!" + strconv.Itoa(r.Number)
	}
	return "#" + strconv.Itoa(r.Number)
}

// FullMention is Mention qualified by the repository, as the forge writes a
// reference from anywhere: "acme/app#12", "group/app!7".
func (r Ref) FullMention() string { return r.Repo + r.Mention() }

// ParseRef reads "github:owner/repo#12" (issue), "github:owner/repo!12" (pull
// request), "gitlab:group/project#3" (issue) or "gitlab:group/project!7"
// (merge request).
func ParseRef(s string) (Ref, error) {
	forge, rest, ok := strings.Cut(s, ":")
	facts, known := Forges[forge]
	if !ok || !known {
		return Ref{}, fmt.Errorf("task ref %q: want github:owner/repo#N or gitlab:group/project!N", s)
	}
	i := strings.LastIndexAny(rest, "#!")
	if i <= 0 {
		return Ref{}, fmt.Errorf("task ref %q: missing #number or !number", s)
	}
	digits := rest[i+1:]
	n, err := strconv.Atoi(digits)
	if err != nil || n <= 0 || digits[0] < '1' || digits[0] > '9' {
		// The first-digit check refuses "+5" and "05": a ref has one spelling.
		return Ref{}, fmt.Errorf("task ref %q: %q is not a positive number", s, digits)
	}
	repo := rest[:i]
	if !validRepo(facts, repo) {
		return Ref{}, fmt.Errorf("task ref %q: repository %q must be %s", s, repo, facts.RepoForm)
	}
	kind := Issue
	if rest[i] == '!' {
		kind = facts.ChangeKind
	}
	return Ref{Forge: forge, Repo: repo, Kind: kind, Number: n}, nil
}

// validRepo wants non-empty path segments without #, ! or spaces: exactly two
// (owner/name), or two or more where repositories nest (group/subgroup/project).
func validRepo(f ForgeFacts, repo string) bool {
	segs := strings.Split(repo, "/")
	if len(segs) < 2 || (!f.Nested && len(segs) != 2) {
		return false
	}
	for _, seg := range segs {
		if seg == "" || strings.ContainsAny(seg, "#! \t\r\n") {
			return false
		}
	}
	return true
}

// Task is an issue, pull request or merge request as the agent sees it.
type Task struct {
	Ref        Ref
	Title      string
	Body       string
	Author     string
	URL        string
	State      string // "open" or "closed"
	Labels     []string
	Assignees  []string
	HeadBranch string // pull/merge requests only
	BaseBranch string // pull/merge requests only
	// Fork is true for a pull/merge request whose head branch is in
	// another repository (a fork, or one since deleted): pushing to
	// HeadBranch of Ref.Repo would not update it. Set by the forges' Get
	// (and by GitLab's discovery); GitHub's discovery leaves it false.
	Fork      bool
	CreatedAt time.Time
	UpdatedAt time.Time
	// CommentCount is the number of comments people and bots wrote
	// (GitHub's comments, GitLab's user_notes_count): when it and
	// UpdatedAt are unchanged, no comment was added.
	CommentCount int
}

// HasLabel reports whether the task carries label (exact match).
func (t Task) HasLabel(label string) bool {
	for _, l := range t.Labels {
		if l == label {
			return true
		}
	}
	return false
}

// Comment is one comment (GitHub) or note (GitLab) on a task.
type Comment struct {
	ID        int64
	Author    string
	Body      string
	CreatedAt time.Time
	System    bool // GitLab system notes ("added label ...")
}

// Status is where a task stands in the store.
type Status string

const (
	Queued   Status = "queued"
	Running  Status = "running"
	Paused   Status = "paused"
	Stopped  Status = "stopped"
	Awaiting Status = "awaiting"
	Done     Status = "done"
	Failed   Status = "failed"
)

// Statuses are every status a task may be in, in the order of its life.
var Statuses = []Status{Queued, Running, Paused, Awaiting, Done, Failed, Stopped}

// Final reports whether nothing more will happen to a task in this status
// without a person acting on it.
func (s Status) Final() bool {
	return s == Done || s == Failed || s == Stopped
}

// Role is what one of the task's labels says of it. Roles is the one list
// of them: the configuration's keys and defaults, doctor's colours and
// the worker's label columns are read from it.
type Role int

const (
	RoleBot        Role = iota + 1 // asks for the agent
	RoleProcessing                 // the agent is working
	RoleDone                       // finished
	RoleFailed                     // failed
	RolePaused                     // paused at a checkpoint
	RoleStopped                    // stopped
	RoleAwaiting                   // finished, awaiting a reply
)

// RoleInfo is a role's facts.
type RoleInfo struct {
	Role Role
	// Key is the role's key in a forge's configuration section.
	Key string
	// Default is the label's name unless configured.
	Default string
	// Color is the colour `doctor --fix` gives the label it creates.
	Color string
}

// Roles are the labels' roles, in the order the configuration lists them.
var Roles = []RoleInfo{
	{RoleBot, "bot_label", "coding agent", "#1d76db"},
	{RoleProcessing, "processing_label", "coding agent processing", "#fbca04"},
	{RoleDone, "done_label", "coding agent done", "#0e8a16"},
	{RoleFailed, "failed_label", "coding agent failed", "#d93f0b"},
	{RolePaused, "paused_label", "coding agent paused", "#c5def5"},
	{RoleStopped, "stopped_label", "coding agent stopped", "#b60205"},
	{RoleAwaiting, "awaiting_response_label", "coding agent awaiting response", "#5319e7"},
}

// Of is the label of role r ("" for none, or a role not in Roles).
func (l Labels) Of(r Role) string {
	if p := l.field(r); p != nil {
		return *p
	}
	return ""
}

// Set makes name the label of role r.
func (l *Labels) Set(r Role, name string) {
	if p := l.field(r); p != nil {
		*p = name
	}
}

func (l *Labels) field(r Role) *string {
	switch r {
	case RoleBot:
		return &l.Bot
	case RoleProcessing:
		return &l.Processing
	case RoleDone:
		return &l.Done
	case RoleFailed:
		return &l.Failed
	case RolePaused:
		return &l.Paused
	case RoleStopped:
		return &l.Stopped
	case RoleAwaiting:
		return &l.Awaiting
	}
	return nil
}

// Asks reports whether a change of a task's labels asks for the agent:
// the bot label added, or the paused label removed (a resume). The
// webhooks read every label change with it.
func (l Labels) Asks(added, removed []string) bool {
	return l.Bot != "" && slices.Contains(added, l.Bot) || l.Paused != "" && slices.Contains(removed, l.Paused)
}

// Halting is the role of the label among labels that halts a run at its
// next checkpoint: RoleStopped, else RolePaused; 0 for none. The watcher
// of a run reads the task's labels with it.
func (l Labels) Halting(labels []string) Role {
	for _, r := range []Role{RoleStopped, RolePaused} {
		if name := l.Of(r); name != "" && slices.Contains(labels, name) {
			return r
		}
	}
	return 0
}

// Labels are the labels that move a task through its states on the forge,
// a field per role (Of, Set).
type Labels struct {
	Bot        string // asks for the agent
	Processing string // the agent is working
	Done       string // finished
	Failed     string // failed
	Paused     string // pauses the task at its next checkpoint; "" disables
	Stopped    string // stops it there; "" disables
	Awaiting   string // finished, awaiting a reply (follow-up conversation)
}
