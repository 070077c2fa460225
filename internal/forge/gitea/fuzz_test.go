package gitea_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/gitea"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// FuzzHooksRead feeds the webhook reader any body under each event it
// reads: it never panics, and an event it acts on names a Gitea task of a
// repository and a positive number (the seeds are the emulator's real
// deliveries).
func FuzzHooksRead(f *testing.F) {
	g := forgetest.NewGitea(f)
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	p := g.AddPull("acme/app", forgetest.PullSeed{IssueSeed: forgetest.IssueSeed{Title: "p"}})
	for _, d := range []forgetest.Delivery{g.LabelHook("acme/app", n, "coding agent", "bob", "s"),
		g.LabelHook("acme/app", p, "coding agent", "bob", "s"), g.CommentHook("acme/app", p, "bob", "hi", "s")} {
		f.Add(d.Header.Get("X-Gitea-Event"), d.Body)
	}
	f.Add("issues", []byte(`{"action":"opened","issue":{"number":-1},"repository":{"full_name":""}}`))
	f.Add("issue_comment", []byte(`null`))
	labels := task.Labels{Bot: "coding agent", Paused: "coding agent paused"}
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		r, _ := http.NewRequest(http.MethodPost, "/webhooks/gitea", bytes.NewReader(body))
		r.Header.Set("X-Gitea-Event", event)
		h := gitea.Hooks{}
		if _, reads := h.Reads(r); !reads {
			return
		}
		ev, err := h.Read(r, body, labels)
		if err != nil || ev.What == forge.Nothing {
			return
		}
		if ev.Ref.Forge != task.Gitea || ev.Ref.Repo == "" || ev.Ref.Number <= 0 {
			t.Fatalf("acted on %+v from %q", ev, body)
		}
	})
}
