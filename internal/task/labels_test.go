package task

import "testing"

// What a label change means, and which label halts a run, read alike by
// the webhooks and the run's watcher.
func TestLabelTriggers(t *testing.T) {
	l := Labels{Bot: "agent", Processing: "agent processing", Paused: "agent paused", Stopped: "agent stopped"}
	for _, c := range []struct {
		added, removed []string
		want           bool
	}{
		{[]string{"agent"}, nil, true},
		{nil, []string{"agent paused"}, true},
		{[]string{"bug", "agent"}, []string{"wontfix"}, true},
		{nil, []string{"agent"}, false},
		{[]string{"agent paused"}, nil, false},
		{[]string{"agent stopped"}, nil, false},
		{[]string{"agent processing"}, nil, false},
		{nil, nil, false},
	} {
		if got := l.Asks(c.added, c.removed); got != c.want {
			t.Errorf("Asks(+%q, -%q) = %v, want %v", c.added, c.removed, got, c.want)
		}
	}
	if (Labels{Bot: "agent"}).Asks(nil, []string{""}) {
		t.Error("an empty paused label (pausing off) asks when an empty label is removed")
	}
	for _, c := range []struct {
		labels []string
		want   Role
	}{
		{[]string{"bug"}, 0},
		{[]string{"agent paused"}, RolePaused},
		{[]string{"agent stopped"}, RoleStopped},
		{[]string{"agent paused", "agent stopped"}, RoleStopped},
	} {
		if got := l.Halting(c.labels); got != c.want {
			t.Errorf("Halting(%q) = %d, want %d", c.labels, got, c.want)
		}
	}
	if got := (Labels{Bot: "agent"}).Halting([]string{""}); got != 0 {
		t.Errorf("with pausing and stopping off, Halting = %d", got)
	}
}
