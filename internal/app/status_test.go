package app_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
)

// statusStore fills an embedded store in a temporary state_dir with a task
// in each standing status shows, as host-a sees them: held, lapsed, held by
// a dead process of host-a, released, and done. It returns the config and
// the records by issue number.
func statusStore(t *testing.T) (*config.Config, map[int]store.Record) {
	t.Helper()
	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.HostName = "host-a"
	st, err := sqlite.OpenWith(t.Context(), cfg.StateDir, sqlite.Options{Hostname: "host-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	owner := func(host string, pid int, inst string, lease time.Duration) store.Owner {
		return store.Owner{Host: host, PID: pid, Instance: inst, Provider: "openai", Model: "gpt-4o", Lease: lease}
	}
	claims := []struct {
		n     int
		owner store.Owner
	}{
		{1, owner("host-b", 10, "inst-held", time.Hour)},
		{2, owner("host-b", 20, "inst-lapsed", time.Millisecond)},
		{3, owner("host-a", 999, "inst-dead", time.Hour)},
		{4, owner("host-b", 40, "inst-released", time.Hour)},
		{5, owner("host-b", 50, "inst-done", time.Hour)},
	}
	recs := map[int]store.Record{}
	for _, c := range claims {
		ref := task.Ref{Forge: task.GitHub, Repo: "acme/app", Number: c.n}
		if _, err := st.Claim(t.Context(), ref, c.owner); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Release(t.Context(), task.Ref{Forge: task.GitHub, Repo: "acme/app", Number: 4}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetStatus(t.Context(), task.Ref{Forge: task.GitHub, Repo: "acme/app", Number: 5}, task.Done, ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range claims {
		r, err := st.Get(t.Context(), task.Ref{Forge: task.GitHub, Repo: "acme/app", Number: c.n})
		if err != nil {
			t.Fatal(err)
		}
		recs[c.n] = r
	}
	return cfg, recs
}

func TestStatusShowsAGoneHolder(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	cfg, recs := statusStore(t)
	zone := time.FixedZone("JST", 9*3600)
	now := recs[2].LeaseUntil.Add(time.Second) // the 1 ms lease has lapsed, the hour ones have not
	opts := app.StatusOptions{Now: func() time.Time { return now }, Zone: zone, Alive: func(pid int) bool { return pid != 999 }}
	var out strings.Builder
	if err := app.Status(t.Context(), cfg, &out, opts); err != nil {
		t.Fatal(err)
	}
	lines := map[int]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		for n := range recs {
			if strings.HasPrefix(l, recs[n].Ref.String()+" ") {
				lines[n] = l
			}
		}
	}
	want := map[int][]string{
		1: {"running  ", "inst-held until " + recs[1].LeaseUntil.In(zone).Format("15:04:05") + " JST"},
		2: {"running (holder gone: lease lapsed " + recs[2].LeaseUntil.In(zone).Format("15:04:05") + " JST)"},
		3: {"running (holder gone: pid 999 on host-a has exited)"},
		4: {"running (released: the next pass of any process takes it over)", "released"},
		5: {"done  "},
	}
	for n, subs := range want {
		for _, s := range append(subs, recs[n].UpdatedAt.In(zone).Format("2006-01-02 15:04:05")+" JST") {
			if !strings.Contains(lines[n], s) {
				t.Errorf("task %d: line %q lacks %q", n, lines[n], s)
			}
		}
	}
	if strings.Contains(lines[1], "holder gone") || strings.Contains(lines[5], "holder gone") {
		t.Errorf("a held or finished task shown as gone:\n%s", out.String())
	}

	// The same in JSON, times in the zone.
	out.Reset()
	opts.JSON = true
	if err := app.Status(t.Context(), cfg, &out, opts); err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Ref        string     `json:"ref"`
		Status     string     `json:"status"`
		HolderGone string     `json:"holder_gone"`
		Instance   string     `json:"instance"`
		LeaseUntil *time.Time `json:"lease_until"`
		Counters   struct {
			LLMCalls int `json:"llm_calls"`
		} `json:"counters"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil || len(got) != len(recs) {
		t.Fatalf("status --json: %v, %d records:\n%s", err, len(got), out.String())
	}
	for _, g := range got {
		ref, err := task.ParseRef(g.Ref)
		if err != nil {
			t.Fatal(err)
		}
		r := recs[ref.Number]
		if g.Status != string(r.Status) || g.Instance != r.Instance || !g.UpdatedAt.Equal(r.UpdatedAt) {
			t.Errorf("%s: %+v, want the record %+v", g.Ref, g, r)
		}
		if _, off := g.UpdatedAt.Zone(); off != 9*3600 {
			t.Errorf("%s: updated_at %s is not in the zone asked for", g.Ref, g.UpdatedAt)
		}
		if gone := ref.Number == 2 || ref.Number == 3 || ref.Number == 4; gone != (g.HolderGone != "") {
			t.Errorf("%s: holder_gone %q", g.Ref, g.HolderGone)
		}
		if (g.LeaseUntil == nil) != r.LeaseUntil.IsZero() {
			t.Errorf("%s: lease_until %v, record %v", g.Ref, g.LeaseUntil, r.LeaseUntil)
		}
	}
}

// status agrees with the claim rule: a holder it shows as gone is one a
// claim may take the task from, and the other way round.
func TestStatusAgreesWithTheClaimRule(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	cfg, recs := statusStore(t)
	alive := func(pid int) bool { return pid != 999 }
	h, err := store.NewHolders("host-a", alive)
	if err != nil {
		t.Fatal(err)
	}
	now := recs[2].LeaseUntil.Add(time.Second)
	var out strings.Builder
	if err := app.Status(t.Context(), cfg, &out, app.StatusOptions{JSON: true, Now: func() time.Time { return now }, Alive: alive}); err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Ref        string `json:"ref"`
		HolderGone string `json:"holder_gone"`
	}
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatal(err)
	}
	for _, g := range got {
		ref, _ := task.ParseRef(g.Ref)
		r := recs[ref.Number]
		if free := r.Status == task.Running && !h.Hold(r, now); free != (g.HolderGone != "") {
			t.Errorf("%s: holder_gone %q, but the claim rule says free=%v", g.Ref, g.HolderGone, free)
		}
	}
}

// In a folder with no store, status says so and creates nothing.
func TestStatusWithoutAStoreCreatesNothing(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	dir := t.TempDir()
	cfg := config.Default()
	cfg.StateDir = filepath.Join(dir, "data")
	for _, asJSON := range []bool{false, true} {
		var out strings.Builder
		if err := app.Status(t.Context(), cfg, &out, app.StatusOptions{JSON: asJSON}); err != nil {
			t.Fatal(err)
		}
		want := "no tasks yet — the store at " + filepath.Join(cfg.StateDir, sqlite.FileName) + " does not exist\n"
		if asJSON {
			want = "[]\n"
		}
		if out.String() != want {
			t.Errorf("json %v: %q, want %q", asJSON, out.String(), want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("status created %v", entries)
	}
}
