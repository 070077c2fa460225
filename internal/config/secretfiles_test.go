package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/config"
)

// writeSecret writes content to a file of its own and returns its path.
func writeSecret(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Tokens and keys read from files, so that they need not be in the
// environment: the final newline is dropped, ${VAR} expands in the path,
// and the values are secrets like those written in the file.
func TestSecretsFromFiles(t *testing.T) {
	ghToken, key := writeSecret(t, "ghp_fromfile\n"), writeSecret(t, "  sk-fromfile\r\n")
	c, _ := mustParse(t, `task_source: github
github:
  token_file: ${TOKEN_FILE}
  repositories: [acme/app]
llm:
  provider: openai
  openai:
    api_key_file: `+key+`
    model: gpt-4o
`, map[string]string{"TOKEN_FILE": ghToken})
	if c.GitHub.Token != "ghp_fromfile" || c.LLM.OpenAI.APIKey != "sk-fromfile" {
		t.Errorf("token %q, key %q", c.GitHub.Token, c.LLM.OpenAI.APIKey)
	}
	if diff := cmp.Diff([]string{"ghp_fromfile", "sk-fromfile"}, c.Secrets()); diff != "" {
		t.Errorf("Secrets (-want +got):\n%s", diff)
	}

	glToken := writeSecret(t, "glpat-fromfile\n")
	c, _ = mustParse(t, `task_source: gitlab
gitlab:
  token_file: `+glToken+`
  project_id: 7
llm:
  provider: ollama
  ollama: {model: qwen}
`, nil)
	if c.GitLab.Token != "glpat-fromfile" {
		t.Errorf("gitlab token %q", c.GitLab.Token)
	}
}

// Every way a secret file can be wrong is a problem at its key, on its
// line, and quotes no secret; the value's own "required" is not repeated.
func TestSecretFileProblems(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	empty, twoLines := writeSecret(t, "\n"), writeSecret(t, "ghp_one\nghp_two\n")
	key := writeSecret(t, "sk-both")
	big := writeSecret(t, strings.Repeat("x", 65<<10))
	src := `task_source: github
github:
  token_file: ` + missing + `
  repositories: [acme/app]
llm:
  provider: openai
  openai:
    api_key: sk-inline-secret
    api_key_file: ` + key + `
    model: gpt-4o
`
	want := config.Problems{
		{Path: "github.token_file", Msg: "cannot read the file: stat " + missing + ": no such file or directory", Line: 3},
		{Path: "llm.openai.api_key_file", Msg: "set either llm.openai.api_key or llm.openai.api_key_file, not both", Line: 9},
	}
	got := problems(t, src, nil)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if strings.Contains(got.Error(), "sk-") {
		t.Errorf("a problem quotes a secret: %v", got)
	}
	for file, msg := range map[string]string{
		empty:    "the file " + empty + " is empty",
		twoLines: "the file " + twoLines + " holds more than one line; it should hold the secret alone",
		big:      "the file " + big + " holds 66560 bytes; it should hold the secret alone",
		dir:      "is not a file: " + dir,
	} {
		got := problems(t, "task_source: gitlab\ngitlab:\n  project_id: 7\n  token_file: "+file+"\nllm:\n  provider: ollama\n  ollama: {model: q}\n", nil)
		want := config.Problems{{Path: "gitlab.token_file", Msg: msg, Line: 4}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("problems (-want +got):\n%s", diff)
		}
	}
}

// The file of a task source or provider not in use is not read, as its
// section is not checked.
func TestSecretFileOfAnUnusedSectionIsNotRead(t *testing.T) {
	c, _ := mustParse(t, `task_source: github
github: {token: ghp_x, repositories: [acme/app]}
gitlab: {token_file: /nonexistent/token}
llm:
  provider: ollama
  ollama: {model: q}
  openai: {api_key_file: /nonexistent/key}
`, nil)
	if c.GitLab.Token != "" || c.LLM.OpenAI.APIKey != "" {
		t.Errorf("unused secrets read: %q %q", c.GitLab.Token, c.LLM.OpenAI.APIKey)
	}
	if got := problems(t, "task_source: github\ngithub:\n  tokn_file: x\n", nil); !strings.Contains(got.Error(), `github.tokn_file (line 3): unknown key (did you mean "token_file"?)`) {
		t.Errorf("a misspelt token_file: %v", got)
	}
}
