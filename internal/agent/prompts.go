package agent

import (
	"embed"

	"github.com/coding-agent/coding-agent/internal/engine"
)

//go:embed prompts/*.tmpl
var promptFS embed.FS

var prompts = engine.ParsePrompts(promptFS, "prompts/*.tmpl")

// comments are the plain loop's comment bodies.
//
//go:embed comments/*.tmpl
var commentFS embed.FS

var comments = engine.ParsePrompts(commentFS, "comments/*.tmpl")

// systemPrompt is the plain loop's system prompt: how to work, the reply
// protocol, and the tool catalog.
func systemPrompt(ts *engine.Toolset, maxTurns int) (string, error) {
	catalog, err := ts.Catalog()
	if err != nil {
		return "", err
	}
	return prompts.Render("system.tmpl", struct {
		Catalog         string
		FunctionCalling bool
		MaxTurns        int
	}{catalog, ts.Native(), maxTurns})
}
