// Package app is the composition root: it builds the adapters the config
// names, wires them into the core, runs the commands, and closes everything
// in reverse order.
package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/record"
	"github.com/coding-agent/coding-agent/internal/llm/tokens"
	"github.com/coding-agent/coding-agent/internal/llm/wire"
	"github.com/coding-agent/coding-agent/internal/metrics"
	"github.com/coding-agent/coding-agent/internal/obs"
	"github.com/coding-agent/coding-agent/internal/plan"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/sanitize"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/postgres"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
	"github.com/coding-agent/coding-agent/internal/watch"
	"github.com/coding-agent/coding-agent/internal/worker"
	"github.com/coding-agent/coding-agent/internal/workspace"
)

// forgeTimeout bounds one forge HTTP attempt.
const forgeTimeout = 30 * time.Second

// forgeCacheEntries is how many forge answers the conditional-GET cache
// keeps: the issues and comment lists of a few hundred polled tasks.
const forgeCacheEntries = 1024

// Options are what the process gives the app besides the config.
type Options struct {
	// Sleep replaces the retry waits (tests); nil → real timers.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now replaces the clock of what planning mode writes (tests); nil → time.Now.
	Now func() time.Time
	// Clock replaces the worker's clock (tests): the holder comments' beats
	// and how long a task in processing has been left, the conversations'
	// timeouts; nil → time.Now.
	Clock func() time.Time
	// Terminal, when set, gets one human line per task event (claimed,
	// working, each step, how it ended) and every error: stderr when it is
	// a terminal, unless --quiet.
	Terminal io.Writer
	// DryRun, when set, makes the app change nothing on the forge: what it
	// would write (labels, comments, changes) is printed there instead, and
	// its state and workspaces live in a temporary folder (see dryRun).
	DryRun io.Writer
	// Listening, when set, is told the address serve's HTTP listener
	// listens on (server.listen with port 0 picks a free one).
	Listening func(net.Addr)
}

// App holds the built components.
type App struct {
	cfg     *config.Config
	o       Options
	Log     *slog.Logger
	redact  func(string) string
	closers []io.Closer
	forge   forge.Forge // counts the comments posted through it in posts
	posts   watch.Posts // what this process posted, per task
	store   store.Store
	host    *toolhost.Host
	box     *workspace.Box    // the sandbox of the tasks' commands; nil when tasks get no workspace
	ws      worker.Workspaces // nil: tasks get no workspace
	runner  worker.Runner
	// gitToken is the forge's token for git over HTTPS now (a GitHub
	// App's changes every hour).
	gitToken func(context.Context) (string, error)
	// setup is the forge as doctor checks it.
	setup forge.Setup
	// self is this start of the process as it claims tasks: host name,
	// PID, instance id and lease (the model is added by newWorker).
	self store.Owner
	// metrics counts at the ports (store counters, forge transport,
	// tools); /metrics serves it.
	metrics *metrics.Metrics
	// wake is what webhooks signal: the producer, the replies judge, the
	// checks of the runs in hand.
	wake *wakeups
	// recorder writes the model's traffic to llm.record; nil until the
	// first model client is built, and when it is off.
	recorder *record.Recorder
	// model is the model client (startAgent); the reply judge asks it
	// about a reply it is unsure of. nil: not built.
	llm llm.Client
	// dry is the forge of a dry run, which shows what it would push too;
	// nil otherwise.
	dry *dryForge
}

