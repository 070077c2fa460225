package report

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// Command is a command that ran in the task's sandbox and how it ended: a
// check coding-agent ran itself (workspace.checks), or a command the model
// ran through the sandboxed tool. It is the only thing a comment or a pull
// request may call run, passed or ✅.
type Command struct {
	Command  string
	ExitCode int // -1 when it did not exit on its own (a signal, the timeout)
	TimedOut bool
	// Output is a check's output (stdout and stderr, as cut by the
	// runner): shown under the list for a check that failed.
	Output string
}

// Commands are a round's checks (the daemon's) and the last result of each
// command the model ran, as Evidence lists them.
func Commands(checks []engine.CheckResult, ran []toolhost.CommandRun) (c, r []Command) {
	for _, x := range checks {
		c = append(c, Command(x))
	}
	for _, x := range ran {
		r = append(r, Command{Command: x.Command, ExitCode: x.ExitCode, TimedOut: x.TimedOut})
	}
	return c, r
}

// Passed reports whether the command exited 0 on its own.
func (c Command) Passed() bool { return c.ExitCode == 0 && !c.TimedOut }

// maxOutputRunes bounds the output shown for one failing check: its last
// part is kept, where test runners say what failed.
const maxOutputRunes = 3000

// evidenceItem is one command, ready for the template.
type evidenceItem struct {
	Span     string // the command line as a code span
	Passed   bool
	TimedOut bool
	Exit     int
	Output   string // a failing check's output, fenced; "" for none
}

// Evidence renders what a round ran, for a closing comment and a pull or
// merge request body: the checks coding-agent ran itself (checks), then the
// commands the model ran through the sandbox (ran, the last result of
// each), each with ✅ only when it exited 0 and ❌ otherwise, and the output
// of each failing check. With both empty it says that nothing was run, so
// nothing the text around it claims reads as executed.
//
// Command lines are shown as code spans on one line whatever they hold
// (backticks, line breaks, markdown); the text is not redacted here: post
// it through a Poster or a Board, which redact every body, as any comment.
func Evidence(l Lang, checks, ran []Command) (string, error) {
	return render("evidence/"+string(l.norm()), map[string]any{
		"Checks": evidenceItems(checks, true),
		"Ran":    evidenceItems(ran, false),
	})
}

func evidenceItems(cs []Command, outputs bool) []evidenceItem {
	items := make([]evidenceItem, 0, len(cs))
	for _, c := range cs {
		it := evidenceItem{Span: CodeSpan(c.Command), Passed: c.Passed(), TimedOut: c.TimedOut, Exit: c.ExitCode}
		if outputs && !it.Passed && strings.TrimSpace(c.Output) != "" {
			it.Output = fenced(lastRunes(strings.TrimSpace(strings.ReplaceAll(c.Output, "\r\n", "\n")), maxOutputRunes))
		}
		items = append(items, it)
	}
	return items
}

// CodeSpan shows s as a markdown code span on one line: line breaks become
// " ⏎ ", other control characters are dropped, and the span's backtick
// delimiters are longer than any run of backticks inside, padded with a
// space when s starts or ends with one, so no text can close it early.
func CodeSpan(s string) string {
	s = strings.NewReplacer("\r\n", " ⏎ ", "\n", " ⏎ ", "\r", " ⏎ ").Replace(s)
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\t') {
			return -1
		}
		if r == '\t' {
			return ' '
		}
		return r
	}, s)
	if strings.TrimSpace(s) == "" {
		return "` `"
	}
	tick := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || (strings.HasPrefix(s, " ") && strings.HasSuffix(s, " ")) {
		s = " " + s + " "
	}
	return tick + s + tick
}

// fenced puts text in a fenced code block longer than any run of backticks
// in it.
func fenced(text string) string {
	f := strings.Repeat("`", max(3, longestRun(text, '`')+1))
	return f + "\n" + text + "\n" + f
}

// lastRunes is the last n runes of s, after an ellipsis when it was cut.
func lastRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	rs := []rune(s)
	return "…" + string(rs[len(rs)-n:])
}

// FixChecks is the description of the action planning mode adds when the
// repository's checks refused a done: the failing checks, each with how it
// ended.
func (l Lang) FixChecks(failing []Command) string {
	each := make([]string, 0, len(failing))
	for _, c := range failing {
		each = append(each, CodeSpan(c.Command)+" ("+l.status(c)+")")
	}
	if l.norm() == English {
		return "Make the failing checks pass: " + strings.Join(each, ", ")
	}
	return "失敗しているチェックを通す: " + strings.Join(each, "、")
}

// status is how a command ended, in words (the templates' own
// evidence/<lang>/status).
func (l Lang) status(c Command) string {
	s, err := render("evidence/"+string(l.norm())+"/status", evidenceItem{TimedOut: c.TimedOut, Exit: c.ExitCode})
	if err != nil {
		return fmt.Sprintf("exit %d", c.ExitCode)
	}
	return s
}
