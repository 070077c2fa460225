package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/coding-agent/coding-agent/internal/task"
)

// forgeSection is a forge's section of the configuration, and what the
// configuration does differently for that forge: its checks, its labels,
// the repositories it watches, its token file, its words in the starter.
// The sections are the one registry of forges here (sections); nothing
// else in the package asks which forge is configured.
type forgeSection interface {
	validate(k *checker)
	labels() task.Labels
	// watches reports whether the section works on repo (its path; id
	// its numeric id, 0 when not known).
	watches(repo string, id int64) bool
	// tokenFile is the token that may come from a file.
	tokenFile() secretFile
	// title is the forge's name in prose; tokenVar the environment
	// variable the starter reads its token from.
	title() string
	tokenVar() string
	// botName is the configured bot_name ("": learned from the forge).
	botName() string
	// scope is the configured repositories (or projects), and the owner
	// (or group) whose are discovered beyond them.
	scope() (repos []string, beyond string)
	// watching says where discovery looks, for the operator.
	watching() []string
	// webhook is the server's secret for the forge's webhooks, and its
	// key in the server section.
	webhook(s Server) (secret Secret, key string)
	// access is where the forge's API is and the token the agent acts
	// with there.
	access() (apiURL string, token Secret)
}

// sections are the forge sections of a configuration, by task_source:
// the fields of Config that are a forgeSection, by their key. A forge's
// field in Config is all that registers it here.
var sections = func() map[string]func(c *Config) forgeSection {
	m := map[string]func(*Config) forgeSection{}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		if !reflect.PointerTo(f.Type).Implements(reflect.TypeFor[forgeSection]()) {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		m[key] = func(c *Config) forgeSection {
			return reflect.ValueOf(c).Elem().Field(i).Addr().Interface().(forgeSection)
		}
	}
	return m
}()

// section is the section of the configured task_source; nil for a value
// Validate refuses.
func (c *Config) section() forgeSection {
	if s, ok := sections[c.TaskSource]; ok {
		return s(c)
	}
	return nil
}

// BotName is the configured forge's bot_name ("": learned from the
// forge).
func (c *Config) BotName() string {
	if s := c.section(); s != nil {
		return s.botName()
	}
	return ""
}

// Scope is the configured forge's repositories (or projects), and the
// owner (or group) whose repositories are discovered beyond them.
func (c *Config) Scope() (repos []string, beyond string) {
	if s := c.section(); s != nil {
		return s.scope()
	}
	return nil, ""
}

// Watching says where discovery looks on the configured forge, for the
// operator: a phrase each.
func (c *Config) Watching() []string {
	if s := c.section(); s != nil {
		return s.watching()
	}
	return nil
}

// Webhook is the server's secret for the configured forge's webhooks,
// and its key in the server section.
func (c *Config) Webhook() (secret Secret, key string) {
	if s := c.section(); s != nil {
		return s.webhook(c.Server)
	}
	return "", ""
}

// Access is where the configured forge's API is and the token the agent
// acts with there.
func (c *Config) Access() (apiURL string, token Secret) {
	if s := c.section(); s != nil {
		return s.access()
	}
	return "", ""
}

// Webhooks are the secrets of every forge whose webhook has one in the
// server section, by forge: the listener serves each.
func (c *Config) Webhooks() map[string]Secret {
	w := map[string]Secret{}
	for name, s := range sections {
		if secret, _ := s(c).webhook(c.Server); secret != "" {
			w[name] = secret
		}
	}
	return w
}

// Labels returns the labels of the active task source (zero for an unknown one).
func (c *Config) Labels() task.Labels {
	if s := c.section(); s != nil {
		return s.labels()
	}
	return task.Labels{}
}

func (g *GitHub) labels() task.Labels { return labelsOf(g) }

func (g *GitLab) labels() task.Labels { return labelsOf(g) }

func (g *GitHub) tokenFile() secretFile { return secretFile{"github.token", &g.Token, g.TokenFile} }

func (g *GitLab) tokenFile() secretFile { return secretFile{"gitlab.token", &g.Token, g.TokenFile} }

func (g *GitHub) title() string    { return "GitHub" }
func (g *GitHub) tokenVar() string { return "GITHUB_TOKEN" }
func (g *GitLab) title() string    { return "GitLab" }
func (g *GitLab) tokenVar() string { return "GITLAB_TOKEN" }

// under reports whether repo is inside the owner or group prefix.
func under(prefix, repo string) bool {
	return prefix != "" && len(repo) > len(prefix)+1 && strings.EqualFold(repo[:len(prefix)+1], prefix+"/")
}

// sameRepo reports whether r, as configured (a path, or GitLab's numeric
// id), names repo (id its numeric id, 0 when not known).
func sameRepo(repo string, id int64) func(r string) bool {
	return func(r string) bool {
		return strings.EqualFold(r, repo) || (id != 0 && r == strconv.FormatInt(id, 10))
	}
}

func (g *GitHub) watches(repo string, id int64) bool {
	if len(g.Repositories) > 0 {
		return slices.ContainsFunc(g.Repositories, sameRepo(repo, id))
	}
	return g.Owner == "" || under(g.Owner, repo)
}

func (g *GitLab) watches(repo string, id int64) bool {
	if len(g.Projects) > 0 {
		return slices.ContainsFunc(g.Projects, sameRepo(repo, id))
	}
	if _, err := strconv.Atoi(g.Group); err == nil || g.Group == "" {
		return true
	}
	return under(g.Group, repo)
}

func (g *GitHub) botName() string { return g.BotName }
func (g *GitLab) botName() string { return g.BotName }

func (g *GitHub) scope() ([]string, string) { return g.Repositories, g.Owner }
func (g *GitLab) scope() ([]string, string) { return g.Projects, g.Group }

func (g *GitHub) watching() []string {
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
}

func (g *GitLab) watching() []string {
	where := append([]string(nil), g.Projects...)
	if g.Group != "" {
		where = append(where, "group "+g.Group)
	}
	return where
}

func (g *GitHub) webhook(s Server) (Secret, string) {
	return s.GitHubWebhookSecret, "github_webhook_secret"
}

func (g *GitLab) webhook(s Server) (Secret, string) {
	return s.GitLabWebhookToken, "gitlab_webhook_token"
}

func (g *GitHub) access() (string, Secret) { return g.APIURL, g.Token }
func (g *GitLab) access() (string, Secret) { return g.APIURL, g.Token }
