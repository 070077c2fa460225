package report

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/sanitize"
)

// The living comment: what a round shows on the task by default
// (comments.mode living), one comment edited in place while the agent
// works: the plan's progress in planning mode, then the steps, each model
// call with its own comment and what it did, naming the files and the
// commands. When the round ends it is edited one last time, and one
// closing comment says the outcome. Every model call's comment is on the
// issue as an edit of it; the oldest steps leave the body only when it
// would pass the forge's size limit (they stay in its edit history).

// Comment modes (config's comments.mode).
const (
	ModeLiving   = "living"   // one living comment per round, and one closing comment
	ModeSeparate = "separate" // a comment per model call, as before
)

// LiveEditEvery is the least time between two edits of a living comment:
// the steps of a fast model land in one edit, not one each. The last edit
// of a round is made whatever the time.
const LiveEditEvery = 5 * time.Second

// StepCall is one tool call of a step: the tool and what it acted on (a
// file, a command, a query; "" when its arguments name none).
type StepCall struct {
	Tool   string `json:"tool"`
	Target string `json:"target,omitempty"`
	Failed bool   `json:"failed,omitempty"` // it ended in a tool error
}

// targetKeys are the argument names that say what a tool call acts on, in
// the order they are looked for.
var targetKeys = []string{"command", "cmd", "path", "file", "file_path", "filename", "source", "destination", "paths",
	"query", "pattern", "url"}

// CallOf describes a tool call from its arguments (a JSON object): the
// first of its arguments that names a file or a command, without the
// hosts it may name (sanitize.Hosts: a URL shows its path).
func CallOf(tool string, args json.RawMessage) StepCall {
	c := StepCall{Tool: oneLine(tool)}
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return c
	}
	for _, k := range targetKeys {
		switch v := m[k].(type) {
		case string:
			if strings.TrimSpace(v) != "" {
				c.Target = shorten(oneLine(sanitize.Hosts(v)), 200)
				return c
			}
		case []any:
			var parts []string
			for _, x := range v {
				if s, ok := x.(string); ok {
					parts = append(parts, s)
				}
			}
			if len(parts) > 0 {
				c.Target = shorten(oneLine(sanitize.Hosts(strings.Join(parts, " "))), 200)
				return c
			}
		}
	}
	return c
}

// shorten cuts s to n runes, an ellipsis marking the cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return prefixRunes(s, n-1) + "…"
}

// Step is one model call as the living comment shows it.
type Step struct {
	N       int        `json:"n"`               // the model call's number in the round
	Phase   string     `json:"phase,omitempty"` // planning mode's phase; "" in the plain loop
	Comment string     `json:"comment,omitempty"`
	Calls   []StepCall `json:"calls,omitempty"`
	Done    bool       `json:"done,omitempty"` // the model said the task is done
	// Repeats counts the steps after it that wrote the same comment:
	// shown as "×n" instead of steps of their own (planning mode).
	Repeats int `json:"repeats,omitempty"`
	// Note is a line the daemon adds: an error, a refusal.
	Note string `json:"note,omitempty"`
}

// Live is a living comment.
type Live struct {
	// Progress is planning mode's rendered progress checklist ("" in the
	// plain loop: the steps are the progress).
	Progress string
	Steps    []Step
	// Earlier counts older steps no longer kept: said to be in the
	// comment's edit history.
	Earlier  int
	Finished bool
	// Halted is why the run stopped at a checkpoint, which a later run
	// resumes: engine.Paused, engine.Stopped, engine.Interrupted or
	// engine.Asked; "" while it works and once it finished.
	Halted engine.End
	// Now is what the agent is doing ("" when finished or not known).
	Now       string
	UpdatedAt time.Time
}

// Last reports whether v is its round's last edit: finished or halted.
func (v Live) Last() bool { return v.Finished || v.Halted != "" }

// liveStep is a step ready for the template.
type liveStep struct {
	N                int
	Phase, Comment   string
	Calls            []liveCall
	Done             bool
	Repeats          int
	Note             string
	FirstOfItsPhase  bool
	PhaseDisplayName string
}

type liveCall struct {
	Tool, Target string
	Failed       bool
}

