package store

import (
	"fmt"
	"os"
)

// Holders is the claim rule every backend applies to a task that is
// running: its holder still holds it unless it ran on this host and its
// process is gone. A holder on another host cannot be probed and always
// holds.
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

// Hold reports whether cur's holder still holds it.
func (h Holders) Hold(cur Record) bool { return cur.Host != h.host || h.alive(cur.PID) }
