package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// toolNames maps "server/tool" to function names valid for every provider
// (^[a-zA-Z0-9_-]{1,64}$) and back, exactly and without collisions.
type toolNames struct {
	toFn   map[string]string
	toFull map[string]string
}

var invalidFnChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

const maxFnLen = 64

func newToolNames(full []string) *toolNames {
	n := &toolNames{toFn: map[string]string{}, toFull: map[string]string{}}
	for _, f := range full {
		n.add(f)
	}
	return n
}

// add names full, unless it has a name already.
func (n *toolNames) add(f string) {
	if _, ok := n.toFn[f]; ok {
		return
	}
	server, tool, _ := strings.Cut(f, "/")
	fn := invalidFnChars.ReplaceAllString(server+"__"+tool, "_")
	if len(fn) > maxFnLen || fn != server+"__"+tool || n.toFull[fn] != "" {
		// Changed, long or taken: a hash of the exact name keeps it unique.
		sum := sha256.Sum256([]byte(f))
		suffix := "_" + hex.EncodeToString(sum[:])[:10]
		if len(fn) > maxFnLen-len(suffix) {
			fn = fn[:maxFnLen-len(suffix)]
		}
		fn += suffix
	}
	n.toFn[f] = fn
	n.toFull[fn] = f
}

func (n *toolNames) fn(full string) string { return n.toFn[full] }

func (n *toolNames) full(fn string) (string, bool) {
	f, ok := n.toFull[fn]
	return f, ok
}
