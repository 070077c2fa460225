package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/sanitize"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/postgres"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
)

// StatusOptions shape what Status prints.
type StatusOptions struct {
	JSON bool // the records as a JSON array instead of a table
	// Now, Zone and Alive replace the clock, the zone times are shown in
	// and the probe of this host's processes (tests); nil: time.Now,
	// time.Local, store.ProcessAlive.
	Now   func() time.Time
	Zone  *time.Location
	Alive func(pid int) bool
}

// timeLayout is how Status shows a time: with its zone.
const timeLayout = "2006-01-02 15:04:05 MST"

// Status writes the tasks the store knows, with their state, counters and
// holder. It needs only the store's keys of the config (config.LoadStore)
// and opens nothing else: no forge, no log file. An embedded store that does
// not exist is not created: "no tasks yet" says where it was looked for.
func Status(ctx context.Context, cfg *config.Config, out io.Writer, o StatusOptions) error {
	o = o.withDefaults()
	host, err := hostName(cfg)
	if err != nil {
		return err
	}
	st, err := openForStatus(ctx, cfg, host, o.Alive)
	var missing *missingStore
	switch {
	case errors.As(err, &missing) && o.JSON:
		_, err = fmt.Fprintln(out, "[]")
		return err
	case errors.As(err, &missing):
		_, err = fmt.Fprintf(out, "no tasks yet — the store at %s does not exist\n", missing.path)
		return err
	case err != nil:
		return err
	}
	defer st.Close()
	recs, err := st.List(ctx)
	if err != nil {
		return fmt.Errorf("listing tasks: %w", err)
	}
	v := statusView{now: o.Now(), zone: o.Zone, holders: holderProbe{host: host, alive: o.Alive},
		redact: sanitize.NewRedactor(cfg.Secrets()).Redact}
	if o.JSON {
		return v.json(out, recs)
	}
	return v.table(out, recs)
}

func (o StatusOptions) withDefaults() StatusOptions {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Zone == nil {
		o.Zone = time.Local
	}
	if o.Alive == nil {
		o.Alive = store.ProcessAlive
	}
	return o
}

// hostName is the name this host has in the store: host_name, or the
// machine's.
func hostName(cfg *config.Config) (string, error) {
	if cfg.HostName != "" {
		return cfg.HostName, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("reading the host name: %w", err)
	}
	return h, nil
}

// missingStore is the embedded store's file that is not there.
type missingStore struct{ path string }

func (m *missingStore) Error() string { return "the store at " + m.path + " does not exist" }

// openForStatus opens the store to read it: PostgreSQL as any command does,
// the embedded file only when it exists (*missingStore otherwise), so that
// status in an empty folder leaves it empty.
func openForStatus(ctx context.Context, cfg *config.Config, host string, alive func(int) bool) (store.Store, error) {
	quiet := slog.New(slog.DiscardHandler)
	if cfg.Database.Postgres() {
		st, err := postgres.Open(ctx, cfg.Database.URL, postgres.Options{Logger: quiet, Hostname: host, Alive: alive})
		if err != nil {
			return nil, fmt.Errorf("opening the state store in PostgreSQL (database.url): %w", err)
		}
		return st, nil
	}
	path := filepath.Join(cfg.StateDir, sqlite.FileName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, &missingStore{path: path}
	}
	st, err := sqlite.OpenWith(ctx, cfg.StateDir, sqlite.Options{Logger: quiet, Hostname: host, Alive: alive})
	if err != nil {
		return nil, fmt.Errorf("opening the state store in %s: %w", cfg.StateDir, err)
	}
	return st, nil
}

// holderProbe tells whether a running task's holder is gone, by the rule
// the store applies (store.Holders.Hold), saying why.
type holderProbe struct {
	host  string
	alive func(pid int) bool
}

// gone is why r's holder no longer holds it at now ("" while it does, and
// for a task that is not running): a process of this host that exited, a
// lease that lapsed, or a release.
func (h holderProbe) gone(r store.Record, now time.Time, zone *time.Location) string {
	switch {
	case r.Status != task.Running:
		return ""
	case r.Host == h.host && !h.alive(r.PID):
		return fmt.Sprintf("holder gone: pid %d on %s has exited", r.PID, r.Host)
	case r.Instance == "" || r.LeaseUntil.IsZero():
		return "released: the next pass of any process takes it over"
	case !now.Before(r.LeaseUntil):
		return "holder gone: lease lapsed " + r.LeaseUntil.In(zone).Format("15:04:05 MST")
	}
	return ""
}

// statusView renders records at one moment, in one zone.
type statusView struct {
	now     time.Time
	zone    *time.Location
	holders holderProbe
	redact  func(string) string
}

func (v statusView) table(out io.Writer, recs []store.Record) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATUS\tLLM CALLS\tTOOL CALLS\tTOKENS IN\tTOKENS OUT\tMODEL\tHOST:PID\tLEASE\tUPDATED\tERROR")
	for _, r := range recs {
		status := string(r.Status)
		if why := v.holders.gone(r, v.now, v.zone); why != "" {
			status += " (" + why + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s:%d\t%s\t%s\t%s\n", r.Ref, status,
			r.Counters.LLMCalls, r.Counters.ToolCalls, r.Counters.TokensIn, r.Counters.TokensOut,
			r.Provider+"/"+r.Model, r.Host, r.PID, lease(r, v.now, v.zone), r.UpdatedAt.In(v.zone).Format(timeLayout),
			oneLine(v.redact(r.Error), 80))
	}
	if len(recs) == 0 {
		fmt.Fprintln(tw, "(no tasks yet)")
	}
	return tw.Flush()
}

// taskJSON is one record as status --json prints it.
type taskJSON struct {
	Ref        string         `json:"ref"`
	Status     string         `json:"status"`
	HolderGone string         `json:"holder_gone,omitempty"` // why a running task's holder no longer holds it
	Host       string         `json:"host"`
	PID        int            `json:"pid"`
	Instance   string         `json:"instance,omitempty"`
	LeaseUntil *time.Time     `json:"lease_until,omitempty"`
	Provider   string         `json:"provider"`
	Model      string         `json:"model"`
	Counters   store.Counters `json:"counters"`
	Error      string         `json:"error,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	UpdatedAt  time.Time      `json:"updated_at"`
}

func (v statusView) json(out io.Writer, recs []store.Record) error {
	tasks := make([]taskJSON, 0, len(recs))
	for _, r := range recs {
		t := taskJSON{Ref: r.Ref.String(), Status: string(r.Status), HolderGone: v.holders.gone(r, v.now, v.zone),
			Host: r.Host, PID: r.PID, Instance: r.Instance, Provider: r.Provider, Model: r.Model, Counters: r.Counters,
			Error: v.redact(r.Error), CreatedAt: r.CreatedAt.In(v.zone), UpdatedAt: r.UpdatedAt.In(v.zone)}
		if !r.LeaseUntil.IsZero() {
			until := r.LeaseUntil.In(v.zone)
			t.LeaseUntil = &until
		}
		tasks = append(tasks, t)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(tasks)
}
