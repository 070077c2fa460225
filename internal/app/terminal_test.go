package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// On a terminal, `run` tells the operator what it does, one line per event
// of the task, ending with the task's link; the log keeps the rest.
func TestTerminalFollowsARun(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	var term strings.Builder
	if err := e.runWith(context.Background(), app.Options{Terminal: &term}); err != nil {
		t.Fatal(err)
	}
	got := term.String()
	t.Logf("terminal:\n%s", got)
	url := e.gh.URL() + "/acme/app/issues/1"
	for _, w := range []string{"github:acme/app#1 claimed", "github:acme/app#1 working: Add a greeting file",
		"github:acme/app#1   step: fs/write_file", "github:acme/app#1 done " + url} {
		if !strings.Contains(got, w) {
			t.Errorf("the terminal lacks %q", w)
		}
	}
	if n := strings.Count(got, "\n"); n != 4 {
		t.Errorf("%d lines, want 4 (claimed, working, one step, done)", n)
	}
}

// Someone trying the agent with their own token labels their own issue:
// they are told, on the terminal, that what they write there is not heard.
func TestOwnAccountIsWarnedAbout(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		seed: func(s *forgetest.IssueSeed) { s.Author = "coding-agent-bot" }})
	var term strings.Builder
	if err := e.runWith(context.Background(), app.Options{Terminal: &term}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(term.String(), "github:acme/app#1 warning: the task's author is the account the agent acts as") {
		t.Errorf("no warning on the terminal:\n%s", term.String())
	}
}
