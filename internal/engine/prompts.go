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
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/sanitize"
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

type promptComment struct {
	Author, At, Body string
	Bot              bool
	Gap              int // a gap, not a comment: this many comments left out here
}

// Caps on what people wrote, as the model is given it. The forge keeps the
// whole text; the model gets the start of it and a note saying how much
// was left out, so one pasted log or a thread of thousands of comments
// cannot crowd out the conversation (counted in characters, as the note
// says). They bound the task prompt at about 60,000 characters plus the
// comments' headers, whatever the task holds.
const (
	// maxBodyChars caps the description: about 5,000 tokens of English,
	// more than people write as a request (GitHub's own limit is 65,536),
	// while a pasted log keeps its first screens.
	maxBodyChars = 20_000
	// MaxCommentChars caps each comment, the agent's own included (its
	// closing comments can be long; their start says what was done).
	MaxCommentChars = 4_000
	// firstComments and newestComments choose the comments of a long
	// thread: the first few hold how the task was set, the newest what is
	// asked now; a line says how many in between were left out.
	firstComments  = 5
	newestComments = 30
	// maxCommentsChars caps the comments given, after each one's cap: the
	// oldest of the newest ones are left out first (the first
	// firstComments take at most 20,000 of it).
	maxCommentsChars = 40_000
)

// TaskPrompt is the opening user message for a task: its title, body, for
// a pull or merge request its branches, people's comments in order and the
// summaries of earlier rounds; every piece of it that people wrote is
// fenced as untrusted, and cut to the caps above with a note.
//
// setup is what the daemon ran in the task's workspace before this request
// (the repository's setup commands, with how each ended): fenced too, as
// it quotes their output; "" for nothing.
func TaskPrompt(t task.Task, comments []task.Comment, bot string, rounds []string, setup string) (string, error) {
	kind := map[task.Kind]string{task.Issue: "issue", task.PullRequest: "pull request", task.MergeRequest: "merge request"}[t.Ref.Kind]
	data := struct {
		task.Task
		Kind, Ref string
		Comments  []promptComment
		Total     int // comments in the thread
		Omitted   int // of which left out
		Rounds    []string
		Branches  string // head → base, fenced; "" for an issue
		Setup     string // fenced; "" for none
	}{Task: t, Kind: kind, Ref: t.Ref.String()}
	if strings.TrimSpace(setup) != "" {
		data.Setup = sanitize.Fence("the workspace's setup", setup)
	}
	for _, r := range rounds {
		data.Rounds = append(data.Rounds, sanitize.Fence("your summary of an earlier round", r))
	}
	data.Title = sanitize.Fence("title", sanitize.Line(t.Title))
	if t.HeadBranch != "" || t.BaseBranch != "" {
		data.Branches = sanitize.Fence("branch names", sanitize.Line(t.HeadBranch)+" → "+sanitize.Line(t.BaseBranch))
	}
	data.Body = FenceCut("description", t.Body, maxBodyChars)
	if strings.TrimSpace(t.Body) == "" {
		data.Body = "(empty)"
	}
	var people []task.Comment
	for _, c := range comments {
		if !c.System {
			people = append(people, c)
		}
	}
	first, newest, omitted := thread(people)
	data.Total, data.Omitted = len(people), omitted
	add := func(c task.Comment) {
		isBot := bot != "" && strings.EqualFold(c.Author, bot)
		// The bot's own comments are fenced too: they quote tool output and
		// error texts that others control.
		source := "comment by @" + c.Author
		if isBot {
			source = "your earlier comment"
		}
		data.Comments = append(data.Comments, promptComment{
			Author: c.Author, At: c.CreatedAt.UTC().Format(time.RFC3339), Body: FenceCut(source, c.Body, MaxCommentChars), Bot: isBot,
		})
	}
	for _, c := range first {
		add(c)
	}
	if omitted > 0 {
		data.Comments = append(data.Comments, promptComment{Gap: omitted})
	}
	for _, c := range newest {
		add(c)
	}
	return render("task.tmpl", data)
}

// thread chooses the comments the model is given: the first
// firstComments and the newest newestComments, then, while they pass
// maxCommentsChars, fewer of the newest, oldest first. omitted counts the
// comments left out between the two groups.
func thread(cs []task.Comment) (first, newest []task.Comment, omitted int) {
	f := min(firstComments, len(cs))
	first, newest = cs[:f], cs[f:]
	if len(newest) > newestComments {
		newest = newest[len(newest)-newestComments:]
	}
	size := func(c task.Comment) int { return min(utf8.RuneCountInString(sanitize.Clean(c.Body)), MaxCommentChars) }
	total := 0
	for _, c := range first {
		total += size(c)
	}
	for _, c := range newest {
		total += size(c)
	}
	for len(newest) > 1 && total > maxCommentsChars {
		total -= size(newest[0])
		newest = newest[1:]
	}
	return first, newest, len(cs) - len(first) - len(newest)
}

// FenceCut fences s (see Fence), cut to its first limit characters; a note
// after the fence says how many more were left out.
func FenceCut(source, s string, limit int) string {
	s = sanitize.Clean(s)
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return sanitize.Fence(source, s)
	}
	cut, left := s, limit
	for i := range s {
		if left == 0 {
			cut = s[:i]
			break
		}
		left--
	}
	kept := utf8.RuneCountInString(cut)
	return sanitize.Fence(source, cut) + fmt.Sprintf("\n[Cut for you: the text above is %d characters long; its first %d are shown, the other %d were left out.]",
		n, kept, n-kept)
}

// resultPrompt is the message after a tool call: the tool's name and its
// result verbatim (cut by the host at its size cap), never the call's
// arguments, which the conversation holds once already (SPEC-NOTES 17).
// rerun adds a note that the call was cut off by a restart and run again.
func resultPrompt(call ToolCall, res toolhost.Result, repeated int, rerun bool) (string, error) {
	data := struct {
		Prefix, Tool, Result      string
		IsError, Truncated, Rerun bool
		Shown, Bytes, Repeated    int
	}{
		Prefix: ResultPrefix, Tool: call.Tool, Result: sanitize.Fence("tool output of "+call.Tool, res.Text),
		IsError: res.IsError, Truncated: res.Truncated, Rerun: rerun, Shown: len(res.Text), Bytes: res.Bytes, Repeated: repeated,
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
