package config

import (
	"slices"
	"strconv"
	"strings"

	"github.com/coding-agent/coding-agent/internal/task"
)

// Watches reports whether the config works on repo of forge (GitHub
// "owner/name", GitLab the project's path; id its numeric id, 0 when not
// known): a listed repository or project, by path or id; with an owner or
// group, any of its repositories (subgroups too); with only a search
// query, or a group given by its numeric id, any, since a path alone
// cannot tell.
func (c *Config) Watches(forge, repo string, id int64) bool {
	if forge != c.TaskSource {
		return false
	}
	under := func(prefix string) bool {
		return prefix != "" && len(repo) > len(prefix)+1 && strings.EqualFold(repo[:len(prefix)+1], prefix+"/")
	}
	same := func(r string) bool {
		return strings.EqualFold(r, repo) || (id != 0 && r == strconv.FormatInt(id, 10))
	}
	switch forge {
	case task.GitHub:
		if len(c.GitHub.Repositories) > 0 {
			return slices.ContainsFunc(c.GitHub.Repositories, same)
		}
		return c.GitHub.Owner == "" || under(c.GitHub.Owner)
	case task.GitLab:
		if len(c.GitLab.Projects) > 0 {
			return slices.ContainsFunc(c.GitLab.Projects, same)
		}
		g := c.GitLab.Group
		if _, err := strconv.Atoi(g); err == nil || g == "" {
			return true
		}
		return under(g)
	}
	return false
}
