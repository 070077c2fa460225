package config_test

import (
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Every forge section has a key for every label role (task.Roles), and
// its default is the role's: the configuration, doctor and the worker
// read the one list.
func TestEverySectionHasEveryLabel(t *testing.T) {
	for _, source := range config.Forges {
		c := config.Default()
		c.TaskSource = source
		l := c.Labels()
		for _, r := range task.Roles {
			if got := l.Of(r.Role); got != r.Default {
				t.Errorf("%s %s = %q, want %q", source, r.Key, got, r.Default)
			}
		}
		where := "owner: acme"
		switch source {
		case task.GitLab:
			where = "group: acme"
		case task.Gitea:
			where = "owner: acme\n  api_url: https://gitea.example.com"
		}
		c, _ = mustParse(t, "task_source: "+source+"\n"+source+":\n  token: t\n  "+where+
			"\n  awaiting_response_label: waiting\nllm:\n  provider: lmstudio\n  lmstudio:\n    model: m\n", nil)
		if got := c.Labels().Of(task.RoleAwaiting); got != "waiting" {
			t.Errorf("%s awaiting_response_label set to waiting reads %q", source, got)
		}
	}
}
