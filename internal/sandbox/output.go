package sandbox

import "sync"

// headTail keeps the first and the last bytes of a stream and counts what
// it drops in between, so a command printing gigabytes costs the daemon at
// most max bytes per stream.
type headTail struct {
	mu      sync.Mutex
	headMax int
	head    []byte
	tail    []byte // ring of at most tailMax bytes
	tailMax int
	pos     int // next write position in tail once it is full
	dropped int64
}

// newHeadTail keeps max bytes: half head, half tail.
func newHeadTail(max int) *headTail {
	h := max / 2
	return &headTail{headMax: h, tailMax: max - h}
}

// Write keeps what fits the head, then rolls the tail; it never fails.
func (b *headTail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if room := b.headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if b.tailMax == 0 {
		b.dropped += int64(len(p))
		return n, nil
	}
	if len(p) >= b.tailMax {
		// Everything in the tail and the start of p fall out.
		b.dropped += int64(len(b.tail)) + int64(len(p)-b.tailMax)
		b.tail = append(b.tail[:0], p[len(p)-b.tailMax:]...)
		b.pos = 0
		return n, nil
	}
	for len(p) > 0 {
		if len(b.tail) < b.tailMax {
			k := min(b.tailMax-len(b.tail), len(p))
			b.tail = append(b.tail, p[:k]...)
			p = p[k:]
			continue
		}
		k := min(b.tailMax-b.pos, len(p))
		b.dropped += int64(k)
		copy(b.tail[b.pos:], p[:k])
		b.pos = (b.pos + k) % b.tailMax
		p = p[k:]
	}
	return n, nil
}

// bytes is the head then the tail in order, and the count dropped.
func (b *headTail) bytes() ([]byte, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]byte, 0, len(b.head)+len(b.tail))
	out = append(out, b.head...)
	out = append(out, b.tail[b.pos:]...)
	out = append(out, b.tail[:b.pos]...)
	return out, b.dropped
}
