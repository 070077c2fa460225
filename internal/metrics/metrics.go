// Package metrics counts what the process does, for Prometheus: it wraps
// the ports (the store's counters, the forge's HTTP transport, the tools'
// caller) rather than reaching into the worker or the engine, and reads the
// tasks by status from the store at scrape time. Its registry is its own,
// not the global one.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// namespace prefixes every metric.
const namespace = "coding_agent"

// listTimeout bounds the store read a scrape makes.
const listTimeout = 5 * time.Second

// Lister lists the tasks the store holds.
type Lister interface {
	List(ctx context.Context) ([]store.Record, error)
}

// Options configure Metrics.
type Options struct {
	Logger *slog.Logger
	// Now is the clock of the forge's last answer; nil → time.Now.
	Now func() time.Time
}

// Metrics is the process's registry and its instruments.
type Metrics struct {
	o   Options
	reg *prometheus.Registry

	modelCalls, tokensIn, tokensOut prometheus.Counter
	toolCalls, toolErrors           prometheus.Counter
	forgeRequests                   *prometheus.CounterVec
	rateRemaining                   prometheus.Gauge
	taskDuration                    *prometheus.HistogramVec
	webhooks                        *prometheus.CounterVec

	depth     atomic.Pointer[func() int]
	forgeSeen atomic.Int64 // unix nanoseconds of the forge's last good answer; 0: never
}

// New returns Metrics with every instrument registered.
func New(o Options) *Metrics {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Metrics{o: o, reg: prometheus.NewRegistry()}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	}
	m.modelCalls = counter("model_calls_total", "Model requests answered, as recorded in the tasks' counters.")
	m.tokensIn = counter("tokens_in_total", "Prompt tokens the model reported.")
	m.tokensOut = counter("tokens_out_total", "Completion tokens the model reported.")
	m.toolCalls = counter("tool_calls_total", "Tool calls made by tasks through the MCP servers.")
	m.toolErrors = counter("tool_errors_total", "Tool calls that ended in a tool error or failed to run.")
	m.forgeRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "forge_requests_total",
		Help: "Forge API requests sent over the network: billed=\"false\" are conditional requests answered 304 Not Modified, which GitHub does not count against the rate limit."},
		[]string{"billed"})
	m.rateRemaining = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "forge_rate_limit_remaining",
		Help: "Requests left in the forge's rate-limit window, from the last answer that said (X-RateLimit-Remaining or RateLimit-Remaining); -1 until one does."})
	m.rateRemaining.Set(-1)
	m.taskDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "task_run_duration_seconds",
		Help:    "How long a run of a task took, from its start to its end (end: done, failed, paused, stopped, interrupted or error).",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}}, []string{"end"})
	m.webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "webhook_deliveries_total",
		Help: "Webhook deliveries received, by forge and result: accepted, ignored, duplicate, unauthorized or malformed."},
		[]string{"forge", "result"})
	m.reg.MustRegister(m.modelCalls, m.tokensIn, m.tokensOut, m.toolCalls, m.toolErrors, m.forgeRequests, m.rateRemaining,
		m.taskDuration, m.webhooks)
	m.forgeRequests.WithLabelValues("true")
	m.forgeRequests.WithLabelValues("false")
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "queue_depth",
		Help: "Jobs waiting in this process's queue (the in-process queue), or tasks queued in the store for a consumer (RabbitMQ)."},
		func() float64 {
			if f := m.depth.Load(); f != nil {
				return float64((*f)())
			}
			return 0
		}))
	return m
}

// ReadTasks has every scrape report the tasks by status as tasks lists
// them.
func (m *Metrics) ReadTasks(tasks Lister) {
	m.reg.MustRegister(&tasksByStatus{tasks: tasks})
}

// Handler serves the registry in the Prometheus text format. A metric that
// cannot be read (the store is down) is left out of the scrape and logged;
// the others are served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, ErrorLog: errorLog{m.o.Logger}})
}

// WebhookDelivered counts one webhook delivery of forge by its result.
func (m *Metrics) WebhookDelivered(forge, result string) {
	m.webhooks.WithLabelValues(forge, result).Inc()
}

// SetQueueDepth sets what queue_depth reports.
func (m *Metrics) SetQueueDepth(depth func() int) { m.depth.Store(&depth) }

// TaskRan records one run of a task: how it ended and how long it took.
func (m *Metrics) TaskRan(end string, d time.Duration) {
	m.taskDuration.WithLabelValues(end).Observe(d.Seconds())
}

// ForgeSeen is when the forge last answered a request (any answer below
// 500 but 401 and 403); zero when it never has.
func (m *Metrics) ForgeSeen() time.Time {
	n := m.forgeSeen.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

var tasksDesc = prometheus.NewDesc(namespace+"_tasks", "Tasks the store holds, by status, read at scrape time.", []string{"status"}, nil)

// tasksByStatus reads the store at every scrape.
type tasksByStatus struct{ tasks Lister }

func (t *tasksByStatus) Describe(ch chan<- *prometheus.Desc) { ch <- tasksDesc }

func (t *tasksByStatus) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	recs, err := t.tasks.List(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(tasksDesc, err)
		return
	}
	count := map[task.Status]int{}
	for _, r := range recs {
		count[r.Status]++
	}
	for _, s := range task.Statuses { // each, with 0 when no task has it
		ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, float64(count[s]), string(s))
		delete(count, s)
	}
	for s, n := range count { // a status this list does not know yet
		ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, float64(n), string(s))
	}
}

// errorLog is promhttp's error log on slog.
type errorLog struct{ log *slog.Logger }

func (e errorLog) Println(v ...any) { e.log.Warn("serving metrics", "error", fmt.Sprint(v...)) }
