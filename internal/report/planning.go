package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/sanitize"
)

// Lang is the language of what the agent writes on the issue.
type Lang string

// The languages the planning-mode comments are written in.
const (
	Japanese Lang = "ja"
	English  Lang = "en"
)

// ParseLang maps config's language to a Lang: "ja" (any case, also
// "ja-JP", "ja_JP" or "japanese") is Japanese; anything else, "" included,
// is English, the default. Rejecting unknown values is config's job.
func ParseLang(s string) Lang {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "ja" || s == "japanese" || strings.HasPrefix(s, "ja-") || strings.HasPrefix(s, "ja_") {
		return Japanese
	}
	return English
}

// norm returns l, or English when l is not a known language.
func (l Lang) norm() Lang {
	if l == Japanese {
		return Japanese
	}
	return English
}

// tmpl names the template of message kind in l.
func (l Lang) tmpl(kind string) string { return "plan/" + string(l.norm()) + "/" + kind }

// phaseWords is what the issue reads for a planning-mode phase (plan.Phase): its name and the message
// posted after an LLM call of it that carried no comment (spec 000 §4.2).
type phaseWords struct{ name, done string }

var phaseVocab = map[Lang]map[string]phaseWords{
	Japanese: {
		"pre_planning": {"計画前情報収集", "タスク内容の分析と情報収集が完了しました"},
		"planning":     {"計画作成", "実行計画の作成が完了しました"},
		"execution":    {"アクション実行", "アクションの実行が完了しました"},
		"reflection":   {"リフレクション", "実行結果の分析が完了しました"},
		"revision":     {"計画修正", "計画の修正が完了しました"},
		"verification": {"検証", "実装の検証が完了しました"},
		"replan":       {"再計画判断", "再計画の判断が完了しました"},
	},
	English: {
		"pre_planning": {"Pre-planning", "Task analysis and information gathering completed."},
		"planning":     {"Planning", "Execution plan created."},
		"execution":    {"Execution", "Action completed."},
		"reflection":   {"Reflection", "Analysis of the results completed."},
		"revision":     {"Revision", "Plan revision completed."},
		"verification": {"Verification", "Verification of the implementation completed."},
		"replan":       {"Replan decision", "Replan decision completed."},
	},
}

// PhaseName is the phase as the issue reads it. ja: 計画前情報収集, 計画作成,
// アクション実行, リフレクション, 計画修正, 検証, 再計画判断; en: Pre-planning,
// Planning, Execution, Reflection, Revision, Verification, Replan decision.
// An unknown phase reads as itself.
func (l Lang) PhaseName(p string) string {
	if w, ok := phaseVocab[l.norm()][p]; ok {
		return w.name
	}
	return oneLine(p)
}

// defaultMessage is what a Call section says when the model wrote no
// comment: spec 000 §4.2, with the action named during execution.
func (l Lang) defaultMessage(p string, actionID string) (string, error) {
	w, ok := phaseVocab[l.norm()][p]
	if !ok {
		return "", fmt.Errorf("no default message for unknown phase %q", p)
	}
	if p != "execution" || actionID == "" {
		return w.done, nil
	}
	if l.norm() == English {
		return fmt.Sprintf("Action %q completed.", actionID), nil
	}
	return "アクション「" + actionID + "」の実行が完了しました", nil
}

// Default is what a step of phase p says when the model wrote no comment
// (spec 000 §4.2), the action named during execution.
func (l Lang) Default(p, actionID string) (string, error) {
	return l.defaultMessage(p, oneLine(actionID))
}

// Call is the section written after one LLM call (spec 000 §4.1.1):
//
//	with comment:    "## ✅ {phase} - LLM呼び出し #{n}\n\n{comment}\n\n*{time}*"
//	without comment: "## ✅ {phase} - LLM呼び出し #{n} 完了\n\n{default message}\n\n*{time}*"
//
// Default messages are the table in spec 000 §4.2 (execution:
// アクション「{actionID}」の実行が完了しました). English: "## ✅ {phase} - LLM
// call #{n}" / "... #{n} completed", with English defaults. A comment of
// only white space counts as none; an unknown phase is an error.
func (l Lang) Call(p string, n int, comment, actionID string, at time.Time) (string, error) {
	def, err := l.defaultMessage(p, oneLine(actionID))
	if err != nil {
		return "", fmt.Errorf("rendering LLM call #%d: %w", n, err)
	}
	return render(l.tmpl("call"), map[string]any{
		"Phase":   l.PhaseName(p),
		"N":       n,
		"Comment": strings.TrimSpace(comment),
		"Default": def,
		"Time":    stamp(at),
	})
}

