package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
)

// PutBack puts ref up again (the bot label) when it is in processing and no
// process of this store holds it, for an operator: `release` (force) and
// `resume`. A task taken on the forge by a process killed before its store
// claimed it is such a task, and so, with stores of their own, is a task
// another host holds. With force the hold of a holder on the forge is
// revoked whatever its last heartbeat (its run stops at its next one), as
// `release` frees a task from its holder on any host. Without, a task that
// a holder keeps, or that was taken less than a lease ago, is left, since
// its taker may be between the take and the claim; so is any task when
// this host cannot tell (no forge lease, no shared store). It reports what it did,
// or why it did nothing, in a sentence, and whether it put the task up.
func (w *Worker) PutBack(ctx context.Context, ref task.Ref, force bool) (string, bool, error) {
	ls := w.o.Labels
	t, err := w.o.Forge.Get(ctx, ref)
	if err != nil {
		return "", false, fmt.Errorf("reading %s: %w", ref, err)
	}
	switch {
	case t.State != "open":
		return "it is closed", false, nil
	case ls.Processing == "" || !t.HasLabel(ls.Processing):
		return fmt.Sprintf("it is not in processing (no %q label)", ls.Processing), false, nil
	}
	h, err := w.seeHold(ctx, t)
	if err != nil {
		return "", false, err
	}
	at := func(t time.Time) string { return t.UTC().Format(time.DateTime + " UTC") }
	switch {
	case h.later != "":
		return fmt.Sprintf("it carries %q besides %q: it is not a task left in processing (a new request, a pause or a stop "+
			"is pending, or its round ended without removing %q)", h.later, ls.Processing, ls.Processing), false, nil
	case h.inHand:
		return fmt.Sprintf("a process of this store holds it (%s, pid %d on %s)", h.row.Status, h.row.PID, h.row.Host), false, nil
	case !force && h.lease <= 0:
		return "no process of this store holds it, and this host cannot tell whether a host with a store of its own does " +
			"(forge_lease_seconds is 0 and the store is not shared): `coding-agent release` puts it up again once you know " +
			"its host is gone", false, nil
	case !force && h.holder && w.o.Now().Sub(h.last) < h.lease:
		return fmt.Sprintf("host %s holds it on the forge (last heartbeat %s); it is put up again only once that host "+
			"stays silent for %s (`coding-agent release` revokes its hold now)", h.host, at(h.last), h.lease), false, nil
	case !force && !h.holder && w.o.Now().Sub(h.last) < h.lease:
		return fmt.Sprintf("it changed last at %s and no holder shows: if its taker is gone, any host puts it up again from %s "+
			"on (`coding-agent release` does it now)", at(h.last), at(h.last.Add(h.lease))), false, nil
	}
	put, err := w.putUp(ctx, ref, h)
	if err != nil {
		return "", false, err
	}
	if !put {
		return "another host put it up again, or its holder ended its round, meanwhile", false, nil
	}
	was := "no holder on the forge"
	if h.holder {
		was = fmt.Sprintf("host %s's hold on the forge (last heartbeat %s) revoked: its run stops at its next heartbeat", h.host, at(h.last))
	}
	w.log(ref).Warn("a task in processing that no process of this store held was put up again", "holder", h.host, "force", force)
	return fmt.Sprintf("put up again (the label %q), for the next pass of any host to take: it was in processing, held by no "+
		"process of this store, %s", ls.Bot, was), true, nil
}
