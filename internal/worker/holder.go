package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Hosts each with a store of their own share nothing but the forge, so a
// host's hold on a task lives there too (Options.ForgeLease): the host that
// took a task posts a holder comment naming it and the time, and edits it
// (the time) every ForgeLease/3 while the task is queued or running in its
// store (Beat). Every host watches the tasks in processing that it does not
// hold (reclaim): one whose newest holder comment says no heartbeat for
// ForgeLease (or, with no holder comment, that has not changed for that
// long) is left; the watcher that deletes that comment (or, with none,
// takes the processing label) puts the task up again with the bot label,
// for the hosts to take as any request. The times are the hosts' clocks:
// they must agree to well within ForgeLease (NTP). A host runs a task only
// while the newest holder comment names it (holds), and a beat that finds
// its comment deleted stops its run. The comment is deleted once the round
// leaves processing (unhold), and follows a takeover in a store shared by
// hosts of different names (moveHold). Hosts that share one store
// (Options.SharedStore) need no comment: the store says who holds a task,
// and one in processing that it does not hold is left.

// errHoldLost is the cause a run is stopped with when its host no longer
// holds the task on the forge.
var errHoldLost = errors.New("this host no longer holds the task on the forge")

// beatsPerLease is how many heartbeats fit in a forge lease: two may be
// missed (a slow forge, a long pause of the process) before watchers see
// the task as left.
const beatsPerLease = 3

// holding is what this process knows of holds on the forge.
type holding struct {
	mu sync.Mutex
	m  map[task.Ref]held
}

// held is this host's hold on one task, as this process knows it.
type held struct {
	// id is this host's holder comment; 0: the task was taken and its
	// comment could not be posted yet (the beats try again).
	id int64
	// at is when this process last posted or edited it (or took the task,
	// with id 0), by its clock: until a lease after it, no watcher can
	// have put the task up.
	at time.Time
}

func (h *holding) get(ref task.Ref) (held, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd, ok := h.m[ref]
	return hd, ok
}

func (h *holding) set(ref task.Ref, hd held) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[task.Ref]held{}
	}
	h.m[ref] = hd
}

func (h *holding) drop(ref task.Ref) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, ref)
}

// BeatInterval is how often Beat should run: ForgeLease/3; 0 when the
// forge lease is off.
func (w *Worker) BeatInterval() time.Duration {
	return w.o.ForgeLease / beatsPerLease
}

// holderBody renders this host's holder comment as of now.
func (w *Worker) holderBody() (string, error) {
	return w.o.Lang.Holder(w.o.Owner.Host, w.o.Now(), w.BeatInterval(), w.o.ForgeLease)
}

// postHolder posts this host's holder comment on a task it took. A
// failure is logged, and the task stays this process's for a lease from
// now (watchers see it taken that long ago, with no holder comment), in
// which the beats try to post it again; a run that cannot post it for a
// whole lease is let go (beat), as a watcher may then put it up.
func (w *Worker) postHolder(ctx context.Context, ref task.Ref) {
	if w.o.ForgeLease <= 0 {
		return
	}
	now := w.o.Now()
	body, err := w.holderBody()
	if err == nil {
		var c task.Comment
		if c, err = w.o.Forge.PostComment(ctx, ref, body); err == nil {
			w.hold.set(ref, held{id: c.ID, at: now})
			return
		}
	}
	if _, known := w.hold.get(ref); !known {
		w.hold.set(ref, held{at: now})
	}
	logFailure(ctx, w.log(ref), "posting the holder comment; the next heartbeat tries again", "error", err)
}

