package github_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/coding-agent/coding-agent/internal/forge"
	ghforge "github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// FuzzHooksRead feeds the webhook reader any body under each event it
// reads: it never panics, and an event it acts on names a GitHub task of
// a repository and a positive number (the seeds are the emulator's
// deliveries).
func FuzzHooksRead(f *testing.F) {
	g := forgetest.NewGitHub(f)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	p := g.AddPull("acme/app", forgetest.PullSeed{IssueSeed: forgetest.IssueSeed{Title: "p"}})
	for _, d := range []forgetest.Delivery{g.LabelHook("acme/app", n, "coding agent", "", "s"),
		g.LabelHook("acme/app", p, "coding agent", "", "s"), g.CommentHook("acme/app", p, "bob", "hi", "s")} {
		f.Add(d.Header.Get("X-GitHub-Event"), d.Body)
	}
	f.Add("issues", []byte(`{"action":"labeled","issue":{"number":0},"repository":{"full_name":""}}`))
	labels := task.Labels{Bot: "coding agent", Paused: "coding agent paused"}
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		r, _ := http.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(body))
		r.Header.Set("X-GitHub-Event", event)
		h := ghforge.Hooks{}
		if _, reads := h.Reads(r); !reads {
			return
		}
		ev, err := h.Read(r, body, labels)
		if err != nil || ev.What == forge.Nothing {
			return
		}
		if ev.Ref.Forge != task.GitHub || ev.Ref.Repo == "" || ev.Ref.Number <= 0 {
			t.Fatalf("acted on %+v from %q", ev, body)
		}
	})
}
