package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// version and commit are set when the binary is built for a release:
//
//	go build -ldflags "-X main.version=v1.2.0 -X main.commit=$(git rev-parse HEAD)" ./cmd/coding-agent
//
// Left empty, version is the module's version when it was installed with
// go install …@version, else "dev", and commit is the revision the go
// command stamped from the checkout (vcs.revision, with "-dirty" for
// uncommitted changes), else "unknown".
var version, commit string

// versionLine is what coding-agent version prints.
func versionLine() string {
	v, c := version, commit
	info, ok := debug.ReadBuildInfo()
	if v == "" {
		v = "dev"
		if ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
	}
	if c == "" {
		c = "unknown"
		if ok {
			c = vcsRevision(info.Settings)
		}
	}
	return "coding-agent " + v + " (commit " + c + ", " + runtime.Version() + ")"
}

// vcsRevision is the commit the go command stamped into the build, or
// "unknown".
func vcsRevision(settings []debug.BuildSetting) string {
	rev, dirty := "unknown", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && rev != "unknown" {
		rev += "-dirty"
	}
	return strings.TrimSpace(rev)
}
