package config

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
	if s := c.section(); s != nil {
		return s.watches(repo, id)
	}
	return false
}
