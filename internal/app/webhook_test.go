package app_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

const (
	hookSecret = "whsec-github-0123456789"
	hookToken  = "whtok-gitlab-0123456789"
)

// served is `serve` running in-process with its HTTP listener on a free
// port, polling once an hour: whatever happens sooner, a webhook made
// happen.
type served struct {
	t    testing.TB
	e    *env
	a    *app.App
	base string // http://host:port
	http *http.Client
}

func (e *env) serveHTTP(t testing.TB) *served {
	t.Helper()
	pages := e.cfg.Server // the task pages' settings a test made, kept
	e.cfg.Server = config.Server{Listen: "127.0.0.1:0", GitHubWebhookSecret: hookSecret, GitLabWebhookToken: hookToken,
		GiteaWebhookSecret: hookSecret, UIToken: pages.UIToken, PublicURL: pages.PublicURL, KeepEventsDays: pages.KeepEventsDays}
	e.cfg.Continuous.Producer.IntervalMinutes = 60
	e.cfg.Conversation.PollSeconds = 3600
	if err := e.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	a, err := app.New(ctx, e.cfg, app.Options{Sleep: noWait, Listening: func(x net.Addr) { addr <- x }})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		a.Close()
	})
	select {
	case x := <-addr:
		return &served{t: t, e: e, a: a, base: "http://" + x.String(), http: &http.Client{Timeout: 30 * time.Second}}
	case err := <-done:
		t.Fatalf("serve returned before listening: %v", err)
	}
	return nil
}

// send delivers d to the listener's path and returns the status.
func (s *served) send(path string, d forgetest.Delivery) int {
	s.t.Helper()
	resp, err := d.Send(s.http, s.base+path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func (s *served) get(path string) (int, string) {
	s.t.Helper()
	resp, err := s.http.Get(s.base + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor waits, at most a minute, for cond: what a process running in
// the background does is seen when it is done, not at a set time.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		<-tick.C
	}
}

// discovered waits for serve's first discovery on the forge: a label added
// after it is seen by the next pass, an hour later unless a webhook comes.
func (s *served) discovered() {
	s.t.Helper()
	e := s.e
	waitFor(s.t, "the first discovery", func() bool {
		if e.gl != nil {
			return e.gl.Count(http.MethodGet, "/merge_requests") > 0
		}
		return slices.ContainsFunc(e.emu().Requests(), func(r forgetest.Request) bool {
			return r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/issues") && strings.Contains(r.Query, "labels=")
		})
	})
}

// label adds the bot label as the repository's owner and returns the delivery the forge
// makes of it.
func (s *served) label(secret string) (string, forgetest.Delivery) {
	e := s.e
	if e.gh != nil {
		return "/webhooks/github", e.gh.LabelHook(e.ref.Repo, e.ref.Number, "coding agent", "", secret)
	}
	if e.gt != nil {
		return "/webhooks/gitea", e.gt.LabelHook(e.ref.Repo, e.ref.Number, "coding agent", "acme", secret)
	}
	return "/webhooks/gitlab", e.gl.LabelHook(e.ref.Repo, e.glKind(), e.ref.Number, "coding agent", "", secret)
}

func (s *served) comment(user, body string) (string, forgetest.Delivery) {
	e := s.e
	if e.gh != nil {
		return "/webhooks/github", e.gh.CommentHook(e.ref.Repo, e.ref.Number, user, body, hookSecret)
	}
	if e.gt != nil {
		return "/webhooks/gitea", e.gt.CommentHook(e.ref.Repo, e.ref.Number, user, body, hookSecret)
	}
	return "/webhooks/gitlab", e.gl.NoteHook(e.ref.Repo, e.glKind(), e.ref.Number, user, body, hookToken)
}

func unlabelled(s *forgetest.IssueSeed) { s.Labels = []string{"bug"} }

// A label added after serve's discovery is picked up through the webhook,
// long before the next poll; a forged delivery of it changes nothing.
func TestLabelledTaskPickedUpThroughTheWebhook(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, c := range []struct {
		name  string
		forge string
		kind  task.Kind
	}{
		{"github-issue", task.GitHub, task.Issue},
		{"gitlab-merge-request", task.GitLab, task.MergeRequest},
		{"gitea-pull-request", task.Gitea, task.PullRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, setup{forge: c.forge, kind: c.kind, provider: config.ProviderOpenAI, seed: unlabelled})
			s := e.serveHTTP(t)
			s.discovered()
			path, forged := s.label("not-the-secret")
			if status := s.send(path, forged); status != http.StatusUnauthorized {
				t.Fatalf("forged delivery: status %d, want 401", status)
			}
			if n := len(e.model.Requests()); n != 0 {
				t.Fatalf("a forged delivery started work: %d model requests", n)
			}
			// The forged delivery's label is on the task; the genuine one
			// is the forge's delivery of the same change.
			genuine := forged.WithSecret(hookSecret)
			if e.gl != nil {
				genuine = forged.WithSecret(hookToken)
			}
			if status := s.send(path, genuine); status != http.StatusAccepted {
				t.Fatalf("delivery: status %d, want 202", status)
			}
			// The labels are set before the store says done.
			waitFor(t, "the task to be done", func() bool {
				return slices.Contains(e.labels(), "coding agent done") && e.record().Status == task.Done
			})
			if status := s.send(path, genuine); status != http.StatusOK {
				t.Errorf("the same delivery again: status %d, want 200 (ignored)", status)
			}
			f := s.scrape()
			for result, want := range map[string]float64{"unauthorized": 1, "accepted": 1, "duplicate": 1} {
				if got := metric(f, "coding_agent_webhook_deliveries_total", "result", result); got != want {
					t.Errorf("webhook deliveries %s = %v, want %v", result, got, want)
				}
			}
		})
	}
}

