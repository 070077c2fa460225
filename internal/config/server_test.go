package config_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/config"
)

func TestServerAbsentMeansNoListener(t *testing.T) {
	c, _ := mustParse(t, head+gh, nil)
	if c.Server != (config.Server{KeepEventsDays: config.DefaultKeepEventsDays}) {
		t.Fatalf("server without the section: %+v", c.Server)
	}
}

func TestServerSection(t *testing.T) {
	c, warnings := mustParse(t, head+gh+`server:
  listen: 127.0.0.1:8080
  github_webhook_secret: ${HOOK_SECRET}
  gitlab_webhook_token: gl-hook-token
  ui_token: ${UI_TOKEN}
  public_url: https://agent.example.com/
`, map[string]string{"HOOK_SECRET": "s3cret-hook", "UI_TOKEN": "ui-token-0123456789abcdef"})
	if len(warnings) != 0 {
		t.Fatalf("warnings %v", warnings)
	}
	want := config.Server{Listen: "127.0.0.1:8080", GitHubWebhookSecret: "s3cret-hook", GitLabWebhookToken: "gl-hook-token",
		UIToken: "ui-token-0123456789abcdef", PublicURL: "https://agent.example.com/", KeepEventsDays: config.DefaultKeepEventsDays}
	if diff := cmp.Diff(want, c.Server); diff != "" {
		t.Fatalf("server (-want +got):\n%s", diff)
	}
	for _, s := range []string{"s3cret-hook", "gl-hook-token", "ui-token-0123456789abcdef"} {
		if !slices.Contains(c.Secrets(), s) {
			t.Errorf("%q is not among the secrets redacted", s)
		}
	}
}

func TestServerProblems(t *testing.T) {
	for src, want := range map[string]config.Problems{
		"server:\n  listen: localhost\n": {{Path: "server.listen", Msg: "must be host:port or :port, e.g. 127.0.0.1:8080", Line: 7}},
		"server:\n  listen: :http\n":     {{Path: "server.listen", Msg: "the port must be a number from 0 to 65535", Line: 7}},
		"server:\n  listen: :70000\n":    {{Path: "server.listen", Msg: "the port must be a number from 0 to 65535", Line: 7}},
		"server:\n  github_webhook_secret: s\n": {{Path: "server.listen",
			Msg: "required when a webhook secret or token is set: the address to listen on, e.g. 127.0.0.1:8080"}},
		"server:\n  ui_token: short\n": {
			{Path: "server.listen", Msg: "required when server.ui_token is set: the address to serve the task pages on, e.g. 127.0.0.1:8080"},
			{Path: "server.ui_token", Msg: "must be at least 16 characters: it is all that guards the task pages", Line: 7},
		},
		"server:\n  listen: :8080\n  public_url: agent.example.com\n  keep_events_days: 0\n": {
			{Path: "server.keep_events_days", Msg: "must be from 1 to 3650", Line: 9},
			{Path: "server.public_url", Msg: "must be an http or https URL, e.g. https://agent.example.com", Line: 8},
		},
		"server:\n  listen: 8080\n  gitlab_webhook_tokn: t\n": {
			{Path: "server.gitlab_webhook_tokn", Msg: `unknown key (did you mean "gitlab_webhook_token"?)`, Line: 8},
			{Path: "server.listen", Msg: "must be host:port or :port, e.g. 127.0.0.1:8080", Line: 7},
		},
	} {
		if diff := cmp.Diff(want, problems(t, head+gh+src, nil)); diff != "" {
			t.Errorf("%q: problems (-want +got):\n%s", src, diff)
		}
	}
	for _, ok := range []string{":8080", "0.0.0.0:8080", "[::1]:9090", "127.0.0.1:0"} {
		mustParse(t, head+gh+"server:\n  listen: \""+ok+"\"\n", nil)
	}
}

func TestWatches(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   config.Config
		forge string
		repo  string
		id    int64
		want  bool
	}{
		{"listed", config.Config{TaskSource: "github", GitHub: config.GitHub{Repositories: []string{"acme/app"}}}, "github", "ACME/App", 0, true},
		{"not listed", config.Config{TaskSource: "github", GitHub: config.GitHub{Repositories: []string{"acme/app"}}}, "github", "acme/other", 0, false},
		{"the other forge", config.Config{TaskSource: "github", GitHub: config.GitHub{Repositories: []string{"acme/app"}}}, "gitlab", "acme/app", 0, false},
		{"owner's", config.Config{TaskSource: "github", GitHub: config.GitHub{Owner: "acme"}}, "github", "acme/anything", 0, true},
		{"owner's prefix only", config.Config{TaskSource: "github", GitHub: config.GitHub{Owner: "acme"}}, "github", "acme-corp/app", 0, false},
		{"a query alone", config.Config{TaskSource: "github", GitHub: config.GitHub{Query: "org:acme"}}, "github", "x/y", 0, true},
		{"project by id", config.Config{TaskSource: "gitlab", GitLab: config.GitLab{Projects: []string{"42"}}}, "gitlab", "grp/app", 42, true},
		{"project by path", config.Config{TaskSource: "gitlab", GitLab: config.GitLab{Projects: []string{"grp/app"}}}, "gitlab", "grp/app", 7, true},
		{"another project", config.Config{TaskSource: "gitlab", GitLab: config.GitLab{Projects: []string{"grp/app", "9"}}}, "gitlab", "grp/other", 8, false},
		{"group's subgroup", config.Config{TaskSource: "gitlab", GitLab: config.GitLab{Group: "grp"}}, "gitlab", "grp/sub/app", 3, true},
		{"another group", config.Config{TaskSource: "gitlab", GitLab: config.GitLab{Group: "grp"}}, "gitlab", "grp2/app", 3, false},
		{"group by id", config.Config{TaskSource: "gitlab", GitLab: config.GitLab{Group: "12"}}, "gitlab", "any/app", 3, true},
	} {
		if got := c.cfg.Watches(c.forge, c.repo, c.id); got != c.want {
			t.Errorf("%s: Watches(%s, %s, %d) = %v, want %v", c.name, c.forge, c.repo, c.id, got, c.want)
		}
	}
}
