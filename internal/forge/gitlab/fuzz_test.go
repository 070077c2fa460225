package gitlab_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/coding-agent/coding-agent/internal/forge"
	glforge "github.com/coding-agent/coding-agent/internal/forge/gitlab"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// FuzzHooksRead feeds the webhook reader any body under each hook it
// reads: it never panics, and an event it acts on names a GitLab task of
// a project and a positive iid (the seeds are the emulator's deliveries).
func FuzzHooksRead(f *testing.F) {
	g := forgetest.NewGitLab(f)
	g.AddProject("acme/app")
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t"})
	m := g.AddMR("acme/app", forgetest.MRSeed{IssueSeed: forgetest.IssueSeed{Title: "m"}})
	for _, d := range []forgetest.Delivery{g.LabelHook("acme/app", forgetest.KindIssue, n, "coding agent", "", "s"),
		g.LabelHook("acme/app", forgetest.KindMergeRequest, m, "coding agent", "", "s"),
		g.NoteHook("acme/app", forgetest.KindMergeRequest, m, "bob", "hi", "s")} {
		f.Add(d.Header.Get("X-Gitlab-Event"), d.Body)
	}
	f.Add("Note Hook", []byte(`{"object_kind":"note","project":{"path_with_namespace":"a/b"},"object_attributes":{"noteable_type":"Issue"},"issue":{"iid":0}}`))
	labels := task.Labels{Bot: "coding agent", Paused: "coding agent paused"}
	f.Fuzz(func(t *testing.T, hook string, body []byte) {
		r, _ := http.NewRequest(http.MethodPost, "/webhooks/gitlab", bytes.NewReader(body))
		r.Header.Set("X-Gitlab-Event", hook)
		h := glforge.Hooks{}
		if _, reads := h.Reads(r); !reads {
			return
		}
		ev, err := h.Read(r, body, labels)
		if err != nil || ev.What == forge.Nothing {
			return
		}
		if ev.Ref.Forge != task.GitLab || ev.Ref.Repo == "" || ev.Ref.Number <= 0 {
			t.Fatalf("acted on %+v from %q", ev, body)
		}
	})
}
