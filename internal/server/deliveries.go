package server

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// deliveries remembers the last n deliveries, oldest forgotten first: their
// ids, and the digests of their verified bodies for bodyMemory.
type deliveries struct {
	mu   sync.Mutex
	now  func() time.Time
	keys map[string]int // id or body key → the slot of the delivery that had it
	ring []remembered
	next int
}

// remembered is one delivery: its keys and when it came.
type remembered struct {
	keys []string
	at   time.Time
}

func newDeliveries(n int, now func() time.Time) *deliveries {
	return &deliveries{now: now, keys: make(map[string]int, 2*n), ring: make([]remembered, n)}
}

// add remembers the delivery of forge with its ids (empty ones skipped)
// and the digest of its body (nil: it has none), and reports whether none
// of them was remembered already: a body only within bodyMemory. A
// delivery with no id and no body is always new.
func (d *deliveries) add(forge string, ids []string, body *[sha256.Size]byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	var keys []string
	for _, id := range ids {
		if id != "" {
			keys = append(keys, forge+"\x00id\x00"+id)
		}
	}
	bodyKey := ""
	if body != nil {
		bodyKey = forge + "\x00body\x00" + hex.EncodeToString(body[:])
		keys = append(keys, bodyKey)
	}
	for _, k := range keys {
		slot, ok := d.keys[k]
		if ok && (k != bodyKey || now.Sub(d.ring[slot].at) < bodyMemory) {
			return false
		}
	}
	if len(keys) == 0 {
		return true
	}
	for _, k := range d.ring[d.next].keys {
		if d.keys[k] == d.next {
			delete(d.keys, k)
		}
	}
	d.ring[d.next] = remembered{keys: keys, at: now}
	for _, k := range keys {
		d.keys[k] = d.next
	}
	d.next = (d.next + 1) % len(d.ring)
	return true
}
