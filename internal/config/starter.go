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

// The starter's text: config.yaml.tmpl, a file per forge (named by its
// task_source) that defines its "section" and its "webhook" line, and a
// file per provider (named by llm.provider) that defines its "provider"
// part of llm.
//
//go:embed starter
var starterFiles embed.FS

var starterTemplate = template.Must(template.ParseFS(starterFiles, "starter/config.yaml.tmpl"))

// Forges are the values of task_source: the forges with a section
// (sections), sorted.
var Forges = slices.Sorted(maps.Keys(sections))

// ForgeChoice is the values of task_source in prose: "gitea, github or
// gitlab".
func ForgeChoice() string { return either(Forges) }

// either is a list in prose: "a, b or c".
func either(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
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
		return nil, fmt.Errorf("unknown provider %q: want %s", provider, ProviderChoice())
	}
	data := map[string]string{
		"Forge": forge, "Provider": provider, "Output": output, "Language": language,
		"ForgeTitle": sections[forge](&Config{}).title(), "Change": task.Forges[forge].Change,
		"Changes":       task.Forges[forge].Change + "s",
		"ProviderTitle": providerSections[provider](&LLM{}).title(),
	}
	t, err := template.Must(starterTemplate.Clone()).ParseFS(starterFiles, "starter/"+forge+".yaml.tmpl", "starter/"+provider+".yaml.tmpl")
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
	if s, ok := providerSections[provider]; ok && s(&LLM{}).keyVar() != "" {
		vars = append(vars, s(&LLM{}).keyVar())
	}
	return vars
}
