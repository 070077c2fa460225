package sandbox

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestProbe checks the report names every mechanism and agrees with Best.
func TestProbe(t *testing.T) {
	rep := Probe()
	names := []string{"user", "mount", "pid", "network", "ipc", "uts", "landlock", "no_new_privs", "rlimits"}
	for _, n := range names {
		l, ok := rep.layer(n)
		if !ok {
			t.Errorf("layer %s missing", n)
			continue
		}
		if l.Detail == "" {
			t.Errorf("layer %s has no detail", n)
		}
		t.Logf("%-12s ok=%-5v %s", l.Name, l.OK, l.Detail)
	}
	ll, _ := rep.layer("landlock")
	switch {
	case rep.allOK(nsLayers) && rep.Best != Namespaces,
		!rep.allOK(nsLayers) && ll.OK && rep.Best != Landlock,
		!rep.allOK(nsLayers) && !ll.OK && rep.Best != None:
		t.Errorf("best %s does not follow the layers", rep.Best)
	}
	if ll.OK && !strings.HasPrefix(ll.Detail, "ABI ") {
		t.Errorf("landlock detail %q", ll.Detail)
	}
	if os.Getenv("CI") != "" && rep.Best != Namespaces {
		t.Errorf("CI's machine gives %s, want namespaces: %s", rep.Best, rep.missing(Namespaces))
	}
	if Probe().Best != rep.Best {
		t.Error("probe not cached")
	}
	if _, err := New(Policy{Require: rep.Best}); err != nil {
		t.Errorf("new at the host's best: %v", err)
	}
}

// TestMissing checks that the reason for a refused level names the layers
// that fail and their details.
func TestMissing(t *testing.T) {
	rep := Report{Best: Landlock, Layers: []Layer{
		{Name: "user", Detail: "kernel.unprivileged_userns_clone=0 (set it to 1)"},
		{Name: "mount", OK: true, Detail: "fine"},
		{Name: "landlock", OK: true, Detail: "ABI 7"},
	}}
	got := rep.missing(Namespaces)
	if !strings.Contains(got, "user: kernel.unprivileged_userns_clone=0") || strings.Contains(got, "mount") {
		t.Errorf("missing: %q", got)
	}
}

// TestParseLevel checks names both ways.
func TestParseLevel(t *testing.T) {
	for _, l := range []Level{None, Landlock, Namespaces} {
		got, err := ParseLevel(l.String())
		if err != nil || got != l {
			t.Errorf("parse %s: %v %v", l, got, err)
		}
	}
	if _, err := ParseLevel("chroot"); err == nil {
		t.Error("parsed an unknown level")
	}
}

// TestHeadTail checks the bounded output buffer.
func TestHeadTail(t *testing.T) {
	b := newHeadTail(10)
	for _, s := range []string{"01234", "56789", "abcdefghij", "k", "lmnopqrstuvwxyz"} {
		b.Write([]byte(s))
	}
	got, dropped := b.bytes()
	if string(got) != "01234vwxyz" || dropped != 36-10 {
		t.Errorf("got %q dropped %d", got, dropped)
	}
}

// BenchmarkRunTrue runs a sandboxed true at each level the host gives.
func BenchmarkRunTrue(b *testing.B) {
	rep := Probe()
	for _, lvl := range []Level{Namespaces, Landlock, None} {
		b.Run(lvl.String(), func(b *testing.B) {
			if rep.Best < lvl {
				b.Skipf("host gives %s only", rep.Best)
			}
			sb, err := newAt(Policy{}, lvl)
			if err != nil {
				b.Fatal(err)
			}
			dir := b.TempDir()
			d := Dirs{Work: dir, Home: dir + "/home", Tmp: dir + "/tmp"}
			for b.Loop() {
				r, err := sb.Run(b.Context(), Run{Dirs: d, Command: "true"})
				if err != nil || r.ExitCode != 0 {
					b.Fatalf("%v %+v", err, r)
				}
			}
		})
	}
}

// BenchmarkExecTrue is the baseline: a plain exec of true.
func BenchmarkExecTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
