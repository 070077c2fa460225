package forgetest

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/task"
)

// FuzzHooks fuzzes a forge's webhook reader with seeds (the emulator's
// deliveries) and any body under any event named in header: the reader
// never panics, and an event it acts on names a task of forgeName, a
// repository and a positive number.
func FuzzHooks(f *testing.F, h forge.Hooks, forgeName, header string, seeds ...Delivery) {
	for _, d := range seeds {
		f.Add(d.Header.Get(header), d.Body)
	}
	f.Add("", []byte(`null`))
	labels := task.Labels{Bot: "coding agent", Paused: "coding agent paused"}
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		r, _ := http.NewRequest(http.MethodPost, "/webhooks/"+forgeName, bytes.NewReader(body))
		r.Header.Set(header, event)
		if _, reads := h.Reads(r); !reads {
			return
		}
		ev, err := h.Read(r, body, labels)
		if err != nil || ev.What == forge.Nothing {
			return
		}
		if ev.Ref.Forge != forgeName || ev.Ref.Repo == "" || ev.Ref.Number <= 0 {
			t.Fatalf("acted on %+v from %q", ev, body)
		}
	})
}