// New builds the logger, the store and the forge adapter. Commands that run
// the agent also start the MCP servers and the model client (startAgent).
func New(ctx context.Context, cfg *config.Config, o Options) (*App, error) {
	a := &App{cfg: cfg, o: o, redact: sanitize.NewRedactor(cfg.Secrets()).Redact, wake: newWakeups()}
	dryDir := ""
	if o.DryRun != nil {
		dry := *cfg
		dir, err := dryRun(&dry)
		if err != nil {
			return nil, err
		}
		a.cfg, dryDir = &dry, dir
		a.closers = append(a.closers, removeDir(dir))
	}
	self, err := newSelf(cfg)
	if err != nil {
		return nil, err
	}
	a.self = self
	logger, closer, err := obs.NewLogger(obs.LogOptions{
		File: cfg.Logging.File, Level: cfg.Logging.Level, Stdout: cfg.Logging.Stdout,
		MaxAgeDays: cfg.Logging.MaxAgeDays, Secrets: cfg.Secrets(), Terminal: o.Terminal,
	})
	if err != nil {
		return nil, fmt.Errorf("setting up logging: %w", err)
	}
	// Several processes may write one log file: each line says whose.
	a.Log = logger.With("host", self.Host, "pid", self.PID)
	a.closers = append(a.closers, closer)
	if dryDir != "" {
		a.Log.Info("dry run: the store and the workspaces are in a folder removed at the end", "folder", dryDir)
	}
	st, err := a.openStore(ctx)
	if err != nil {
		a.Close()
		return nil, err
	}
	// Its failures (not its answers) are marked, so that the worker stops
	// on them and the command fails with them.
	a.metrics = metrics.New(metrics.Options{Logger: a.Log})
	a.store = a.metrics.Store(store.MarkFailures(st))
	a.metrics.ReadTasks(a.store)
	a.closers = append(a.closers, st)
	f, err := a.newForge()
	if err != nil {
		a.Close()
		return nil, err
	}
	a.forge = a.posts.Wrap(f)
	if o.DryRun != nil {
		// Above the count of what this process posted: a comment a dry
		// run only prints is not on the forge, and the checkpoint check
		// must not take a new comment for it.
		a.dry = &dryForge{forgeReads: a.forge, out: o.DryRun}
		a.forge = a.dry
	}
	return a, nil
}

// openStore opens the state store database.url names, a PostgreSQL
// database several hosts may share, or without one the embedded SQLite file
// in state_dir.
func (a *App) openStore(ctx context.Context) (store.Store, error) {
	if a.cfg.Database.Postgres() {
		st, err := postgres.Open(ctx, a.cfg.Database.URL, postgres.Options{Logger: a.Log, Hostname: a.self.Host})
		if err != nil {
			return nil, fmt.Errorf("opening the state store in PostgreSQL (database.url): %w", err)
		}
		return st, nil
	}
	st, err := sqlite.OpenWith(ctx, a.cfg.StateDir, sqlite.Options{Logger: a.Log, Hostname: a.self.Host})
	if err != nil {
		return nil, fmt.Errorf("opening the state store in %s: %w", a.cfg.StateDir, err)
	}
	return st, nil
}

func (a *App) httpClient(timeout time.Duration, retryUnsafe bool) *http.Client {
	return a.httpClientOver(nil, timeout, retryUnsafe)
}

// httpClientOver is httpClient with its retries sent through base (nil:
// straight to the network). Every API it talks to answers JSON, so a
// success that is not JSON (cut short, an HTML page) is retried.
func (a *App) httpClientOver(base http.RoundTripper, timeout time.Duration, retryUnsafe bool) *http.Client {
	return httpx.NewClient(httpx.Options{
		AttemptTimeout: timeout, RetryUnsafe: retryUnsafe, JSON: true, Logger: a.Log, Sleep: a.o.Sleep, Base: base,
	})
}

// forgeHTTPClient is the forge's client: retry → conditional-GET cache →
// network, one cache per App. The cache sits below the retries so that they
// see the 200 a 304 stands for, with the 304's fresh rate-limit headers;
// GitHub does not count 304s, so polling an unchanged issue is free.
func (a *App) forgeHTTPClient() *http.Client {
	return a.httpClientOver(httpx.NewCache(a.metrics.Transport(http.DefaultTransport), forgeCacheEntries), forgeTimeout, false)
}

func (a *App) newForge() (forge.Forge, error) {
	k, err := a.forgeKind()
	if err != nil {
		return nil, err
	}
	f, token, err := a.openForge(k, a.forgeHTTPClient())
	if err != nil {
		return nil, err
	}
	a.gitToken, a.setup = token, f
	return f, nil
}

