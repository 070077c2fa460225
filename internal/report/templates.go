package report

import (
	"bytes"
	"embed"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{"code": CodeSpan}).ParseFS(templateFS, "templates/*.tmpl"))

// Failed is the comment posted when a task ends in failure.
// workspace is where the task's workspace is kept ("" when it is not);
// evidence is what the round ran (Evidence), "" to leave it out.
// page is the task's page (internal/ui), "" when none.
func (l Lang) Failed(reason, failedLabel, botLabel, workspace, evidence, page string) (string, error) {
	return l.notice("failed", map[string]any{"Reason": reason, "FailedLabel": failedLabel, "BotLabel": botLabel, "Workspace": workspace,
		"Evidence": evidence, "Page": page})
}

// Kept is the comment that says where a failed task's workspace is kept,
// when the run's own closing comment said why it failed.
func (l Lang) Kept(workspace string) (string, error) {
	return l.notice("kept", map[string]any{"Workspace": workspace})
}

// Interrupted is the comment posted when a shutdown stops a task at a
// checkpoint.
func (l Lang) Interrupted(turn int) (string, error) {
	return l.notice("interrupted", map[string]any{"Turn": turn})
}

// StoreFailed is the comment posted when a task stops because the state
// store cannot be written.
func (l Lang) StoreFailed(turn int, reason string) (string, error) {
	return l.notice("storefailed", map[string]any{"Turn": turn, "Reason": reason})
}

// StoreLost is the comment posted when a task stops because the state
// database was removed or replaced under the process (store.ErrLost):
// unlike StoreFailed, nothing recorded is kept to continue from.
func (l Lang) StoreLost(turn int, reason string) (string, error) {
	return l.notice("storelost", map[string]any{"Turn": turn, "Reason": reason})
}

// TakeOver is what the comment that a task was taken over says: which
// process held it (From: host, PID, instance) and until when (Until),
// whether an operator released it, and the host that continues (To).
type TakeOver struct {
	From, To, Until string
	Released        bool
}

// TakenOver is the comment posted when a process takes over a task whose
// holder stopped renewing its lease, or that an operator released.
func (l Lang) TakenOver(t TakeOver) (string, error) { return l.notice("takenover", t) }

// notice renders the worker's or the delivery's notice name in l.
func (l Lang) notice(name string, data any) (string, error) {
	return render("notice/"+string(l.norm())+"/"+name, data)
}

// kind is a pull or merge request's name ("pull request" or "merge
// request") in l.
func (l Lang) kind(k string) string {
	if l.norm() != Japanese {
		return k
	}
	if k == "merge request" {
		return "マージリクエスト"
	}
	return "プルリクエスト"
}

func render(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("rendering %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()), nil
}

// Paused is the comment posted when a task pauses at a checkpoint on host
// (named in a hidden line, for PausedOn).
func (l Lang) Paused(turn int, reason, pausedLabel, botLabel, host string) (string, error) {
	return l.notice("paused", map[string]any{"Turn": turn, "Reason": reason, "PausedLabel": pausedLabel, "BotLabel": botLabel,
		"Host": host})
}

var pausedMark = regexp.MustCompile(`(?m)^<!-- coding-agent paused: host=("(?:[^"\\]|\\.)*") -->$`)

// PausedOn returns the host a paused comment (Paused) names; false for any
// other comment.
func PausedOn(body string) (string, bool) {
	m := pausedMark.FindStringSubmatch(body)
	if m == nil {
		return "", false
	}
	host, err := strconv.Unquote(m[1])
	return host, err == nil
}

// Stopped is the comment posted when a task is stopped at a checkpoint.
func (l Lang) Stopped(turn int, reason, botLabel string) (string, error) {
	return l.notice("stopped", map[string]any{"Turn": turn, "Reason": reason, "BotLabel": botLabel})
}

// Refused is the comment posted when a task's bot label came from someone
// not trusted to ask for the agent (labeler "" when nobody is on record).
func (l Lang) Refused(labeler, botLabel string) (string, error) {
	return l.notice("refused", map[string]any{"Labeler": labeler, "BotLabel": botLabel})
}

// Delivery is what a delivered task's last comment says: the commit pushed
// (Commit "" when nothing changed), its branch, and the pull or merge
// request that carries it (Opened: this round opened it).
type Delivery struct {
	Commit, Branch string
	Kind           string // "pull request" or "merge request"
	ChangeURL      string // "" when none
	Opened, Draft  bool
	// LeftOut are the changed files the commit did not take, and why.
	LeftOut []LeftOut
}

// LeftOut is a file a delivery did not commit, and why.
type LeftOut struct{ Path, Reason string }

// Delivered is the comment that ties a done task to what exists on the
// forge: the commit and the pull or merge request.
func (l Lang) Delivered(d Delivery) (string, error) {
	d.Kind = l.kind(d.Kind)
	return l.notice("delivered", d)
}

// Patch is the comment that offers a fork's pull request the change as a
// patch; kind is "pull request" or "merge request".
func (l Lang) Patch(kind, patch string) (string, error) {
	// The fence is longer than any run of backticks in the patch.
	longest, run := 0, 0
	for _, r := range patch {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	return l.notice("patch", map[string]any{"Kind": l.kind(kind), "Patch": strings.TrimRight(patch, "\n"), "Fence": fence})
}

// Holder is the comment that says which host holds a task, edited at every
// heartbeat (beat, the time of this edit, changes its body).
func (l Lang) Holder(host string, beat time.Time, every, lease time.Duration) (string, error) {
	return l.notice("holder", map[string]any{"Host": host, "Beat": beat.UTC().Format(time.RFC3339),
		"Every": every.String(), "Lease": lease.String()})
}

// holderMark is the holder comment's hidden line.
var holderMark = regexp.MustCompile(`(?m)^<!-- coding-agent holder: host=("(?:[^"\\]|\\.)*") beat=(\S+) -->$`)

// Holding is what a holder comment (Holder) says: the host and the time of
// its last heartbeat, by that host's clock.
type Holding struct {
	Host string
	Beat time.Time
}

// HolderOf reads a holder comment; false for any other comment.
func HolderOf(body string) (Holding, bool) {
	m := holderMark.FindStringSubmatch(body)
	if m == nil {
		return Holding{}, false
	}
	host, err := strconv.Unquote(m[1])
	if err != nil {
		return Holding{}, false
	}
	beat, err := time.Parse(time.RFC3339, m[2])
	if err != nil {
		return Holding{}, false
	}
	return Holding{Host: host, Beat: beat}, true
}
