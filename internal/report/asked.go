package report

import (
	"fmt"
	"strings"

	"github.com/coding-agent/coding-agent/internal/sanitize"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// Question is a server's question put to the people on a task
// (engine.Question), as its comment shows it.
type Question struct {
	Server  string
	Message string
	Fields  []toolhost.Field
	// Unread says why the last reply could not be read as an answer.
	Unread string
}

// Asked is the comment that puts a server's question to the people on the
// task: the server's words quoted (they are not the agent's), each field
// with its type and choices, and how to answer.
func (l Lang) Asked(q Question) (string, error) {
	var fields []string
	for _, f := range q.Fields {
		fields = append(fields, l.field(f))
	}
	return l.notice("asked", map[string]any{"Server": CodeSpan(q.Server), "Question": fenced(sanitize.Clean(q.Message)),
		"Fields": fields, "Unread": q.Unread, "Example": CodeSpan(example(q.Fields)), "Decline": CodeSpan(toolhost.Decline)})
}

// field is one line of the list of fields: its name, whether it is
// required, what it takes, and its description.
func (l Lang) field(f toolhost.Field) string {
	ja := l.norm() == Japanese
	var b strings.Builder
	b.WriteString(CodeSpan(f.Name))
	if f.Title != "" && f.Title != f.Name {
		fmt.Fprintf(&b, " (%s)", plain(f.Title))
	}
	if f.Required {
		b.WriteString(map[bool]string{false: ", required", true: "、必須"}[ja])
	}
	var takes string
	switch {
	case len(f.Choices) > 0:
		var cs []string
		for _, c := range f.Choices {
			s := CodeSpan(c.Value)
			if c.Title != "" && c.Title != c.Value {
				s += " (" + plain(c.Title) + ")"
			}
			cs = append(cs, s)
		}
		takes = map[bool]string{false: "one of ", true: "次のいずれか: "}[ja]
		if f.Type == "array" {
			takes = map[bool]string{false: "any of ", true: "次から複数: "}[ja]
		}
		takes += strings.Join(cs, ", ")
	case f.Type == "boolean":
		takes = map[bool]string{false: "yes or no", true: "yes か no"}[ja]
	case f.Type == "integer":
		takes = map[bool]string{false: "a whole number", true: "整数"}[ja]
	case f.Type == "number":
		takes = map[bool]string{false: "a number", true: "数値"}[ja]
	case f.Format != "":
		takes = map[bool]string{false: "text (" + f.Format + ")", true: "テキスト (" + f.Format + ")"}[ja]
	default:
		takes = map[bool]string{false: "text", true: "テキスト"}[ja]
	}
	b.WriteString(": " + takes)
	if f.Default != nil {
		fmt.Fprintf(&b, map[bool]string{false: " (default %s)", true: " (既定値 %s)"}[ja], CodeSpan(fmt.Sprint(f.Default)))
	}
	if d := plain(f.Description); d != "" {
		b.WriteString(". " + d)
	}
	return b.String()
}

// example is an answer's first line for the comment: the first required
// field (or the first) with a value it takes.
func example(fields []toolhost.Field) string {
	if len(fields) == 0 {
		return ""
	}
	f := fields[0]
	for _, g := range fields {
		if g.Required {
			f = g
			break
		}
	}
	v := "…"
	switch {
	case len(f.Choices) > 0:
		v = f.Choices[0].Value
	case f.Type == "boolean":
		v = "yes"
	case f.Type == "integer" || f.Type == "number":
		v = "1"
	}
	return f.Name + ": " + v
}

// plain is a server's words on one line, its @mentions broken (a word
// joiner after the @) so that quoting them notifies nobody.
func plain(s string) string { return strings.ReplaceAll(sanitize.Line(s), "@", "@\u2060") }
