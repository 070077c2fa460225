package agent

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/coding-agent/coding-agent/internal/engine"
)

//go:embed prompts/*.tmpl
var promptFS embed.FS

var prompts = template.Must(template.New("").ParseFS(promptFS, "prompts/*.tmpl"))

func render(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := prompts.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("rendering prompt %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()), nil
}

// systemPrompt is the plain loop's system prompt: how to work, the reply
// protocol, and the tool catalog.
func systemPrompt(ts *engine.Toolset, maxTurns int) (string, error) {
	catalog, err := ts.Catalog()
	if err != nil {
		return "", err
	}
	return render("system.tmpl", struct {
		Catalog         string
		FunctionCalling bool
		MaxTurns        int
	}{catalog, ts.Native(), maxTurns})
}
