package config

import (
	"slices"
	"strings"
)

// notYetSupported lists the key paths of features this version does not build
// yet. A config file may carry them (so one file works across versions); each
// gives a Warning and is otherwise ignored, subtree included. When a feature is
// built, move its key out of this list and into the Config structs.
var notYetSupported = map[string]bool{
	"comment_detection": true,
	"conversation":      true,
	"queue":             true,
	"database":          true,
	"pause_resume":      true,
	"metrics":           true,
	"health":            true,

	"github.paused_label":            true,
	"github.stopped_label":           true,
	"github.awaiting_response_label": true,
	"gitlab.paused_label":            true,
	"gitlab.stopped_label":           true,
	"gitlab.awaiting_response_label": true,
}

const notYetSupportedMsg = "not supported by this version; ignored"

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