// startAgent starts the MCP servers and builds the model client and the
// turn engine with the configured loop's policy.
func (a *App) startAgent(ctx context.Context) error {
	c := a.cfg
	var servers []toolhost.ServerConfig
	if c.TaskWorkspaces() {
		box, err := a.newBox()
		if err != nil {
			return err
		}
		a.box = box
	}
	if c.BuiltinTools() {
		servers = append(servers, a.builtinServer(a.box))
	}
	for _, s := range c.MCPServers {
		srv := toolhost.ServerConfig{Name: s.Name, Command: s.Command, Env: s.Env, Scope: toolhost.Scope(s.Scope),
			SystemPrompt: s.SystemPrompt, Allow: s.Tools.Allow, Deny: s.Tools.Deny, URL: s.URL}
		if o := s.OAuth; o != nil {
			srv.OAuth = &toolhost.OAuthClient{TokenURL: o.TokenURL, ClientID: o.ClientID, ClientSecret: o.ClientSecret.Reveal(), Scopes: o.Scopes}
		}
		for k, v := range s.Headers {
			if srv.Headers == nil {
				srv.Headers = map[string]string{}
			}
			srv.Headers[k] = v.Reveal()
		}
		if s.Sandbox {
			srv.Confine = a.box.Confine
		}
		servers = append(servers, srv)
	}
	host, err := toolhost.Start(ctx, toolhost.Options{Servers: servers, CallTimeout: c.Tools.CallTimeout(),
		MaxResultBytes: c.Tools.MaxResultBytes, Logger: a.Log, Redact: a.redact})
	if err != nil {
		return err
	}
	a.host = host
	a.closers = append(a.closers, host)
	if a.ws, err = a.workspaces(); err != nil {
		return err
	}
	if err := a.reachModel(ctx); err != nil {
		return err
	}
	budget := a.budget(ctx)
	model, err := a.newLLM(budget)
	if err != nil {
		return err
	}
	a.llm = model
	maxTools := providers[c.LLM.Provider].maxTools
	e, err := engine.New(engine.Options{LLM: model, Tools: a.metrics.Tools(host), State: store.HeldBy(a.store, a.self.Instance),
		Record: a.record, Logger: a.Log,
		FunctionCalling: c.LLM.FunctionCalling, MaxCalls: c.MaxLLMProcessNum, Budget: budget, MaxTools: maxTools, Now: a.o.Now,
		Constrained: c.LLM.Constrained == config.ConstrainedAuto})
	if err != nil {
		return err
	}
	if !c.Planning.Enabled {
		a.runner, err = agent.New(e, agent.Options{Forge: a.forge, Separate: c.Comments.Mode == config.CommentsSeparate,
			Lang: report.ParseLang(c.Language), Redact: a.redact})
		return err
	}
	a.runner, err = plan.New(plan.Options{Engine: e, Forge: a.forge, Settings: planSettings(c.Planning),
		Lang: report.ParseLang(c.Language), Separate: c.Comments.Mode == config.CommentsSeparate, Redact: a.redact})
	return err
}

// planSettings are config's planning section, validated there, as planning
// mode takes them.
func planSettings(p config.Planning) plan.Settings {
	return plan.Settings{
		MaxSubtasks: p.MaxSubtasks, DecompositionLevel: p.DecompositionLevel,
		PrePlanning: p.PrePlanning.Enabled, MaxGatherCalls: p.PrePlanning.MaxToolCalls,
		MaxCallsPerAction: p.Execution.MaxLLMCallsPerAction, MaxAttempts: p.Execution.MaxAttemptsPerAction,
		Reflection: p.Reflection.Enabled, ReflectOnError: p.Reflection.TriggerOnError, ReflectEvery: p.Reflection.TriggerInterval,
		MaxRevisions: p.Revision.MaxRevisions, Verification: p.Verification.Enabled, MaxVerifyRounds: p.Verification.MaxRounds,
		MaxReplans: p.Replan.MaxReplans, CallComments: p.LLMCallComments.Enabled, HistoryDir: p.History.Directory,
	}
}

// budget is the model's context budget: context_length for every provider,
// else what the server says (Ollama), else the documented default; the
// reply reserve is max_token (else a quarter of the window, at most 4096).
func (a *App) budget(ctx context.Context) engine.Budget {
	c := a.cfg.LLM
	var window, reserve int
	provider, model := a.model()
	if p, ok := providers[c.Provider]; ok {
		_, window, reserve, _ = p.settings(c)
		if window == 0 {
			window = p.window(ctx, a, model)
		}
	}
	if reserve == 0 {
		reserve = min(window/4, 4096)
	}
	a.Log.Info("model context budget", "provider", provider, "model", model, "context_length", window,
		"reply_reserve", reserve, "compact_at", c.CompactAt)
	return engine.Budget{ContextLength: window, Reserve: reserve, CompactAt: c.CompactAt, Counter: tokens.ForModel(model)}
}