// maxErrorRunes bounds the error text quoted in an error section, so that
// one long error (a build log, say) does not crowd out a phase comment.
const maxErrorRunes = 2000

// ToolError is spec 000 §4.5.1: "## ❌ エラー発生 - {tool}", the error
// (**エラー内容**), the action it happened in (**発生したアクション**, left out
// when actionID is empty), "リトライまたは代替アプローチを検討しています..." and the
// time; English equivalent. An error of several lines is quoted in a code
// block; one longer than 2000 characters is cut.
func (l Lang) ToolError(tool, errText, actionID string, at time.Time) (string, error) {
	inline, block := quoteError(errText)
	return render(l.tmpl("tool_error"), map[string]any{
		"Tool":     oneLine(tool),
		"Inline":   inline,
		"Block":    block,
		"ActionID": oneLine(actionID),
		"Time":     stamp(at),
	})
}

// LLMError is spec 000 §4.5.2: "## ⚠️ LLM呼び出しエラー - {phase}", the
// error (**エラー内容**), "リトライを試みます..." only when retrying, and the
// time; English equivalent.
func (l Lang) LLMError(p string, errText string, retrying bool, at time.Time) (string, error) {
	inline, block := quoteError(errText)
	return render(l.tmpl("llm_error"), map[string]any{
		"Phase":    l.PhaseName(p),
		"Inline":   inline,
		"Block":    block,
		"Retrying": retrying,
		"Time":     stamp(at),
	})
}

// ActionStatus of one action in the progress checklist.
type ActionStatus string

// The states of an action.
const (
	ActionPending ActionStatus = "pending"
	ActionDone    ActionStatus = "done"
	ActionFailed  ActionStatus = "failed"
	ActionSkipped ActionStatus = "skipped"
)

// ProgressAction is one item of the progress checklist.
type ProgressAction struct {
	ID, Description string
	Status          ActionStatus
	Note            string // short note after the item (e.g. why it failed); may be empty
}

// ProgressRevision is one revision of the plan.
type ProgressRevision struct {
	N       int
	Reason  string
	Changes []string
	At      time.Time
}

// Progress is the living progress report: one comment, edited in place.
type Progress struct {
	Goal      string
	Actions   []ProgressAction
	Revisions []ProgressRevision // newest last; each says what changed
	Notes     []string           // extra lines, e.g. "comment by @x applied before action a3"
	Phase     string             // what the agent is doing now ("" when finished)
	Finished  bool
	UpdatedAt time.Time
}

// progressItem is one checklist line, ready for the template.
type progressItem struct {
	ID, Description, Note string
	Checked               bool   // done
	Failed                bool   // failed: marked ❌
	Strike                bool   // skipped: struck through
	Unknown               bool   // a status this package does not know
	Status                string // that status, shown as it is
}

// progressRevision is one revision, ready for the template.
type progressRevision struct {
	N       int
	Reason  string
	Changes []string
	Time    string
}

// Progress renders a markdown checklist: "- [x] **a1** description" for a
// done action, "- [ ] ..." for a pending one, "- [ ] ❌ ..." with its note
// for a failed one, "- [ ] ~~...~~" marked skipped for a skipped one; the
// count done/total (with failed and skipped counts), the revisions section,
// the notes, the current phase (or that the work is finished) and the time
// of the last update.
func (l Lang) Progress(p Progress) (string, error) {
	items := make([]progressItem, 0, len(p.Actions))
	var done, failed, skipped int
	for _, a := range p.Actions {
		it := progressItem{ID: oneLine(a.ID), Description: oneLine(a.Description), Note: oneLine(a.Note)}
		switch a.Status {
		case ActionDone:
			it.Checked = true
			done++
		case ActionFailed:
			it.Failed = true
			failed++
		case ActionSkipped:
			it.Strike = true
			skipped++
		case ActionPending, "":
		default:
			it.Unknown = true
			it.Status = oneLine(string(a.Status))
		}
		items = append(items, it)
	}
	revisions := make([]progressRevision, 0, len(p.Revisions))
	for _, r := range p.Revisions {
		revisions = append(revisions, progressRevision{
			N: r.N, Reason: oneLine(r.Reason), Changes: nonBlankLines(r.Changes), Time: stamp(r.At),
		})
	}
	phase := ""
	if !p.Finished && p.Phase != "" {
		phase = l.PhaseName(p.Phase)
	}
	return render(l.tmpl("progress"), map[string]any{
		"Goal":      strings.TrimSpace(p.Goal),
		"Items":     items,
		"Done":      done,
		"Total":     len(items),
		"Failed":    failed,
		"Skipped":   skipped,
		"Revisions": revisions,
		"Notes":     nonBlankLines(p.Notes),
		"Phase":     phase,
		"Finished":  p.Finished,
		"Time":      stamp(p.UpdatedAt),
	})
}

