package sandbox

import "strings"

// Report is what the host gives.
type Report struct {
	// Best is the most isolation the host gives.
	Best Level
	// Layers holds one entry per mechanism.
	Layers []Layer
}

// Layer is one confinement mechanism on this host.
type Layer struct {
	// Name is the mechanism: user, mount, pid, network, ipc, uts,
	// landlock, no_new_privs, rlimits.
	Name string
	// OK is true when it works here.
	OK bool
	// Detail says what it gives, or what is missing and how to get it.
	Detail string
}

// nsLayers are the namespaces level Namespaces needs, in report order.
var nsLayers = []string{"user", "mount", "pid", "network", "ipc", "uts"}

// allOK reports whether every named layer works.
func (r Report) allOK(names []string) bool {
	for _, n := range names {
		l, ok := r.layer(n)
		if !ok || !l.OK {
			return false
		}
	}
	return true
}

// layer finds a layer by name.
func (r Report) layer(name string) (Layer, bool) {
	for _, l := range r.Layers {
		if l.Name == name {
			return l, true
		}
	}
	return Layer{}, false
}

// missing says what keeps the host below want.
func (r Report) missing(want Level) string {
	names := []string{"landlock"}
	if want == Namespaces {
		names = nsLayers
	}
	var out []string
	for _, n := range names {
		if l, ok := r.layer(n); ok && !l.OK {
			out = append(out, n+": "+l.Detail)
		}
	}
	if len(out) == 0 {
		return "unknown"
	}
	return strings.Join(out, "; ")
}
