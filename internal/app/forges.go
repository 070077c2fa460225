package app

import (
	"context"
	"fmt"
	"net/http"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forge"
	ghforge "github.com/coding-agent/coding-agent/internal/forge/github"
	glforge "github.com/coding-agent/coding-agent/internal/forge/gitlab"
	"github.com/coding-agent/coding-agent/internal/task"
)

// A forgeKind is one forge the daemon works on: what the app does
// differently for it, in one entry of the one registry that builds its
// adapter (forges). No other code of the app asks which forge is
// configured; what a task's forge means to the rest of the daemon is in
// task.Forges.
type forgeKind struct {
	// open builds the adapter from the configuration, sending through
	// client: the forge (as the daemon and doctor use it), and git's
	// token for it (asked at each command: a GitHub App's changes every
	// hour).
	open func(a *App, client *http.Client) (adapter, func(context.Context) (string, error), error)
	// botName is the configured bot_name ("": learned from the forge).
	botName func(c *config.Config) string
	// gitUser is the user git names with the token as its password.
	gitUser string
	// repositories are the configured repositories (or projects), and the
	// owner (or group) whose are discovered beyond them.
	repositories func(c *config.Config) (repos []string, beyond string)
	// watching says where discovery looks, for the operator.
	watching func(c *config.Config) []string
	// botAdvice is how else to act as a bot user than a dedicated account.
	botAdvice string
	// webhook is the server's secret for the forge's webhooks, and its key.
	webhook    func(s config.Server) config.Secret
	webhookKey string
}

// adapter is a forge's adapter: the forge the daemon works on, and what
// doctor checks and sets up there.
type adapter interface {
	forge.Forge
	forge.Setup
}

// forges are the forges, by task_source.
var forges = map[string]forgeKind{
	task.GitHub: {
		open: func(a *App, client *http.Client) (adapter, func(context.Context) (string, error), error) {
			c := a.cfg.GitHub
			o := ghforge.Options{APIURL: c.APIURL, Token: c.Token.Reveal(), Owner: c.Owner,
				Repositories: c.Repositories, Query: c.Query, HTTPClient: client, Logger: a.Log, Sleep: a.o.Sleep}
			if app := c.App; app != nil {
				key, err := ghforge.ParseAppKey([]byte(app.PrivateKey.Reveal()))
				if err != nil {
					return nil, nil, fmt.Errorf("setting up GitHub: %w", err)
				}
				o.App = &ghforge.App{ID: app.AppID, Key: key, InstallationID: app.InstallationID}
			}
			f, err := ghforge.New(o)
			if err != nil {
				return nil, nil, fmt.Errorf("setting up GitHub: %w", err)
			}
			return f, f.Token, nil
		},
		botName: func(c *config.Config) string { return c.GitHub.BotName },
		gitUser: "x-access-token",
		repositories: func(c *config.Config) ([]string, string) {
			return c.GitHub.Repositories, c.GitHub.Owner
		},
		watching: func(c *config.Config) []string {
			g := c.GitHub
			where := append([]string(nil), g.Repositories...)
			if g.Owner != "" {
				where = append(where, "the repositories of "+g.Owner)
			}
			if len(where) == 0 {
				where = append(where, "every repository")
			}
			if g.Query != "" {
				where[len(where)-1] += fmt.Sprintf(" matching %q", g.Query)
			}
			return where
		},
		botAdvice:  "a GitHub App (github.app)",
		webhook:    func(s config.Server) config.Secret { return s.GitHubWebhookSecret },
		webhookKey: "github_webhook_secret",
	},
	task.GitLab: {
		open: func(a *App, client *http.Client) (adapter, func(context.Context) (string, error), error) {
			c := a.cfg.GitLab
			f, err := glforge.New(glforge.Options{APIURL: c.APIURL, Token: c.Token.Reveal(), Projects: c.Projects,
				Group: c.Group, HTTPClient: client, Logger: a.Log, Sleep: a.o.Sleep})
			if err != nil {
				return nil, nil, fmt.Errorf("setting up GitLab: %w", err)
			}
			return f, func(context.Context) (string, error) { return c.Token.Reveal(), nil }, nil
		},
		botName: func(c *config.Config) string { return c.GitLab.BotName },
		gitUser: "oauth2",
		repositories: func(c *config.Config) ([]string, string) {
			return c.GitLab.Projects, c.GitLab.Group
		},
		watching: func(c *config.Config) []string {
			g := c.GitLab
			where := append([]string(nil), g.Projects...)
			if g.Group != "" {
				where = append(where, "group "+g.Group)
			}
			return where
		},
		botAdvice:  "a project access token (its user is a bot)",
		webhook:    func(s config.Server) config.Secret { return s.GitLabWebhookToken },
		webhookKey: "gitlab_webhook_token",
	},
}

// forgeKind is the configured forge's entry; the configuration's check
// lets no other task_source through.
func (a *App) forgeKind() (forgeKind, error) {
	k, ok := forges[a.cfg.TaskSource]
	if !ok {
		return forgeKind{}, fmt.Errorf("task_source %q is not github or gitlab", a.cfg.TaskSource)
	}
	return k, nil
}