// Living renders a living comment of at most maxLen characters: the oldest
// steps are left out (and said to be) until it fits, and a body still too
// long is cut by the Board.
func (l Lang) Living(v Live, maxLen int) (string, error) {
	steps := make([]liveStep, 0, len(v.Steps))
	prev := ""
	for _, s := range v.Steps {
		ls := liveStep{N: s.N, Phase: s.Phase, Comment: strings.TrimSpace(s.Comment), Done: s.Done, Repeats: s.Repeats + 1,
			Note: oneLine(s.Note), FirstOfItsPhase: s.Phase != "" && s.Phase != prev, PhaseDisplayName: l.PhaseName(s.Phase)}
		prev = s.Phase
		for _, c := range s.Calls {
			ls.Calls = append(ls.Calls, liveCall{Tool: CodeSpan(c.Tool), Target: spanOrEmpty(c.Target), Failed: c.Failed})
		}
		steps = append(steps, ls)
	}
	now := ""
	if !v.Last() {
		now = oneLine(v.Now)
		if _, ok := phaseVocab[l.norm()][now]; ok {
			now = l.PhaseName(now)
		}
	}
	for left := 0; ; left++ {
		shown := steps[left:]
		if len(shown) > 0 && shown[0].Phase != "" {
			shown[0].FirstOfItsPhase = true
		}
		body, err := render("live/"+string(l.norm()), map[string]any{
			"Progress": strings.TrimSpace(v.Progress), "Steps": shown, "Left": left + v.Earlier, "Finished": v.Finished, "Halted": string(v.Halted),
			"Now": now, "Time": stamp(v.UpdatedAt)})
		if err != nil || maxLen <= 0 || utf8.RuneCountInString(body) <= maxLen || left >= len(steps)-1 {
			// At least the newest step is shown: the Board cuts what is
			// still too long.
			return body, err
		}
	}
}

func spanOrEmpty(s string) string {
	if s == "" {
		return ""
	}
	return CodeSpan(s)
}

// Closing is the closing comment of a round that ended done, in both
// modes' plain form: the model's own words, what ran (Evidence), the
// comments left unread, and, where nothing was run but the model's words
// claim that something passes, a note that it was checked by reading only.
type Closing struct {
	Comment  string
	Checks   []Command
	Ran      []Command
	Ignored  int
	Delivery string // the delivery's text (pull request link), "" when none
	Page     string // the task's page (internal/ui), "" when none
}

// Closing renders a plain-loop closing comment.
func (l Lang) Closing(c Closing) (string, error) {
	evidence, err := Evidence(l, c.Checks, c.Ran)
	if err != nil {
		return "", err
	}
	// The model's text, cleaned of what no reader sees (HTML comments):
	// none can forge the line Poster.Amend cuts at, which would cut what
	// follows it (the evidence, the note that nothing was run).
	comment := strings.TrimSpace(sanitize.Clean(c.Comment))
	return render("closing/"+string(l.norm()), map[string]any{
		"Comment": comment, "Evidence": evidence, "Ignored": c.Ignored,
		"Unrun":    len(c.Checks)+len(c.Ran) == 0 && ClaimsPass(comment),
		"Delivery": strings.TrimSpace(c.Delivery),
		"Page":     c.Page,
	})
}

// passWords are what a text says when it claims that something ran and
// passed: "passes", "passed", "tests pass", ✅, "成功", "通過", "合格".
var passWords = []string{"✅", "pass", "succeed", "success", "green", "成功", "通過", "合格", "通りました", "通る"}

// ClaimsPass reports whether text claims that something passed or
// succeeded (the words a model uses for it): with nothing run, the claim
// was checked by reading at most.
func ClaimsPass(text string) bool {
	t := strings.ToLower(text)
	for _, w := range passWords {
		if strings.Contains(t, w) {
			return true
		}
	}
	return false
}

// CallTrouble is a living comment's note for a model call that failed or
// could not be used.
func (l Lang) CallTrouble(reason string, retrying bool) string {
	if l.norm() == Japanese {
		s := "LLM呼び出しエラー: " + oneLine(reason)
		if retrying {
			s += "（リトライします）"
		}
		return s
	}
	s := "LLM call error: " + oneLine(reason)
	if retrying {
		s += " (retrying)"
	}
	return s
}

// ToolFailed is a living comment's note for a tool call that ended in an
// error.
func (l Lang) ToolFailed(tool, errText string) string {
	if l.norm() == Japanese {
		return CodeSpan(oneLine(tool)) + " がエラーになりました: " + oneLine(errText)
	}
	return CodeSpan(oneLine(tool)) + " failed: " + oneLine(errText)
}
