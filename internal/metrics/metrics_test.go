package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/coding-agent/coding-agent/internal/metrics"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// scrape reads m's /metrics and parses it as Prometheus does.
func scrape(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: status %d", rec.Code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	return fams
}

// value is the metric of name whose labels include want; -1 when absent.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestStoreCountersAndTasksByStatus(t *testing.T) {
	ctx := context.Background()
	m := metrics.New(metrics.Options{})
	st := m.Store(openStore(t))
	m.ReadTasks(st)
	owner := store.Owner{Host: "h", PID: 1, Instance: "i", Lease: time.Minute}
	a := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 1}
	b := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 2}
	for _, ref := range []task.Ref{a, b} {
		if _, err := st.Claim(ctx, ref, owner); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SetStatus(ctx, b, task.Done, ""); err != nil {
		t.Fatal(err)
	}
	for _, d := range []store.Counters{{LLMCalls: 1, TokensIn: 100, TokensOut: 20}, {ToolCalls: 1}, {LLMCalls: 1, TokensIn: 120, TokensOut: 10}} {
		if err := st.AddCounters(ctx, a, d); err != nil {
			t.Fatal(err)
		}
	}
	f := scrape(t, m)
	for name, want := range map[string]float64{
		"coding_agent_model_calls_total": 2, "coding_agent_tokens_in_total": 220, "coding_agent_tokens_out_total": 30,
	} {
		if got := value(f, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for status, want := range map[string]float64{"running": 1, "done": 1, "failed": 0, "queued": 0} {
		if got := value(f, "coding_agent_tasks", map[string]string{"status": status}); got != want {
			t.Errorf("tasks{status=%q} = %v, want %v", status, got, want)
		}
	}
}

// A store that cannot be read leaves the tasks out of the scrape; the rest
// is served.
func TestScrapeWithTheStoreGone(t *testing.T) {
	m := metrics.New(metrics.Options{})
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m.ReadTasks(st)
	st.Close()
	f := scrape(t, m)
	if _, ok := f["coding_agent_tasks"]; ok {
		t.Fatal("tasks reported from a closed store")
	}
	if value(f, "coding_agent_model_calls_total", nil) != 0 {
		t.Fatal("the other metrics are not served")
	}
}

func TestForgeTransport(t *testing.T) {
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	answers := []func(w http.ResponseWriter){
		func(w http.ResponseWriter) { w.Header().Set("X-RateLimit-Remaining", "4999"); w.WriteHeader(200) },
		func(w http.ResponseWriter) { w.Header().Set("X-RateLimit-Remaining", "4999"); w.WriteHeader(304) },
		func(w http.ResponseWriter) { w.Header().Set("RateLimit-Remaining", "17"); w.WriteHeader(401) },
	}
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { answers[n](w); n++ }))
	defer srv.Close()
	m := metrics.New(metrics.Options{Now: func() time.Time { return now }})
	c := &http.Client{Transport: m.Transport(nil)}
	for i := range answers {
		if i == 1 {
			now = now.Add(time.Minute) // the 304 is the last good answer
		}
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	f := scrape(t, m)
	if got := value(f, "coding_agent_forge_requests_total", map[string]string{"billed": "true"}); got != 2 {
		t.Errorf("billed = %v, want 2", got)
	}
	if got := value(f, "coding_agent_forge_requests_total", map[string]string{"billed": "false"}); got != 1 {
		t.Errorf("unbilled = %v, want 1", got)
	}
	if got := value(f, "coding_agent_forge_rate_limit_remaining", nil); got != 17 {
		t.Errorf("rate limit remaining = %v, want 17 (GitLab's header, last)", got)
	}
	if want := time.Date(2026, 11, 24, 9, 1, 0, 0, time.UTC); !m.ForgeSeen().Equal(want) {
		t.Errorf("forge seen %v, want %v (a 401 is no good answer)", m.ForgeSeen(), want)
	}
}

type caller struct {
	res toolhost.Result
	err error
}

func (c caller) Call(context.Context, string, json.RawMessage) (toolhost.Result, error) {
	return c.res, c.err
}

func TestToolCallsDurationsAndQueueDepth(t *testing.T) {
	m := metrics.New(metrics.Options{})
	for _, c := range []caller{{}, {res: toolhost.Result{IsError: true}}, {err: errors.New("server gone")}, {}} {
		_, _ = m.Caller(c).Call(context.Background(), "fs/read_file", nil)
	}
	m.TaskRan("done", 3*time.Second)
	m.TaskRan("failed", 90*time.Second)
	m.TaskRan("done", 2*time.Second)
	depth := 0
	m.SetQueueDepth(func() int { return depth })
	depth = 3
	f := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"coding_agent_tool_calls_total", nil, 4},
		{"coding_agent_tool_errors_total", nil, 2},
		{"coding_agent_task_run_duration_seconds", map[string]string{"end": "done"}, 2},
		{"coding_agent_task_run_duration_seconds", map[string]string{"end": "failed"}, 1},
		{"coding_agent_queue_depth", nil, 3},
		{"coding_agent_forge_rate_limit_remaining", nil, -1},
	} {
		if got := value(f, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
