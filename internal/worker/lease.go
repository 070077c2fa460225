package worker

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
)

// errLeaseLost ends a run whose task this process no longer holds: it was
// released, or its lease lapsed (the process could not renew it) and
// another process may have taken it over. Such a run leaves the task as it
// is: its labels, status and comments are the new holder's.
var errLeaseLost = errors.New("this process no longer holds the task's lease (released, or lapsed and taken over)")

// inHand is a task this process works on: its run can be ended when its
// lease is lost.
type inHand struct {
	cancel context.CancelCauseFunc
	// claimed is the renewal round current when its claim was made, plus
	// one; 0 until then, and again once its run has ended (the heartbeat
	// judges only runs in between).
	claimed atomic.Uint64
}

// claim notes that the run's claim is made: renewals that start from now
// on answer for it.
func (w *Worker) claimed(h *inHand) { h.claimed.Store(w.rounds.Load() + 1) }

// holdLeases renews, every third of the lease, the leases of the tasks this
// process runs, until ctx ends. A run whose task the store no longer gives
// it (released, or taken over) is ended with errLeaseLost; so is every run
// in hand once no renewal has succeeded for a whole lease, since any
// process may then take their tasks over.
func (w *Worker) holdLeases(ctx context.Context) {
	lease := w.o.Owner.Lease
	if lease <= 0 {
		return
	}
	t := time.NewTicker(lease / 3)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A run claimed after this round began may be missing from its
		// answer: only runs claimed before it are judged.
		round := w.rounds.Add(1)
		asked := time.Now()
		held, err := w.o.Store.Renew(ctx, w.o.Owner)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.o.Logger.Error("renewing the leases of the tasks in hand", "error", err)
			if time.Since(renewed) >= lease {
				w.dropRuns(round, func(task.Ref) bool { return true },
					"no lease renewal succeeded for a whole lease; another process may take the tasks over")
			}
			continue
		}
		renewed = asked
		w.dropRuns(round, func(ref task.Ref) bool { return !slices.Contains(held, ref) },
			"the store no longer gives this process the task's lease")
	}
}

// dropRuns ends with errLeaseLost the runs under way, claimed before
// renewal round, that lost says lost.
func (w *Worker) dropRuns(round uint64, lost func(ref task.Ref) bool, why string) {
	w.active.Range(func(k, v any) bool {
		ref, h := k.(task.Ref), v.(*inHand)
		if c := h.claimed.Load(); c != 0 && c <= round && lost(ref) {
			w.log(ref).Warn("ending the run: its lease is lost", "why", why)
			h.cancel(errLeaseLost)
		}
		return true
	})
}
