package report

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

var templates = template.Must(template.ParseFS(templateFS, "templates/*.tmpl"))

// Failed is the comment posted when a task ends in failure.
func Failed(reason, failedLabel, botLabel string) (string, error) {
	return render("failed.tmpl", map[string]any{"Reason": reason, "FailedLabel": failedLabel, "BotLabel": botLabel})
}

// Interrupted is the comment posted when a shutdown stops a task at a
// checkpoint.
func Interrupted(turn int) (string, error) {
	return render("interrupted.tmpl", map[string]any{"Turn": turn})
}

// StoreFailed is the comment posted when a task stops because the state
// store cannot be written.
func StoreFailed(turn int, reason string) (string, error) {
	return render("storefailed.tmpl", map[string]any{"Turn": turn, "Reason": reason})
}

func render(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("rendering %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()), nil
}

// Paused is the comment posted when a task pauses at a checkpoint.
func Paused(turn int, reason, pausedLabel, botLabel string) (string, error) {
	return render("paused.tmpl", map[string]any{"Turn": turn, "Reason": reason, "PausedLabel": pausedLabel, "BotLabel": botLabel})
}

// Stopped is the comment posted when a task is stopped at a checkpoint.
func Stopped(turn int, reason, botLabel string) (string, error) {
	return render("stopped.tmpl", map[string]any{"Turn": turn, "Reason": reason, "BotLabel": botLabel})
}

// Refused is the comment posted when a task's bot label came from someone
// not trusted to ask for the agent (labeler "" when nobody is on record).
func Refused(labeler, botLabel string) (string, error) {
	return render("refused.tmpl", map[string]any{"Labeler": labeler, "BotLabel": botLabel})
}