// Receipt is what a task cost.
type Receipt struct {
	LLMCalls, ToolCalls int
	TokensIn, TokensOut int64
	Duration            time.Duration
	// Compactions of the conversation to fit the context window, and the
	// model requests that summarised part of it (shown when there were any).
	Compactions, Summaries int
}

// Final is the closing comment of a planned task.
type Final struct {
	Succeeded          bool
	Summary            string   // the model's closing comment, may be empty
	Reason             string   // why it failed (when !Succeeded)
	Changes            []string // what changed: one line per completed action
	VerificationRan    bool
	VerificationPassed bool
	VerificationRounds int
	VerificationNotes  string
	// Criteria are the success criteria as the last verification round
	// judged them: by the model, so never marked ✅ (SPEC-NOTES 25).
	Criteria []Criterion
	// Checks are the checks coding-agent ran at the end of the round, Ran
	// the commands the model ran (the last result of each): the only
	// things the comment says were run (Evidence).
	Checks, Ran []Command
	// Page is the task's page (internal/ui), "" when none.
	Page            string
	IgnoredComments int // comments from people not allowed to steer (0: line omitted)
	Receipt         Receipt
}

// Criterion is one success criterion as the model judged it.
type Criterion struct {
	Text string
	Met  bool
}

// Final renders the closing comment of a planned task: whether it
// succeeded (a task marked succeeded whose verification ran and did not
// pass reads as finished but unverified, never as done), why it failed, the
// model's summary, the changes, the verification with what was run (or
// that it was checked by reading and nothing was run), the comments that
// were ignored, and the receipt.
func (l Lang) Final(f Final) (string, error) {
	outcome := "failed"
	switch {
	case f.Succeeded && f.VerificationRan && !f.VerificationPassed:
		outcome = "unverified"
	case f.Succeeded:
		outcome = "succeeded"
	}
	verification := "skipped"
	switch {
	case f.VerificationRan && f.VerificationPassed:
		verification = "passed"
	case f.VerificationRan:
		verification = "failed"
	}
	evidence := ""
	if len(f.Checks)+len(f.Ran) > 0 {
		var err error
		if evidence, err = Evidence(l, f.Checks, f.Ran); err != nil {
			return "", err
		}
	}
	criteria := make([]Criterion, 0, len(f.Criteria))
	for _, c := range f.Criteria {
		if c.Text = oneLine(c.Text); c.Text != "" {
			criteria = append(criteria, c)
		}
	}
	return render(l.tmpl("final"), map[string]any{
		"Evidence":     evidence,
		"Criteria":     criteria,
		"Outcome":      outcome,
		"Reason":       strings.TrimSpace(sanitize.Clean(f.Reason)),
		"Summary":      strings.TrimSpace(sanitize.Clean(f.Summary)),
		"Changes":      nonBlankLines(cleaned(f.Changes)),
		"Verification": verification,
		"Rounds":       f.VerificationRounds,
		"VNotes":       strings.TrimSpace(sanitize.Clean(f.VerificationNotes)),
		"Ignored":      f.IgnoredComments,
		"LLMCalls":     f.Receipt.LLMCalls,
		"ToolCalls":    f.Receipt.ToolCalls,
		"TokensIn":     groupDigits(f.Receipt.TokensIn),
		"TokensOut":    groupDigits(f.Receipt.TokensOut),
		"Duration":     l.duration(f.Receipt.Duration),
		"Page":         f.Page,
		"Compactions":  f.Receipt.Compactions,
		"Summaries":    f.Receipt.Summaries,
	})
}

