package config

import (
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
}

// sections are the forge sections of a configuration, by task_source, in
// the order Forges lists them.
var sections = map[string]func(c *Config) forgeSection{
	task.GitHub: func(c *Config) forgeSection { return &c.GitHub },
	task.GitLab: func(c *Config) forgeSection { return &c.GitLab },
}

// section is the section of the configured task_source; nil for a value
// Validate refuses.
func (c *Config) section() forgeSection {
	if s, ok := sections[c.TaskSource]; ok {
		return s(c)
	}
	return nil
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