// newLLM builds the model client for the budget: Ollama's num_ctx is the
// window, and every reply is limited to the reserve (max_token, or the
// reserve the budget assumed), the provider's option, not repeated in each
// request. Under the retries, wire.AnswerTransport reads the answers as
// servers really send them: an error in a 200 is retried as the server's
// error, a stream nobody asked for is read.
func (a *App) newLLM(budget engine.Budget) (llm.Client, error) {
	window, reserve := budget.ContextLength, budget.Reserve
	c := a.cfg.LLM
	base, err := a.modelTransport()
	if err != nil {
		return nil, err
	}
	// The recorder sits below the answer reader: a recording holds what
	// the server sent, before an error in a 200 or an unasked stream is
	// read.
	client := a.httpClientOver(wire.AnswerTransport{Next: base}, c.Timeout(), true)
	var m llm.Client
	p, err := a.provider()
	if err == nil {
		m, err = p.client(c, window, reserve, client, a.Log)
	}
	if err != nil {
		return nil, fmt.Errorf("setting up the %s model client: %w", c.Provider, err)
	}
	return m, nil
}

// modelTransport is what the model's retries send each attempt through:
// with llm.record set, the recorder (opened once, closed with the app)
// over the network, so that every attempt's raw answer is recorded as the
// server sent it; nil (the network) otherwise.
func (a *App) modelTransport() (http.RoundTripper, error) {
	path := a.cfg.LLM.Record
	if path == "" {
		return nil, nil
	}
	if a.recorder == nil {
		r, err := record.Open(path, record.Options{Secrets: a.cfg.Secrets(), Logger: a.Log})
		if err != nil {
			return nil, fmt.Errorf("llm.record: %w", err)
		}
		a.recorder = r
		a.closers = append(a.closers, r)
		a.Log.Info("recording the model's requests and answers", "file", path)
	}
	return a.recorder.Transport(http.DefaultTransport), nil
}

// model is the provider and model name recorded with each task.
func (a *App) model() (string, string) {
	c := a.cfg.LLM
	p, ok := providers[c.Provider]
	if !ok {
		return c.Provider, ""
	}
	model, _, _, _ := p.settings(c)
	return c.Provider, model
}

// newWorker builds the worker; shutdown is closed when the process shuts
// down, which ends the runs in hand at their next checkpoint.
func (a *App) newWorker(q *jobs, shutdown <-chan struct{}) *worker.Worker {
	l := a.cfg.Labels()
	provider, model := a.model()
	self := a.self
	self.Provider, self.Model = provider, model
	bot := a.cfg.BotName()
	cd, cv, tr := a.cfg.CommentDetection, a.cfg.Conversation, a.cfg.Trust
	newWatch := func(who *watch.Audience, comments []task.Comment) engine.Watch {
		return a.wake.watching(watch.New(watch.Options{Forge: a.forge, Comments: cd.Enabled, Interval: cd.CheckInterval,
			Labels: l, Shutdown: shutdown, Posted: a.posts.Count, Logger: a.Log}, who, comments))
	}
	o := worker.Options{Forge: a.forge, Store: a.store, Record: a.record, Page: a.page(), Agent: a.runner, NewWatch: newWatch, Workspaces: a.ws,
		Labels: l,
		Trust: watch.Trust{Allowed: cd.AllowedUsers, HearAuthor: tr.HearAuthorWithoutAccess,
			LabelerNeedsWrite: tr.LabelerNeedsWriteAccess},
		Conversation: worker.Conversation{Enabled: cv.Enabled, AllowCollaborators: cv.AllowCollaborators,
			Keywords: cv.CompletionKeywords, Timeout: cv.Timeout(), MaxRounds: cv.MaxRounds,
			Ask: a.llm, Constrained: a.cfg.LLM.Constrained == config.ConstrainedAuto, Questions: a.dry == nil},
		Lang: report.ParseLang(a.cfg.Language), Owner: self, Ran: a.metrics.TaskRan,
		BotName: bot, Workers: a.cfg.Continuous.Consumer.Workers, Shutdown: shutdown, Redact: a.redact, Logger: a.Log,
		ForgeLease: a.cfg.ForgeLease(), SharedStore: a.cfg.Database.URL != "", CheckRounds: a.cfg.Workspace.CheckRounds,
		Now: a.o.Clock}
	if q != nil {
		// The in-process queue feeds this process's workers alone: a pass
		// claims no more than they can start. A broker spreads the jobs
		// over every host's workers (docs/design.md, "Fair claiming").
		o.Queue, o.Redeliver, o.FairClaim = q, !q.backlog, q.backlog
	}
	if a.cfg.Queue.Type == config.QueueRabbitMQ {
		// The broker's limit on a job's deliveries is the limit on a
		// round's runs too, a takeover's new job counting as a delivery.
		o.MaxAttempts = a.cfg.Queue.RabbitMQ.MaxDeliveries
	}
	return worker.New(o)
}