// stamp is the time as the comments show it, e.g. "2025-01-17 14:30:45
// UTC"; "" for the zero time (the line is then left out).
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format("2006-01-02 15:04:05 MST")
}

// duration renders d to the second: "1時間2分3秒" in Japanese, "1h2m3s" in
// English.
func (l Lang) duration(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	if l.norm() == English {
		return d.String()
	}
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	var b strings.Builder
	if h > 0 {
		fmt.Fprintf(&b, "%d時間", h)
	}
	if h > 0 || m > 0 {
		fmt.Fprintf(&b, "%d分", m)
	}
	fmt.Fprintf(&b, "%d秒", s)
	return b.String()
}

// groupDigits writes n with a comma every three digits: 1234567 → "1,234,567".
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return sign + b.String()
}

// oneLine makes s fit on one line of markdown (a heading, a list item): its
// runs of white space, line breaks included, become single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// nonBlankLines returns the items of ss that are not blank, each on one line.
// cleaned are ss, each cleaned of what no reader sees (sanitize.Clean):
// the model's text in a closing comment cannot forge the line
// Poster.Amend cuts at.
func cleaned(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = sanitize.Clean(s)
	}
	return out
}

func nonBlankLines(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s = oneLine(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// quoteError prepares an error text for an error section: one line is
// quoted inline, several lines in a code block (returned in block), and a
// text longer than maxErrorRunes is cut with an ellipsis.
func quoteError(text string) (inline, block string) {
	text = strings.TrimSpace(strings.ReplaceAll(text, "\r\n", "\n"))
	if utf8.RuneCountInString(text) > maxErrorRunes {
		text = prefixRunes(text, maxErrorRunes) + "…"
	}
	if !strings.Contains(text, "\n") {
		return text, ""
	}
	f := strings.Repeat("`", max(3, longestRun(text, '`')+1))
	return "", f + "\n" + text + "\n" + f
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] != c {
			n = 0
			continue
		}
		n++
		best = max(best, n)
	}
	return best
}

// ToolStep is the comment of a model call that asked for tool calls and
// wrote no comment of its own: the phase's default message would claim the
// step finished, while it has only just asked for the tools. Each tool is
// named with what it acts on (CallOf): "Calling `fs/edit_file` on
// `app.py`."
func (l Lang) ToolStep(calls []StepCall) string {
	quoted := make([]string, len(calls))
	for i, c := range calls {
		quoted[i] = CodeSpan(oneLine(c.Tool))
		if c.Target != "" {
			if l.norm() == English {
				quoted[i] += " on " + CodeSpan(c.Target)
			} else {
				quoted[i] += "（" + CodeSpan(c.Target) + "）"
			}
		}
	}
	if l.norm() == English {
		return "Calling " + strings.Join(quoted, ", ") + "."
	}
	return "ツールを呼び出します: " + strings.Join(quoted, "、")
}

// SameAsPrevious notes, under a per-call section, that the steps after it
// wrote the same comment: n steps in all wrote it.
func (l Lang) SameAsPrevious(n int) string {
	if l.norm() == English {
		return fmt.Sprintf("*(same as the previous step, ×%d)*", n)
	}
	return fmt.Sprintf("*（前のステップと同じ、×%d）*", n)
}

// ActionFailed is the comment of a model call that ended an action as
// failed without a comment of its own.
func (l Lang) ActionFailed(actionID, reason string) string {
	if l.norm() == English {
		return "Action " + oneLine(actionID) + " failed: " + oneLine(reason)
	}
	return "アクション「" + oneLine(actionID) + "」は失敗しました: " + oneLine(reason)
}

// SkippedAction is the closing comment's line for an action left undone
// after a replan decision.
func (l Lang) SkippedAction(actionID, reason string) string {
	if l.norm() == English {
		return oneLine(actionID) + ": skipped (" + oneLine(reason) + ")"
	}
	return oneLine(actionID) + ": スキップ（" + oneLine(reason) + "）"
}

// CommentApplied is the progress report's line for a comment handed to the
// model while it worked: who wrote it and at which step it was applied.
func (l Lang) CommentApplied(author, where string, at time.Time) string {
	if l.norm() == English {
		return fmt.Sprintf("💬 Comment by @%s applied at %s (%s)", oneLine(author), oneLine(where), stamp(at))
	}
	return fmt.Sprintf("💬 @%s のコメントを %s で反映しました（%s）", oneLine(author), oneLine(where), stamp(at))
}
