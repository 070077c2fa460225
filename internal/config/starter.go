package config

import (
	"bytes"
	"embed"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"

	"github.com/coding-agent/coding-agent/internal/task"
)

// The starter's text: config.yaml.tmpl, and a file per forge (named by
// its task_source) that defines its "section" and its "webhook" line.
//
//go:embed starter
var starterFiles embed.FS

var starterTemplate = template.Must(template.ParseFS(starterFiles, "starter/config.yaml.tmpl"))

// Providers are the values of llm.provider.
var Providers = []string{ProviderOpenAI, ProviderOllama, ProviderLMStudio}

// Forges are the values of task_source: the forges with a section
// (sections), sorted.
var Forges = slices.Sorted(maps.Keys(sections))

// ForgeChoice is the values of task_source in prose: "github or gitlab".
func ForgeChoice() string {
	if len(Forges) < 2 {
		return strings.Join(Forges, "")
	}
	return strings.Join(Forges[:len(Forges)-1], ", ") + " or " + Forges[len(Forges)-1]
}

// Starter returns a commented starter configuration for forge (task.GitHub
// or task.GitLab) and provider, with ${VAR} placeholders for its secrets, the
// default labels, and the built-in workspace tools (no MCP server, so no
// Node.js) with the sandbox's defaults and a check in comments. output is
// the file's name, for the comment that says how to check it.
func Starter(forge, provider, output string) ([]byte, error) {
	return StarterIn(forge, provider, output, LanguageEnglish)
}

// StarterIn is Starter with the comments in language (LanguageEnglish,
// the default, or LanguageJapanese: written out as language: ja).
func StarterIn(forge, provider, output, language string) ([]byte, error) {
	if language != LanguageEnglish && language != LanguageJapanese {
		return nil, fmt.Errorf("unknown language %q: want en or ja", language)
	}
	if !slices.Contains(Forges, forge) {
		return nil, fmt.Errorf("unknown forge %q: want %s", forge, ForgeChoice())
	}
	if !slices.Contains(Providers, provider) {
		return nil, fmt.Errorf("unknown provider %q: want openai, ollama or lmstudio", provider)
	}
	data := map[string]string{
		"Forge": forge, "Provider": provider, "Output": output, "Language": language,
		"ForgeTitle": sections[forge](&Config{}).title(), "Change": task.Forges[forge].Change,
		"Changes": task.Forges[forge].Change + "s",
		"ProviderTitle": map[string]string{ProviderOpenAI: "an OpenAI model", ProviderOllama: "a model served by Ollama",
			ProviderLMStudio: "a model served by LM Studio"}[provider],
	}
	t, err := template.Must(starterTemplate.Clone()).ParseFS(starterFiles, "starter/"+forge+".yaml.tmpl")
	if err != nil {
		return nil, fmt.Errorf("writing the starter config: %w", err)
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "config.yaml.tmpl", data); err != nil {
		return nil, fmt.Errorf("writing the starter config: %w", err)
	}
	return b.Bytes(), nil
}

// StarterVariables are the environment variables a starter configuration
// for forge and provider reads without a default: its secrets.
func StarterVariables(forge, provider string) []string {
	var vars []string
	if s, ok := sections[forge]; ok {
		vars = append(vars, s(&Config{}).tokenVar())
	}
	if provider == ProviderOpenAI {
		vars = append(vars, "OPENAI_API_KEY")
	}
	return vars
}
