package report

import (
	"testing"
	"time"
)

func TestHolderNamesItsHost(t *testing.T) {
	for _, host := range []string{"build-1", `a "quoted" host name`, "ホスト"} {
		beat := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
		body, err := English.Holder(host, beat.In(time.FixedZone("JST", 9*3600)), 20*time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := HolderOf(body); !ok || got.Host != host || !got.Beat.Equal(beat) {
			t.Errorf("HolderOf(Holder(%q)) = %+v, %v\n%s", host, got, ok, body)
		}
	}
	for _, body := range []string{"", "coding-agent is working on this", "<!-- coding-agent holder: host=x beat=y -->",
		`<!-- coding-agent holder: host="x" beat=yesterday -->`} {
		if h, ok := HolderOf(body); ok {
			t.Errorf("HolderOf(%q) = %q, want no holder", body, h)
		}
	}
}

func TestPausedNamesItsHost(t *testing.T) {
	body, err := English.Paused(3, "the paused label was added", "paused", "agent", `build "1"`)
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := PausedOn(body); !ok || h != `build "1"` {
		t.Errorf("PausedOn = %q, %v\n%s", h, ok, body)
	}
	if h, ok := PausedOn("⏸️ **coding-agent paused**"); ok {
		t.Errorf("PausedOn of a comment without the line = %q", h)
	}
}
