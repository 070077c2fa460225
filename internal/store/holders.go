package store

import (
	"cmp"
	"fmt"
	"os"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
)

// Holders is the claim rule every backend applies to a task that is
// running: its holder holds it while its lease runs, unless it ran on this
// host and its process is gone (then at once: no need to wait for the
// lease). A holder on another host cannot be probed: its lease decides.
type Holders struct {
	host  string
	alive func(pid int) bool
}

// NewHolders is the rule as seen from host ("" → this machine's name),
// probing processes with alive (nil → ProcessAlive).
func NewHolders(host string, alive func(pid int) bool) (Holders, error) {
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			return Holders{}, fmt.Errorf("opening store: reading hostname: %w", err)
		}
		host = h
	}
	if alive == nil {
		alive = ProcessAlive
	}
	return Holders{host: host, alive: alive}, nil
}

// Hold reports whether cur's holder still holds it at now.
func (h Holders) Hold(cur Record, now time.Time) bool {
	if cur.Host == h.host && !h.alive(cur.PID) {
		return false
	}
	return now.Before(cur.LeaseUntil)
}

// Free is nil when a claim may take cur at now: it is not running, or its
// holder no longer holds it. Otherwise it is ErrClaimed, naming the holder.
// With takeover, a task that is not running is not free (ErrNotHeld).
func (h Holders) Free(cur Record, now time.Time, takeover bool) error {
	switch {
	case cur.Status != task.Running && takeover:
		return fmt.Errorf("it is %s: %w", cur.Status, ErrNotHeld)
	case cur.Status == task.Running && h.Hold(cur, now):
		return fmt.Errorf("held by %s (pid %d on %s) until %s: %w", cmp.Or(cur.Instance, "an older version"),
			cur.PID, cur.Host, cur.LeaseUntil.Format(time.RFC3339), ErrClaimed)
	}
	return nil
}

// ClaimMode says which tasks a claim may take (backends share the rule).
type ClaimMode int

const (
	// ClaimAny: a new task, or one in any status but running under a
	// holder that still holds it (Claim).
	ClaimAny ClaimMode = iota
	// ClaimQueued: a queued task, or one running under a holder that no
	// longer holds it (ClaimQueued).
	ClaimQueued
	// ClaimTakeOver: only a task running under a holder that no longer
	// holds it (TakeOver).
	ClaimTakeOver
)

// Attempts is the Record.Attempts a claim in mode writes over a row that
// had prev: a claim that starts a round (ClaimAny) sets 0, one that begins
// a run (ClaimQueued) adds one, and a takeover, which only queues the task
// again for the run that ClaimQueued counts, keeps it.
func (m ClaimMode) Attempts(prev int) int {
	switch m {
	case ClaimAny:
		return 0
	case ClaimQueued:
		return prev + 1
	}
	return prev
}

// Allows returns nil when a claim in mode may take cur (judged by h at
// now): ErrClaimed when its holder holds it, ErrNotHeld when its status
// is not one the mode claims from.
func (m ClaimMode) Allows(cur Record, h Holders, now time.Time) error {
	if m == ClaimQueued {
		if err := InHand(cur); err != nil {
			return err
		}
	}
	return h.Free(cur, now, m == ClaimTakeOver)
}

// InHand is nil for a task that a process holds or is to hold, queued or
// running: what ClaimQueued claims and Release frees. Otherwise it is
// ErrNotHeld, naming the task's status.
func InHand(cur Record) error {
	if cur.Status != task.Queued && cur.Status != task.Running {
		return fmt.Errorf("it is %s: %w", cur.Status, ErrNotHeld)
	}
	return nil
}

// Unknown is the error of a claim in mode (other than ClaimAny) of a task
// the store does not hold: ErrNotHeld for TakeOver, ErrNotFound for
// ClaimQueued.
func (m ClaimMode) Unknown() error {
	if m == ClaimQueued {
		return fmt.Errorf("not in store: %w", ErrNotFound)
	}
	return fmt.Errorf("not in store: %w", ErrNotHeld)
}