// newestHolder is the newest holder comment the bot posted on ref, and
// what it says.
func (w *Worker) newestHolder(ctx context.Context, ref task.Ref) (task.Comment, report.Holding, bool, error) {
	comments, err := w.o.Forge.Comments(ctx, ref)
	if err != nil {
		return task.Comment{}, report.Holding{}, false, fmt.Errorf("reading the holder comment of %s: %w", ref, err)
	}
	bot, err := w.botName(ctx)
	if err != nil {
		return task.Comment{}, report.Holding{}, false, err
	}
	for i := len(comments) - 1; i >= 0; i-- {
		c := comments[i]
		if c.Author != bot {
			continue
		}
		if h, ok := report.HolderOf(c.Body); ok {
			return c, h, true, nil
		}
	}
	return task.Comment{}, report.Holding{}, false, nil
}

// holds reports whether this host holds ref on the forge: with the forge
// lease on, the newest holder comment must name it. Without one, the task
// is not this host's either: it took the task and died before posting,
// or its comment was deleted by a watcher that put the task up again. A
// hold this process posted, edited or took less than a lease ago is its
// own without asking the forge: no watcher puts a task up before that (so
// a run just claimed does not depend on reading the comments).
func (w *Worker) holds(ctx context.Context, ref task.Ref) (bool, string, error) {
	if w.o.ForgeLease <= 0 {
		return true, "", nil
	}
	if hd, ok := w.hold.get(ref); ok && w.o.Now().Sub(hd.at) < w.o.ForgeLease {
		return true, "", nil
	}
	c, h, ok, err := w.newestHolder(ctx, ref)
	if err != nil {
		return false, "", err
	}
	if !ok {
		return false, "the task has no holder comment of this host on the forge", nil
	}
	if h.Host != w.o.Owner.Host {
		return false, fmt.Sprintf("host %s holds the task on the forge", h.Host), nil
	}
	w.hold.set(ref, held{id: c.ID, at: h.Beat})
	return true, "", nil
}

