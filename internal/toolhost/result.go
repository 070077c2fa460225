package toolhost

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Result is what a tool call gives back to the model.
type Result struct {
	// Text is the result as the model reads it, at most MaxResultBytes long.
	Text string
	// IsError reports a tool error: the model should read Text and adapt.
	IsError bool
	// Truncated reports that Text was cut to MaxResultBytes (a note says so in Text).
	Truncated bool
	// Bytes is the size of the text before any cut.
	Bytes int
	// Ran is set when the call ran a command in the task's sandbox: a call
	// of the built-in workspace server's run_command that got as far as
	// starting it. Only the daemon's own in-process server sets it, so what
	// a third-party server says it ran is never taken for evidence.
	Ran *CommandRun
}

// CommandRun is a command run in the task's sandbox and how it ended: what
// the closing comment and the pull request may say was run, and nothing
// else.
type CommandRun struct {
	Command  string `json:"command"`
	ExitCode int    `json:"exit_code"` // -1 when it did not exit on its own (a signal, the timeout)
	TimedOut bool   `json:"timed_out,omitempty"`
}

// renderContent turns an MCP tool result into the text the model reads: text
// contents joined by newlines, other contents summarised, and structured content
// as JSON when there is no content at all.
func renderContent(res *mcp.CallToolResult) string {
	parts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		parts = append(parts, renderOne(c))
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return fmt.Sprintf("[structured content that could not be encoded as JSON: %v]", err)
		}
		return string(b)
	}
	return strings.Join(parts, "\n")
}

func renderOne(c mcp.Content) string {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text
	case *mcp.ImageContent:
		return fmt.Sprintf("[image %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *mcp.ResourceLink:
		return fmt.Sprintf("[resource link %s: %s]", c.URI, orUnknown(c.Name))
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[empty embedded resource]"
		}
		if r.Text != "" || len(r.Blob) == 0 {
			return fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text)
		}
		return fmt.Sprintf("[resource %s, %s, %d bytes]", r.URI, orUnknown(r.MIMEType), len(r.Blob))
	default:
		return fmt.Sprintf("[%T content]", c)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "of unknown type"
	}
	return s
}

// truncate cuts text so that, with the note saying how much was cut, it fits in
// limit bytes; the cut falls on a UTF-8 character boundary.
func truncate(text string, limit int) Result {
	r := Result{Text: text, Bytes: len(text)}
	if len(text) <= limit {
		return r
	}
	// The note for the whole text is at least as long as the final note.
	keep := max(limit-len(cutNote(len(text), len(text))), 0)
	for keep > 0 && !utf8.RuneStart(text[keep]) {
		keep--
	}
	r.Text = text[:keep] + cutNote(len(text)-keep, len(text))
	r.Truncated = true
	return r
}

func cutNote(cut, total int) string {
	return fmt.Sprintf("\n[output truncated: the last %d of %d bytes were cut]", cut, total)
}
