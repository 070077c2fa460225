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
// builds adapters (forges): what its adapter says of itself (forge.Kind),
// and how the app opens an adapter that needs more than an access token
// (open). What the configuration says of a forge is in its section
// (config.Config's Access, BotName, Scope, Watching, Webhook); what a
// task's forge means to the rest of the daemon is in task.Forges. No other
// code of the app asks which forge is configured.
type forgeKind struct {
	forge.Kind
	// open, when set, builds the adapter instead of Kind.Open, sending
	// through client: the forge (as the daemon and doctor use it), and
	// git's token for it (asked at each command: a GitHub App's changes
	// every hour).
	open func(a *App, client *http.Client) (forge.Adapter, func(context.Context) (string, error), error)
}

// forges are the forges, by task_source: a line each.
var forges = registry(
	forgeKind{Kind: ghforge.Kind, open: openGitHub},
	forgeKind{Kind: glforge.Kind},
	forgeKind{Kind: giteaforge.Kind},
)

func registry(kinds ...forgeKind) map[string]forgeKind {
	m := make(map[string]forgeKind, len(kinds))
	for _, k := range kinds {
		m[k.Name] = k
	}
	return m
}

// openForge builds the configured forge's adapter, and git's token for it.
func (a *App) openForge(k forgeKind, client *http.Client) (forge.Adapter, func(context.Context) (string, error), error) {
	if k.open != nil {
		return k.open(a, client)
	}
	apiURL, token := a.cfg.Access()
	repos, owner := a.cfg.Scope()
	f, err := k.Open(forge.Access{APIURL: apiURL, Token: token.Reveal(), Repositories: repos, Owner: owner,
		HTTPClient: client, Logger: a.Log, Sleep: a.o.Sleep})
	if err != nil {
		return nil, nil, fmt.Errorf("setting up %s: %w", k.Name, err)
	}
	return f, func(context.Context) (string, error) { return token.Reveal(), nil }, nil
}

func openGitHub(a *App, client *http.Client) (forge.Adapter, func(context.Context) (string, error), error) {
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
