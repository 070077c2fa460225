package gitea_test

import (
	"testing"

	"github.com/coding-agent/coding-agent/internal/forge/gitea"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// FuzzHooksRead fuzzes Gitea's webhook reader (forgetest.FuzzHooks).
func FuzzHooksRead(f *testing.F) {
	g := forgetest.NewGitea(f)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	p := g.AddPull("acme/app", forgetest.PullSeed{IssueSeed: forgetest.IssueSeed{Title: "p"}})
	forgetest.FuzzHooks(f, gitea.Hooks{}, task.Gitea, "X-Gitea-Event", g.LabelHook("acme/app", n, "coding agent", "bob", "s"),
		g.LabelHook("acme/app", p, "coding agent", "bob", "s"), g.CommentHook("acme/app", p, "bob", "hi", "s"))
}
