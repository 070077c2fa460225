package agent

import (
	"embed"

	"github.com/coding-agent/coding-agent/internal/engine"
)

//go:embed prompts/*.tmpl
var promptFS embed.FS

var prompts = engine.ParsePrompts(promptFS, "prompts/*.tmpl")

// systemPrompt is the plain loop's system prompt: how to work, the reply
// protocol, and the tool catalog. finish is the function name of the tool
// that ends the task when a constrained run with native calls offers one.
func systemPrompt(ts *engine.Toolset, maxTurns int, finish string) (string, error) {
	catalog, err := ts.Catalog()
	if err != nil {
		return "", err
	}
	return prompts.Render("system.tmpl", struct {
		Catalog         string
		FunctionCalling bool
		Finish          string
		MaxTurns        int
	}{catalog, ts.Native(), finish, maxTurns})
}
