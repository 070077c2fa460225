package github_test

import (
	"testing"

	ghforge "github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// FuzzHooksRead fuzzes GitHub's webhook reader (forgetest.FuzzHooks).
func FuzzHooksRead(f *testing.F) {
	g := forgetest.NewGitHub(f)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	p := g.AddPull("acme/app", forgetest.PullSeed{IssueSeed: forgetest.IssueSeed{Title: "p"}})
	forgetest.FuzzHooks(f, ghforge.Hooks{}, task.GitHub, "X-GitHub-Event", g.LabelHook("acme/app", n, "coding agent", "", "s"),
		g.LabelHook("acme/app", p, "coding agent", "", "s"), g.CommentHook("acme/app", p, "bob", "hi", "s"))
}
