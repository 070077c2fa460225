package app

import (
	"context"
	"errors"
	"strings"

	"github.com/coding-agent/coding-agent/internal/worker"
)

// What serve and run say to the operator besides the tasks' events: log
// records, which obs.Terminal shows as lines on a terminal (the log keeps
// them too). One mechanism: nothing here writes to the terminal itself.

// watched are the attributes that say where the daemon looks for tasks:
// the forge, its repositories or projects (or owner, group, query), and
// the label.
func (a *App) watched() []any {
	c := a.cfg
	return []any{"forge", c.TaskSource, "watching", strings.Join(c.Watching(), ", "), "label", c.Labels().Bot}
}

// mode is how tasks are worked on: planning, or the plain loop.
func (a *App) mode() string {
	if a.cfg.Planning.Enabled {
		return "planning"
	}
	return "plain"
}

// serving says what serve watches, as it begins to.
func (a *App) serving() {
	c := a.cfg
	a.Log.Info("serving", append(a.watched(), "mode", a.mode(), "workers", c.Continuous.Consumer.Workers,
		"interval", c.Continuous.Producer.Interval().String())...)
}

// idleness says, once, that serve has nothing to work on: when a pass
// found nothing and no task is in hand, and again only after a run began.
type idleness struct {
	said  bool
	begun uint64 // the runs begun when it was said
}

// passed is told each discovery pass serve makes, and how many tasks it
// (and the backlog before it) queued or left.
func (i *idleness) passed(a *App, w *worker.Worker, queued int) {
	inHand, begun := w.InHand()
	if queued > 0 || inHand > 0 {
		i.said = false
		return
	}
	if i.said && begun == i.begun {
		return
	}
	i.said, i.begun = true, begun
	a.Log.Info("idle", "label", a.cfg.Labels().Bot, "interval", a.cfg.Continuous.Producer.Interval().String())
}

// stopped says that serve stopped, and why: the signal (the cause of
// ctx), or the error it returns (which the command prints).
func (a *App) stopped(ctx context.Context, err error) {
	reason := "error"
	if err == nil || errors.Is(err, context.Canceled) {
		reason = "done"
		if cause := context.Cause(ctx); cause != nil {
			reason = cause.Error()
		}
	}
	a.Log.Info("serve stopped", "reason", reason)
}
