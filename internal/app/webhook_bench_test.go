package app_test

import (
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// BenchmarkWebhookPickup measures label-to-pickup end to end through the
// real listener: `serve` runs with an hour between polls; each op adds the
// bot label to a new GitHub issue on the emulator, delivers the signed
// issues/labeled webhook to the listener over TCP, and ends when the
// scripted model receives the task's first request — the task discovered,
// re-read, its labeler checked, claimed (store and labels), queued, taken
// and its prompt built. The model answers at once, so the figure is the
// daemon's own. The task is then finished outside the timer.
func BenchmarkWebhookPickup(b *testing.B) {
	started := make(chan struct{}, 16)
	e := newEnv(b, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, seed: unlabelled,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			started <- struct{}{}
			return done("Nothing to change.")
		}})
	s := e.serveHTTP(b)
	s.discovered()
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		n := e.gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "Task " + strconv.Itoa(i), Body: "Nothing to do.",
			Author: "alice", Labels: []string{"bug"}})
		b.StartTimer()
		if status := s.send("/webhooks/github", e.gh.LabelHook("acme/app", n, "coding agent", "", hookSecret)); status != http.StatusAccepted {
			b.Fatalf("delivery: status %d", status)
		}
		<-started
		b.StopTimer()
		waitFor(b, "the task to be done", func() bool { return slices.Contains(e.gh.Labels("acme/app", n), "coding agent done") })
		b.StartTimer()
	}
}
