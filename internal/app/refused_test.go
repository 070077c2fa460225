package app_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// A personal access token revoked while a task runs, on either forge: run
// fails naming the refused credentials, and the task is left queued (not
// failed, not in processing in the store) for a run with working ones, as
// an App whose installation went away leaves it.
func TestRevokedTokenLeavesTheTaskQueued(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range emulatedForges {
		t.Run(fg, func(t *testing.T) {
			e := newEnv(t, setup{forge: fg, kind: task.Issue, provider: config.ProviderOpenAI,
				respond: func(e *env, r llmtest.Received) llmtest.Step {
					if r.N == 1 {
						switch {
						case e.gh != nil:
							e.gh.RevokeToken()
						case e.gt != nil:
							e.gt.RevokeToken()
						default:
							e.gl.RevokeToken()
						}
					}
					return writeThenDone(e, r)
				}})
			err := e.run(context.Background())
			if !errors.Is(err, forge.ErrAuth) {
				t.Fatalf("run = %v, want the forge's refusal of the credentials", err)
			}
			if got := e.record().Status; got != task.Queued {
				t.Errorf("store status %s after the refusal, want queued (resumed by the next run)", got)
			}
			if slices.Contains(e.labels(), "coding agent failed") {
				t.Errorf("labels %v: a refused credential failed the task", e.labels())
			}
		})
	}
}
