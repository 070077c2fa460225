package gitlab_test

import (
	"testing"

	glforge "github.com/coding-agent/coding-agent/internal/forge/gitlab"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// FuzzHooksRead fuzzes GitLab's webhook reader (forgetest.FuzzHooks).
func FuzzHooksRead(f *testing.F) {
	g := forgetest.NewGitLab(f)
	g.AddProject("acme/app")
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	m := g.AddMR("acme/app", forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: "m"}})
	forgetest.FuzzHooks(f, glforge.Hooks{}, task.GitLab, "X-Gitlab-Event",
		g.LabelHook("acme/app", forgetest.KindIssue, n, "coding agent", "", "s"),
		g.LabelHook("acme/app", forgetest.KindMergeRequest, m, "coding agent", "", "s"),
		g.NoteHook("acme/app", forgetest.KindMergeRequest, m, "bob", "hi", "s"))
}