// A comment's webhook makes the run's next checkpoint check the thread,
// although check_interval would skip it.
func TestCommentWebhookWakesTheCheckpointCheck(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	var s *served
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if r.N == 1 {
				if status := s.send(s.comment("bob", "Please name it greeting.txt instead.")); status != http.StatusAccepted {
					t.Errorf("comment delivery: status %d", status)
				}
			}
			return writeThenDone(e, r)
		}})
	e.cfg.CommentDetection.CheckInterval = 100
	s = e.serveHTTP(t)
	waitFor(t, "the task to be done", func() bool { return slices.Contains(e.labels(), "coding agent done") })
	reqs := e.model.Requests()
	if len(reqs) < 2 || !seen(reqs[1], "[New Comment from @bob]") || !seen(reqs[1], "greeting.txt") {
		t.Fatalf("the comment did not reach the next request (%d requests)", len(reqs))
	}
}

// A reply's webhook wakes the judge of the tasks awaiting one: the next
// round starts without waiting for conversation.poll_seconds.
func TestReplyWebhookWakesTheJudge(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitLab, kind: task.Issue, provider: config.ProviderOpenAI, conversation: true})
	s := e.serveHTTP(t)
	// The label is set before the store says awaiting; a reply that comes
	// in between is judged by the next poll.
	waitFor(t, "round 1 to end", func() bool {
		return slices.Contains(e.labels(), "coding agent awaiting response") && e.record().Status == task.Awaiting
	})
	round1 := len(e.model.Requests())
	if status := s.send(s.comment("alice", "Please also add a goodbye file.")); status != http.StatusAccepted {
		t.Fatalf("reply delivery: status %d", status)
	}
	waitFor(t, "round 2 to start", func() bool { return len(e.model.Requests()) > round1 })
	if !seen(e.model.Requests()[round1], "goodbye file") {
		t.Fatal("round 2 does not answer the reply")
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, seed: unlabelled})
	s := e.serveHTTP(t)
	if status, body := s.get("/healthz"); status != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", status, body)
	}
	s.discovered()
	// The emulator has the discovery's request; the daemon's transport
	// counts the forge as reached when the answer is back, a moment later.
	var status int
	var body string
	waitFor(t, "/readyz with the store and the forge reached", func() bool {
		status, body = s.get("/readyz")
		return status == http.StatusOK
	})
	if err := s.a.Close(); err != nil { // the store goes away
		t.Fatal(err)
	}
	status, body = s.get("/readyz")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "the state store cannot be read") {
		t.Fatalf("/readyz with the store closed: %d %q", status, body)
	}
	if status, _ := s.get("/healthz"); status != http.StatusOK {
		t.Fatalf("/healthz with the store closed: %d (the process is alive)", status)
	}
}