// beatHolds runs Beat every BeatInterval until ctx ends; a failed beat is
// logged, and the next one tries again.
func (w *Worker) beatHolds(ctx context.Context) {
	every := w.BeatInterval()
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := w.Beat(ctx); err != nil && ctx.Err() == nil {
			w.o.Logger.Error("heartbeat of the holds on the forge failed; the next one tries again", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Beat edits the holder comment of every task this process holds (it
// claimed it last, and its row says queued or running), so that watchers
// see it alive: another process sharing the store, of this host or
// another, beats its own, and a row a dead process left is beaten once
// Backlog takes it over. A holder comment that is gone means a watcher
// put the task up again: its run in hand is stopped and its row says
// stopped, for its next run to find it is not this host's. It returns a
// failure of the store.
func (w *Worker) Beat(ctx context.Context) error {
	if w.o.ForgeLease <= 0 {
		return nil
	}
	recs, err := w.o.Store.List(ctx)
	if err != nil {
		return failure(fmt.Errorf("listing the tasks to beat for: %w", err))
	}
	for _, r := range recs {
		if ctx.Err() != nil {
			return nil
		}
		if !w.ours(r) {
			// Another process's, of this host or another, or a dead
			// one's: its holder beats it, or Backlog takes it over.
			continue
		}
		if err := failure(w.beat(ctx, r.Ref)); err != nil {
			return err
		}
	}
	return nil
}

func (w *Worker) beat(ctx context.Context, ref task.Ref) error {
	log := w.log(ref)
	hd, known := w.hold.get(ref)
	if known && hd.id == 0 {
		// Taken, its holder comment not posted yet.
		if w.o.Now().Sub(hd.at) >= w.o.ForgeLease {
			return w.lost(ctx, ref, "its holder comment could not be posted for a whole forge lease: another host may have put it up")
		}
		w.postHolder(ctx, ref)
		return nil
	}
	if !known {
		ok, why, err := w.holds(ctx, ref)
		if err != nil {
			log.Warn("heartbeat: reading the holder comment", "error", err)
			return nil
		}
		if !ok {
			return w.lost(ctx, ref, why)
		}
		hd, _ = w.hold.get(ref)
	}
	now := w.o.Now()
	body, err := w.holderBody()
	if err == nil {
		err = w.o.Forge.EditComment(ctx, ref, hd.id, body)
	}
	if err == nil {
		w.hold.set(ref, held{id: hd.id, at: now})
	}
	if errors.Is(err, forge.ErrNotFound) {
		return w.lost(ctx, ref, "its holder comment was deleted: another host put it up again")
	}
	if err != nil {
		log.Warn("heartbeat: editing the holder comment", "error", err)
	}
	return nil
}

// lost lets go of a task whose hold on the forge is gone: its run in hand
// stops (and, interrupted, comes back to process, which finds it is not
// this host's); otherwise its row says stopped, why in its error.
func (w *Worker) lost(ctx context.Context, ref task.Ref, why string) error {
	w.hold.drop(ref)
	w.log(ref).Warn("this host no longer holds the task; letting it go", "reason", why)
	if v, ok := w.active.Load(ref); ok {
		v.(*inHand).cancel(fmt.Errorf("%w: %s", errHoldLost, why))
		return nil
	}
	return w.setStatus(ctx, ref, task.Stopped, "let go: "+why)
}

// reclaim watches the tasks in processing this host does not hold, puts
// up again (the bot label) those left by their holder (watchHolder), and
// returns them, for the pass to claim as any request. Failures are logged;
// the next pass tries again.
func (w *Worker) reclaim(ctx context.Context) []task.Ref {
	if (w.o.ForgeLease <= 0 && !w.o.SharedStore) || w.o.Labels.Processing == "" {
		return nil
	}
	found, err := w.o.Forge.Discover(ctx, w.o.Labels.Processing)
	if err != nil {
		logFailure(ctx, w.o.Logger, "discovering tasks in processing to watch their holders", "error", err)
		return nil
	}
	var up []task.Ref
	for _, t := range found {
		if ctx.Err() != nil {
			return up
		}
		put, err := w.watchHolder(ctx, t)
		if err != nil {
			logFailure(ctx, w.log(t.Ref), "watching the holder of a task", "error", err)
		}
		if put {
			up = append(up, t.Ref)
		}
	}
	return up
}

// watchHolder puts t, in processing, up again when its holder left it.
// Who holds a task is known in one of two places: a store every host
// shares (Options.SharedStore), which holds it while a row says queued or
// running there (its lease and Backlog's takeovers decide between hosts),
// or, with stores of their own, the forge (the holder comment, ForgeLease).
// A task that the shared store does not hold in hand, or whose newest
// holder comment is a lease old, or that has no holder comment and has not
// changed for a lease, is left: its holder died, possibly between the
// forge's take and the store's claim (which leaves no row anywhere and no
// holder comment).
func (w *Worker) watchHolder(ctx context.Context, t task.Task) (bool, error) {
	h, err := w.seeHold(ctx, t)
	if err != nil {
		return false, err
	}
	if h.later != "" || h.inHand && (w.o.SharedStore || h.row.Host == w.o.Owner.Host) {
		// Not left in processing; held in the store every host shares
		// (its lease decides); or this host's (its beat keeps it).
		return false, nil
	}
	silent := w.o.Now().Sub(h.last)
	if h.lease <= 0 || silent < h.lease {
		return false, nil
	}
	put, err := w.putUp(ctx, t.Ref, h)
	if put {
		w.log(t.Ref).Warn("the task's holder left it; put up again", "holder", cmp.Or(h.host, "none"), "silent_for", silent.String())
	}
	return put, err
}

// seen is what a host can see of who holds a task in processing.
type seen struct {
	// later is a label t carries that says it is not a task left in
	// processing: the bot label (asked for again), or that of a later
	// state (done, failed, paused, stopped, awaiting: a transition that
	// could not remove processing, or a pause or stop asked for
	// meanwhile). "" for none.
	later string
	// row is this store's row of the task (zero for none); inHand: it
	// says queued or running.
	row    store.Record
	inHand bool
	// comment is the newest holder comment when holder (ForgeLease),
	// naming host.
	comment task.Comment
	holder  bool
	host    string
	// last is the last sign of a holder: the holder comment's beat, else
	// the task's last change; lease is how long after it the task is
	// left: ForgeLease, else the shared store's lease; 0 when this host
	// cannot tell (neither).
	last  time.Time
	lease time.Duration
}

// seeHold reads what the store and the forge say of who holds t.
func (w *Worker) seeHold(ctx context.Context, t task.Task) (seen, error) {
	ls := w.o.Labels
	var h seen
	for _, r := range task.Roles {
		if l := ls.Of(r.Role); r.Role != task.RoleProcessing && l != "" && t.HasLabel(l) {
			h.later = l
			return h, nil
		}
	}
	rec, err := w.o.Store.Get(ctx, t.Ref)
	if err := failure(err); err != nil {
		return h, err
	}
	if err == nil {
		h.row, h.inHand = rec, rec.Status == task.Queued || rec.Status == task.Running
	}
	h.last = t.UpdatedAt
	switch {
	case w.o.ForgeLease > 0:
		h.lease = w.o.ForgeLease
		var hd report.Holding
		if h.comment, hd, h.holder, err = w.newestHolder(ctx, t.Ref); err != nil {
			return h, err
		}
		if h.holder {
			h.host, h.last = hd.Host, hd.Beat
		}
	case w.o.SharedStore:
		// No row in hand there: nobody holds the task, unless its taker
		// is between the forge's take and the store's claim, which the
		// store's lease outlasts.
		h.lease = w.o.Owner.Lease
	}
	return h, nil
}

// putUp puts a task in processing up again for any host to take, as h
// saw it. Of the hosts doing so at once, the one that revokes the hold does:
// deleting the holder comment, or with none, taking the processing label
// (the bot label's take then adds it again). It reports false when another
// revoked it first.
func (w *Worker) putUp(ctx context.Context, ref task.Ref, h seen) (bool, error) {
	var err error
	if h.holder {
		err = w.o.Forge.DeleteComment(ctx, ref, h.comment.ID)
	} else {
		err = w.o.Forge.TakeLabel(ctx, ref, w.o.Labels.Processing)
	}
	if errors.Is(err, forge.ErrNotFound) || errors.Is(err, forge.ErrLabelAbsent) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("revoking the hold on %s: %w", ref, err)
	}
	if err := w.o.Forge.AddLabel(ctx, ref, w.o.Labels.Bot); err != nil {
		return false, fmt.Errorf("putting %s up again: %w", ref, err)
	}
	return true, nil
}

// moveHold makes the hold on the forge follow a takeover or a claim in the
// store (Backlog, process: a store shared by hosts of different names, where
// one host takes the task on the forge and another's consumer claims its
// job): the holder
// comment of the holder taken over from, prev, is replaced by this host's.
// A holder comment of a third host means the task was put up and taken
// since: the run finds it is not this host's (stillOurs). Failures are
// logged; the run then decides by what the forge says.
func (w *Worker) moveHold(ctx context.Context, ref task.Ref, prev store.Record) {
	if w.o.ForgeLease <= 0 || prev.Host == w.o.Owner.Host {
		return
	}
	log := w.log(ref)
	c, h, ok, err := w.newestHolder(ctx, ref)
	if err != nil {
		log.Warn("reading the holder comment of a task taken over", "error", err)
		return
	}
	if !ok || h.Host != prev.Host {
		return
	}
	if err := w.o.Forge.DeleteComment(ctx, ref, c.ID); err != nil {
		if !errors.Is(err, forge.ErrNotFound) {
			log.Warn("deleting the holder comment of the host taken over from", "error", err)
		}
		return
	}
	w.postHolder(ctx, ref)
}

// unhold deletes this host's holder comment on ref once its round left
// processing (move): the task no longer needs holding, and a comment saying
// a host works on it would say what is no longer true. A failure is
// logged: the comment then stays, and says nothing a watcher acts on (it
// only watches tasks in processing).
func (w *Worker) unhold(ctx context.Context, ref task.Ref) {
	if w.o.ForgeLease <= 0 {
		return
	}
	log := w.log(ref)
	hd, known := w.hold.get(ref)
	w.hold.drop(ref)
	id := hd.id
	if known && id == 0 {
		return // never posted
	}
	if !known {
		c, h, ok, err := w.newestHolder(ctx, ref)
		if err != nil {
			log.Warn("reading the holder comment to delete it", "error", err)
			return
		}
		if !ok || h.Host != w.o.Owner.Host {
			return
		}
		id = c.ID
	}
	if err := w.o.Forge.DeleteComment(ctx, ref, id); err != nil && !errors.Is(err, forge.ErrNotFound) {
		log.Warn("deleting the holder comment of a task that left processing", "error", err)
	}
}

// stillOurs checks, before a run, that this host holds ref on the forge
// (holds): a task resumed from this host's store after a crash or a restart
// may have been put up again and taken by another host meanwhile. A task
// that is not this host's any more is let go (stopped here) and its job
// acked; when the forge cannot tell, the task goes back to queued for the
// next pass and its job is left. Its error is the store's.
func (w *Worker) stillOurs(ctx context.Context, ref task.Ref) (settlement, bool, error) {
	ok, why, err := w.holds(ctx, ref)
	if cause := context.Cause(ctx); errors.Is(cause, errHoldLost) {
		// A beat found the hold gone meanwhile and ended the run (lost)
		// while holds was reading: its answer is this one.
		ok, why, err = false, cause.Error(), nil
	}
	// The row is written even when the run's context has ended: a beat
	// that found the hold gone meanwhile ends it (lost), and a row left
	// running would be taken over, and let go, again at every start.
	sctx := context.WithoutCancel(ctx)
	switch {
	case err != nil:
		w.log(ref).Error("reading who holds the task; it waits for the next pass", "error", err)
		return leave, false, w.setStatus(sctx, ref, task.Queued, "")
	case !ok:
		if st, ended := w.endedOnForge(sctx, ref); ended {
			// The round ended (its final label set, its holder comment
			// deleted) and the process stopped before its store said so.
			w.log(ref).Info("the task's round had ended on the forge; recording it", "status", st)
			if err := w.o.Store.ClearCheckpoint(sctx, ref); err != nil {
				return ack, false, fmt.Errorf("clearing the checkpoint of %s: %w", ref, err)
			}
			return ack, false, w.setStatus(sctx, ref, st, "")
		}
		w.log(ref).Warn("this host no longer holds the task; letting it go", "reason", why)
		return ack, false, w.setStatus(sctx, ref, task.Stopped, "let go: "+why)
	}
	return ack, true, nil
}

// endedOnForge reports whether ref's round was ended by this host's run on
// the forge: the run's checkpoint holds its end (done or failed), and the
// task is out of processing with that end's label, which only the end of a
// round sets (before it deletes its holder comment and records the end in
// the store); st is that end. A round another host ended (this host's run
// died before its end), or a task the forge or the store cannot be asked
// about, has not.
func (w *Worker) endedOnForge(ctx context.Context, ref task.Ref) (st task.Status, ended bool) {
	cp, ok, err := w.o.Store.LoadCheckpoint(ctx, ref)
	if err != nil || !ok {
		return "", false
	}
	out, ok := engine.Ended(cp.Data)
	if !ok {
		return "", false
	}
	t, err := w.o.Forge.Get(ctx, ref)
	ls := w.o.Labels
	switch {
	case err != nil || t.HasLabel(ls.Processing):
		return "", false
	case out.End == engine.Done && ls.Done != "" && t.HasLabel(ls.Done):
		return task.Done, true
	case out.End == engine.Failed && ls.Failed != "" && t.HasLabel(ls.Failed):
		return task.Failed, true
	}
	return "", false
}
