package server

import "sync"

// deliveries remembers the last n delivery ids, oldest forgotten first.
type deliveries struct {
	mu   sync.Mutex
	set  map[string]bool
	ring []string
	next int
}

func newDeliveries(n int) *deliveries {
	return &deliveries{set: make(map[string]bool, n), ring: make([]string, n)}
}

// add remembers the delivery's ids (of forge; empty ones skipped) and
// reports whether none was remembered already. A delivery without an id
// is always new.
func (d *deliveries) add(forge string, ids []string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	var keys []string
	for _, id := range ids {
		if id == "" {
			continue
		}
		k := forge + "\x00" + id
		if d.set[k] {
			return false
		}
		keys = append(keys, k)
	}
	for _, k := range keys {
		if old := d.ring[d.next]; old != "" {
			delete(d.set, old)
		}
		d.ring[d.next] = k
		d.set[k] = true
		d.next = (d.next + 1) % len(d.ring)
	}
	return true
}
