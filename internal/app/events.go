package app

import (
	"context"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/ui"
)

// record records an event of a task for its page (server.ui_token):
// redacted as the log is, stamped with this host. A failure is logged: a
// page is never worth a task.
func (a *App) record(ctx context.Context, ref task.Ref, e store.Event) {
	e.Title, e.Args, e.Text = a.redact(e.Title), a.redact(e.Args), a.redact(e.Text)
	e.Host = a.self.Host
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := a.store.AddEvent(ctx, ref, e); err != nil {
		a.Log.Warn("recording an event for the task's page", "task", ref.String(), "kind", e.Kind, "error", err)
	}
}

// pruneEvents drops the events older than server.keep_events_days; a
// failure is logged, and the next prune tries again.
func (a *App) pruneEvents(ctx context.Context) {
	now := time.Now
	if a.o.Clock != nil {
		now = a.o.Clock
	}
	before := now().Add(-a.cfg.Server.KeepEvents())
	n, err := a.store.PruneEvents(ctx, before)
	if err != nil {
		if ctx.Err() == nil {
			a.Log.Warn("pruning the tasks' events", "error", err)
		}
		return
	}
	if n > 0 {
		a.Log.Info("pruned the tasks' events", "events", n, "older_than", before)
	}
}

// page is where a task's page is for the people on the forge: under
// server.public_url when the pages are served (server.ui_token); nil
// without.
func (a *App) page() func(task.Ref) string {
	s := a.cfg.Server
	if s.UIToken == "" || s.PublicURL == "" || s.Listen == "" {
		return nil
	}
	base := strings.TrimRight(s.PublicURL, "/")
	return func(ref task.Ref) string { return base + ui.Path(ref) }
}
