package config

import (
	"slices"

	"github.com/coding-agent/coding-agent/internal/task"
)

// Gitea is the gitea section: a Gitea or Forgejo instance (Codeberg
// runs Forgejo).
type Gitea struct {
	APIURL       string   `yaml:"api_url"`      // the instance's root URL (the API is under /api/v1); required
	Token        Secret   `yaml:"token"`        // an access token of the agent's user; required unless TokenFile
	TokenFile    string   `yaml:"token_file"`   // file holding the token instead (read by Parse into Token)
	Owner        string   `yaml:"owner"`        // user or organisation whose repositories are all watched
	Repositories []string `yaml:"repositories"` // "owner/name" each
	BotName      string   `yaml:"bot_name"`     // the token's login; empty: learned from GET /user

	BotLabel              string `yaml:"bot_label"`               // as in GitHub
	ProcessingLabel       string `yaml:"processing_label"`        // as in GitHub
	DoneLabel             string `yaml:"done_label"`              // as in GitHub
	FailedLabel           string `yaml:"failed_label"`            // as in GitHub
	PausedLabel           string `yaml:"paused_label"`            // as in GitHub
	StoppedLabel          string `yaml:"stopped_label"`           // as in GitHub
	AwaitingResponseLabel string `yaml:"awaiting_response_label"` // as in GitHub
}

func (g *Gitea) validate(k *checker) {
	const when = "required when task_source is gitea"
	if g.APIURL == "" {
		k.add("gitea.api_url", when+": the instance's root URL, such as https://gitea.example.com")
	} else {
		k.url("gitea.api_url", g.APIURL)
	}
	k.required("gitea.token", g.Token.Reveal(), when+" (or gitea.token_file)")
	validateScope(k, "gitea", "organisation", g.Owner, g.Repositories)
	validateLabels(k, "gitea", g.labels())
}

func (g *Gitea) labels() task.Labels { return labelsOf(g) }

func (g *Gitea) watches(repo string, id int64) bool {
	if len(g.Repositories) > 0 && slices.ContainsFunc(g.Repositories, sameRepo(repo, id)) {
		return true
	}
	return g.Owner != "" && under(g.Owner, repo) || len(g.Repositories) == 0 && g.Owner == ""
}

func (g *Gitea) tokenFile() secretFile { return secretFile{"gitea.token", &g.Token, g.TokenFile} }
func (g *Gitea) title() string         { return "Gitea" }
func (g *Gitea) tokenVar() string      { return "GITEA_TOKEN" }
func (g *Gitea) botName() string       { return g.BotName }

func (g *Gitea) scope() ([]string, string) { return g.Repositories, g.Owner }

func (g *Gitea) watching() []string {
	where := append([]string(nil), g.Repositories...)
	if g.Owner != "" {
		where = append(where, "the repositories of "+g.Owner)
	}
	return where
}

func (g *Gitea) webhook(s Server) (Secret, string) {
	return s.GiteaWebhookSecret, "gitea_webhook_secret"
}

func (g *Gitea) access() (string, Secret) { return g.APIURL, g.Token }
