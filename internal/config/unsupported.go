package config

import (
	"slices"
	"strings"
)

// notYetSupported lists the key paths of features this version does not build
// yet, and of keys the specification names that this version does without. A
// config file may carry them (so one file works across versions); each gives
// a Warning and is otherwise ignored, subtree included. When a feature is
// built, move its key out of this list and into the Config structs; when it
// is built under other keys, its warning says which (replacedMsg).
var notYetSupported = map[string]bool{
	"pause_resume": true, // pause and stop are built on labels; this section is not read
	"metrics":      true, // see replacedMsg
	"health":       true,

	// Written in the comment-detection specification; here the bot's own
	// comments are told apart by github.bot_name or gitlab.bot_name (learned
	// from the token when empty), and logging.level alone sets what is logged.
	"comment_detection.bot_username": true,
	"comment_detection.log_level":    true,
}

const notYetSupportedMsg = "not supported by this version; ignored"

// replacedMsg are the messages of the keys whose feature this version has
// under other keys.
var replacedMsg = map[string]string{
	"metrics": "done differently by this version: set server.listen, and serve answers GET /metrics there; ignored",
	"health":  "done differently by this version: set server.listen, and serve answers GET /healthz and GET /readyz there; ignored",
}

// futureKeyMsg is the warning of the not-yet-supported key at path.
func futureKeyMsg(path string) string {
	if m, ok := replacedMsg[path]; ok {
		return m
	}
	return notYetSupportedMsg
}

// futureKeysUnder lists the not-yet-supported keys directly under path, so an
// unknown key can be matched against them too.
func futureKeysUnder(path string) []string {
	var keys []string
	for k := range notYetSupported {
		parent, name := "", k
		if i := strings.LastIndexByte(k, '.'); i >= 0 {
			parent, name = k[:i], k[i+1:]
		}
		if parent == path {
			keys = append(keys, name)
		}
	}
	slices.Sort(keys)
	return keys
}
