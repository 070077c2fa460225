package engine

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"text/template"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

//go:embed prompts/*.tmpl
var promptFS embed.FS

// Prompts are a policy's prompt templates: every *.tmpl file of a
// directory, with the functions add and join.
type Prompts struct{ t *template.Template }

// ParsePrompts parses the templates matching pattern in fsys; it panics on
// a bad template, as they are embedded in the binary.
func ParsePrompts(fsys fs.FS, pattern string) Prompts {
	return Prompts{template.Must(template.New("").Funcs(template.FuncMap{
		"add": func(a, b int) int { return a + b }, "join": strings.Join}).ParseFS(fsys, pattern))}
}

// Render executes template name with data, without surrounding space.
func (p Prompts) Render(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := p.t.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("rendering prompt %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()), nil
}

var prompts = ParsePrompts(promptFS, "prompts/*.tmpl")

func render(name string, data any) (string, error) { return prompts.Render(name, data) }

type promptTool struct {
	Name, Fn, Description, Params string
	ReadOnly                      bool
}

type promptComment struct {
	Author, At, Body string
	Bot              bool
}

// TaskPrompt is the opening user message for a task: its title, body, for
// a pull or merge request its branches, people's comments in order and the
// summaries of earlier rounds; every piece of it that people wrote is
// fenced as untrusted.
func TaskPrompt(t task.Task, comments []task.Comment, bot string, rounds []string) (string, error) {
	kind := map[task.Kind]string{task.Issue: "issue", task.PullRequest: "pull request", task.MergeRequest: "merge request"}[t.Ref.Kind]
	data := struct {
		task.Task
		Kind, Ref string
		Comments  []promptComment
		Rounds    []string
	}{Task: t, Kind: kind, Ref: t.Ref.String()}
	for _, r := range rounds {
		data.Rounds = append(data.Rounds, Fence("your summary of an earlier round", r))
	}
	data.Title = sanitize(oneLine(t.Title))
	data.Body = Fence("description", t.Body)
	if strings.TrimSpace(t.Body) == "" {
		data.Body = "(empty)"
	}
	for _, c := range comments {
		if c.System {
			continue
		}
		isBot := bot != "" && strings.EqualFold(c.Author, bot)
		// The bot's own comments are fenced too: they quote tool output and
		// error texts that others control.
		source := "comment by @" + c.Author
		if isBot {
			source = "your earlier comment"
		}
		body := Fence(source, c.Body)
		data.Comments = append(data.Comments, promptComment{
			Author: c.Author, At: c.CreatedAt.UTC().Format(time.RFC3339), Body: body, Bot: isBot,
		})
	}
	return render("task.tmpl", data)
}

// resultPrompt is the message after a tool call: the tool's name and its
// result verbatim (cut by the host at its size cap), never the call's
// arguments, which the conversation holds once already (SPEC-NOTES 17).
func resultPrompt(call ToolCall, res toolhost.Result, repeated int) (string, error) {
	data := struct {
		Tool, Result           string
		IsError, Truncated     bool
		Shown, Bytes, Repeated int
	}{
		Tool: call.Tool, Result: Fence("tool output of "+call.Tool, res.Text),
		IsError: res.IsError, Truncated: res.Truncated, Shown: len(res.Text), Bytes: res.Bytes, Repeated: repeated,
	}
	return render("result.tmpl", data)
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