// The scrape, parsed as Prometheus parses it, counts what the run did.
func TestMetricsMatchARun(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	s := e.serveHTTP(t)
	waitFor(t, "the task to be done", func() bool { return slices.Contains(e.labels(), "coding agent done") })
	var f map[string]*dto.MetricFamily
	var billed, unbilled float64
	// The labels are set before the store says done; and serve goes on
	// (its passes, the forge lease's heartbeats): the scrape is compared
	// with the forge's log of the same moment, once no request is in
	// flight between the two.
	waitFor(t, "the run's duration and its end to be recorded, and the forge's requests counted", func() bool {
		billed, unbilled = 0, 0
		for _, r := range e.gh.Requests() {
			if r.Status == http.StatusNotModified {
				unbilled++
			} else {
				billed++
			}
		}
		f = s.scrape()
		return metric(f, "coding_agent_task_run_duration_seconds", "end", "done") == 1 &&
			metric(f, "coding_agent_tasks", "status", "done") == 1 &&
			metric(f, "coding_agent_forge_requests_total", "billed", "true") == billed &&
			metric(f, "coding_agent_forge_requests_total", "billed", "false") == unbilled
	})
	for _, c := range []struct {
		name, label, value string
		want               float64
	}{
		{"coding_agent_model_calls_total", "", "", float64(len(e.model.Requests()))},
		{"coding_agent_tokens_in_total", "", "", 220}, // writeThenDone: 100 + 120
		{"coding_agent_tokens_out_total", "", "", 30}, // 20 + 10
		{"coding_agent_tool_calls_total", "", "", 1},
		{"coding_agent_tool_errors_total", "", "", 0},
		{"coding_agent_tasks", "status", "done", 1},
		{"coding_agent_tasks", "status", "running", 0},
		{"coding_agent_queue_depth", "", "", 0},
		{"coding_agent_forge_requests_total", "billed", "true", billed},
		{"coding_agent_forge_requests_total", "billed", "false", unbilled},
	} {
		if got := metric(f, c.name, c.label, c.value); got != c.want {
			t.Errorf("%s{%s=%q} = %v, want %v", c.name, c.label, c.value, got, c.want)
		}
	}
	if unbilled == 0 {
		t.Error("no conditional request was answered 304: the unbilled count is not tested")
	}
	if got := metric(f, "coding_agent_forge_rate_limit_remaining", "", ""); got < 4900 || got >= 5000 {
		t.Errorf("rate limit remaining %v, want what the emulator's last answer said (< 5000)", got)
	}
}

func (s *served) scrape() map[string]*dto.MetricFamily {
	s.t.Helper()
	status, body := s.get("/metrics")
	if status != http.StatusOK {
		s.t.Fatalf("/metrics: %d", status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	f, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		s.t.Fatalf("parsing /metrics: %v\n%s", err, body)
	}
	return f
}

// metric is the value of the series of name with label=value ("": the
// first); a histogram's is its count; -1 when there is none.
func metric(f map[string]*dto.MetricFamily, name, label, value string) float64 {
	fam := f[name]
	if fam == nil {
		return -1
	}
	for _, m := range fam.GetMetric() {
		if label != "" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
			return l.GetName() == label && l.GetValue() == value
		}) {
			continue
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

// Removing the paused label (the operator's resume) is a webhook too: the
// paused task resumes at once, not at the next poll.
func TestResumeThroughTheWebhook(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range []string{task.GitHub, task.Gitea} {
		t.Run(fg, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, setup{forge: fg, kind: task.Issue, provider: config.ProviderOpenAI,
				respond: func(e *env, r llmtest.Received) llmtest.Step {
					if r.N == 1 {
						e.addLabelBy("coding agent paused", "acme")
					}
					return writeThenDone(e, r)
				}})
			s := e.serveHTTP(t)
			waitFor(t, "the task to pause", func() bool {
				return slices.Equal(e.labels(), []string{"bug", "coding agent paused"}) && e.record().Status == task.Paused
			})
			before := len(e.model.Requests())
			path, unlabel := "/webhooks/github", forgetest.Delivery{}
			if e.gt != nil {
				path, unlabel = "/webhooks/gitea", e.gt.UnlabelHook(e.ref.Repo, e.ref.Number, "coding agent paused", "acme", hookSecret)
			} else {
				unlabel = e.gh.UnlabelHook(e.ref.Repo, e.ref.Number, "coding agent paused", hookSecret)
			}
			if status := s.send(path, unlabel); status != http.StatusAccepted {
				t.Fatalf("delivery: status %d, want 202", status)
			}
			waitFor(t, "the task to be done", func() bool { return slices.Contains(e.labels(), "coding agent done") })
			if n := len(e.model.Requests()); n <= before {
				t.Fatal("the resumed task made no model request")
			}
		})
	}
}
