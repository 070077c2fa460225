package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Digest identifies a comment (trimmed) without keeping its text: how a
// policy tells that a step says what the previous one said.
func Digest(comment string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(comment)))
	return hex.EncodeToString(sum[:16])
}