// Close stops the MCP servers and closes the store and the log, in reverse
// order of creation.
func (a *App) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	a.closers = nil
	return errors.Join(errs...)
}

// Redact removes the config's secrets from s (for messages printed outside
// the logger).
func Redact(cfg *config.Config, s string) string {
	return sanitize.NewRedactor(cfg.Secrets()).Redact(s)
}

// workspaces gives tasks their checkouts when some MCP server works in one
// (scope: task); nil otherwise.
func (a *App) workspaces() (worker.Workspaces, error) {
	c := a.cfg
	if !c.TaskWorkspaces() {
		return nil, nil
	}
	id := workspace.Identity{Name: c.Delivery.Author.Name, Email: c.Delivery.Author.Email}
	m, err := workspace.New(workspace.Options{Root: c.Workspace.Root, Author: id, Committer: id, Logger: a.Log, Redact: a.redact,
		MaxFileBytes: c.Delivery.MaxFileBytes})
	if err != nil {
		return nil, err
	}
	// The forge's git takes the token as a password: GitHub's user is
	// x-access-token, GitLab's oauth2. A GitHub App's token is asked for
	// at each command: it changes every hour.
	user := forges[c.TaskSource].GitUser
	auth := func(ctx context.Context) (string, error) {
		token, err := a.gitToken(ctx)
		if err != nil {
			return "", err
		}
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+token)), nil
	}
	d := c.Delivery
	var push func(context.Context, task.Ref, *workspace.Workspace) error
	if a.dry != nil {
		push = a.dry.push
	}
	return taskWorkspaces{m: a.metrics, Tasks: workspace.NewTasks(workspace.TasksOptions{Manager: m, Host: a.host, Forge: a.forge, Auth: auth,
		Delivery: workspace.Delivery{Enabled: d.Enabled, Draft: d.Draft, BranchPrefix: d.BranchPrefix, Push: push},
		Keep:     c.Workspace.Keep, Redact: a.redact, Box: a.box, Lang: report.ParseLang(c.Language)})}, nil
}

// taskWorkspaces is workspace.Tasks as the worker takes it, with the
// tools of each task counted.
type taskWorkspaces struct {
	*workspace.Tasks
	m *metrics.Metrics
}

func (t taskWorkspaces) Open(ctx context.Context, tk task.Task) (worker.Workspace, error) {
	o, err := t.Tasks.Open(ctx, tk)
	if err != nil {
		return nil, err
	}
	return countedWorkspace{Workspace: o, m: t.m}, nil
}

// countedWorkspace is a task's workspace whose tool calls are counted.
type countedWorkspace struct {
	worker.Workspace
	m *metrics.Metrics
}

func (w countedWorkspace) Tools() engine.Caller { return w.m.Caller(w.Workspace.Tools()) }

// newSelf is this start of the process: host_name (else the machine's
// name), the PID, a new random instance id and the configured lease.
func newSelf(cfg *config.Config) (store.Owner, error) {
	host := cfg.HostName
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			return store.Owner{}, fmt.Errorf("reading the host name (set host_name): %w", err)
		}
		host = h
	}
	id := make([]byte, 6)
	if _, err := rand.Read(id); err != nil {
		return store.Owner{}, fmt.Errorf("making an instance id: %w", err)
	}
	return store.Owner{Host: host, PID: os.Getpid(), Instance: hex.EncodeToString(id), Lease: cfg.Lease()}, nil
}
