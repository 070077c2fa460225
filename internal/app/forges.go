package app

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forge"
	giteaforge "github.com/coding-agent/coding-agent/internal/forge/gitea"
	ghforge "github.com/coding-agent/coding-agent/internal/forge/github"
	glforge "github.com/coding-agent/coding-agent/internal/forge/gitlab"
	"github.com/coding-agent/coding-agent/internal/server"
)

// A forgeKind is one forge the daemon works on, in the one registry that
// builds adapters (forges): what its adapter says of itself (forge.Kind)
// and how the adapter is opened from the configuration. What the
// configuration says of a forge is in its section (config.Config's
// BotName, Scope, Watching, Webhook); what a task's forge means to the
// rest of the daemon is in task.Forges. No other code of the app asks
// which forge is configured.
type forgeKind struct {
	forge.Kind
	// open builds the adapter from the configuration, sending through
	// client: the forge (as the daemon and doctor use it), and git's
	// token for it (asked at each command: a GitHub App's changes every
	// hour).
	open func(a *App, client *http.Client) (adapter, func(context.Context) (string, error), error)
}

// adapter is a forge's adapter: the forge the daemon works on, and what
// doctor checks and sets up there.
type adapter interface {
	forge.Forge
	forge.Setup
}

// forges are the forges, by task_source: a line each.
var forges = registry(
	forgeKind{ghforge.Kind, openGitHub},
	forgeKind{glforge.Kind, openGitLab},
	forgeKind{giteaforge.Kind, openGitea},
)

func registry(kinds ...forgeKind) map[string]forgeKind {
	m := make(map[string]forgeKind, len(kinds))
	for _, k := range kinds {
		m[k.Name] = k
	}
	return m
}

func openGitHub(a *App, client *http.Client) (adapter, func(context.Context) (string, error), error) {
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
}

func openGitLab(a *App, client *http.Client) (adapter, func(context.Context) (string, error), error) {
	c := a.cfg.GitLab
	f, err := glforge.New(glforge.Options{APIURL: c.APIURL, Token: c.Token.Reveal(), Projects: c.Projects,
		Group: c.Group, HTTPClient: client, Logger: a.Log, Sleep: a.o.Sleep})
	if err != nil {
		return nil, nil, fmt.Errorf("setting up GitLab: %w", err)
	}
	return f, func(context.Context) (string, error) { return c.Token.Reveal(), nil }, nil
}

func openGitea(a *App, client *http.Client) (adapter, func(context.Context) (string, error), error) {
	c := a.cfg.Gitea
	f, err := giteaforge.New(giteaforge.Options{APIURL: c.APIURL, Token: c.Token.Reveal(), Repositories: c.Repositories,
		Owner: c.Owner, HTTPClient: client, Logger: a.Log, Sleep: a.o.Sleep})
	if err != nil {
		return nil, nil, fmt.Errorf("setting up Gitea: %w", err)
	}
	return f, func(context.Context) (string, error) { return c.Token.Reveal(), nil }, nil
}

// webhooks are the forges' webhooks the server section has a secret for.
func (a *App) webhooks() []server.Webhook {
	var w []server.Webhook
	for name, secret := range a.cfg.Webhooks() {
		if k, ok := forges[name]; ok {
			w = append(w, server.Webhook{Forge: name, Secret: secret.Reveal(), Hooks: k.Hooks})
		}
	}
	slices.SortFunc(w, func(x, y server.Webhook) int { return strings.Compare(x.Forge, y.Forge) })
	return w
}

// forgeKind is the configured forge's entry; the configuration's check
// lets no other task_source through.
func (a *App) forgeKind() (forgeKind, error) {
	k, ok := forges[a.cfg.TaskSource]
	if !ok {
		return forgeKind{}, fmt.Errorf("task_source %q is not %s", a.cfg.TaskSource, config.ForgeChoice())
	}
	return k, nil
}
