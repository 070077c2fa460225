package config_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/config"
)

// Every starter configuration parses without a problem or a warning once its
// placeholders' variables are set, and fails without them.
func TestStarterParses(t *testing.T) {
	for _, forge := range config.Forges {
		for _, provider := range config.Providers {
			t.Run(forge+"-"+provider, func(t *testing.T) {
				data, err := config.Starter(forge, provider, "config.yaml")
				if err != nil {
					t.Fatal(err)
				}
				vars := map[string]string{}
				for _, v := range config.StarterVariables(forge, provider) {
					vars[v] = "secret-" + strings.ToLower(v)
				}
				c, warnings := mustParse(t, string(data), vars)
				if len(warnings) != 0 {
					t.Errorf("warnings: %v", warnings)
				}
				if c.TaskSource != forge || c.LLM.Provider != provider || len(c.MCPServers) != 0 ||
					!c.BuiltinTools() || !c.TaskWorkspaces() {
					t.Errorf("task_source %q, provider %q, %d servers, built-in tools %v, workspaces %v", c.TaskSource,
						c.LLM.Provider, len(c.MCPServers), c.BuiltinTools(), c.TaskWorkspaces())
				}
				// The sandbox is left at its defaults, written out in comments.
				if diff := cmp.Diff(config.Default().Sandbox, c.Sandbox); diff != "" {
					t.Errorf("sandbox (-default +starter):\n%s", diff)
				}
				// Uncommented, the commented keys parse too: every one is spelled right.
				uncommented := regexp.MustCompile(`(?m)^(\s*)# (\s*(?:- )?(?:`+strings.Join(commentedKeys, "|")+`):)`).
					ReplaceAllString(string(data), "$1$2")
				if uc, _, err := config.Parse([]byte(uncommented), env(vars)); err != nil {
					t.Errorf("uncommented:\n%v", err)
				} else if len(uc.Workspace.Checks) != 1 || len(uc.Sandbox.Setup) != 1 || len(uc.MCPServers) != 1 {
					t.Errorf("uncommented: checks %q, setup %q, %d servers", uc.Workspace.Checks, uc.Sandbox.Setup, len(uc.MCPServers))
				}
				d := config.Default()
				d.TaskSource = forge
				if got, want := c.Labels(), d.Labels(); got != want {
					t.Errorf("labels %+v, want the defaults %+v", got, want)
				}
				for _, s := range c.Secrets() {
					if strings.Contains(string(data), s) {
						t.Errorf("the file holds a secret's value %q", s)
					}
				}
				// Each placeholder is needed: without its variable the file is refused, naming it.
				_, _, err = config.Parse(data, nil)
				for _, v := range config.StarterVariables(forge, provider) {
					if err == nil || !strings.Contains(err.Error(), "environment variable "+v+" is not set") {
						t.Errorf("parsed without %s: %v", v, err)
					}
				}
			})
		}
	}
}

// commentedKeys are the keys the starter shows in comments.
var commentedKeys = []string{"mcp_servers", "mcp_server_name", "command", "checks", "check_rounds", "sandbox",
	"require", "network", "setup", "command_timeout_seconds", "memory_mb", "max_processes", "max_output_bytes",
	"env", "read_only_paths", "max_file_bytes", "logging", "file", "record"}

func TestStarterRefusesUnknownValues(t *testing.T) {
	for _, tc := range [][2]string{{"jira", "openai"}, {"github", "anthropic"}, {"", ""}} {
		if _, err := config.Starter(tc[0], tc[1], "x.yaml"); err == nil || !strings.Contains(err.Error(), "unknown") {
			t.Errorf("Starter(%q, %q): %v, want an unknown forge or provider", tc[0], tc[1], err)
		}
	}
}

// LoadStore reads what opening the store needs and nothing else: a file
// whose tokens are unset is loaded, one whose state_dir or database.url is
// wrong is not.
func TestLoadStoreNeedsNoTokens(t *testing.T) {
	data, err := config.Starter("github", "openai", "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := dir + "/config.yaml"
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GITHUB_TOKEN", "")
	t.Setenv("DATABASE_URL", "")
	write(string(data) + "tools: {call_timeout_seconds: 0}\n")
	if _, _, err := config.Load(path); err == nil {
		t.Fatal("Load accepted a config without a token")
	}
	c, _, err := config.LoadStore(path)
	if err != nil || c.StateDir != "./data" {
		t.Fatalf("LoadStore: %v, state_dir %v", err, c)
	}
	for _, bad := range [][2]string{
		{"state_dir: ./data", "state_dir: ${NO_SUCH_DIR_VARIABLE}"},
		{"url: ${DATABASE_URL:-}", "url: mysql://h/db"},
		{"state_dir: ./data", "state_dir: ./data\nlease_seconds: 1"},
		{"state_dir: ./data", "state_dir: [./data"},
	} {
		body := strings.Replace(string(data), bad[0], bad[1], 1)
		if body == string(data) {
			t.Fatalf("%q is not in the starter", bad[0])
		}
		write(body)
		if _, _, err := config.LoadStore(path); err == nil {
			t.Errorf("LoadStore accepted %q", bad[1])
		}
	}
}
