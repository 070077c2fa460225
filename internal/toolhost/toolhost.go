// Package toolhost runs the MCP tool servers the agent uses: it starts each
// configured server (all at once), lists its tools, checks a call's arguments
// against the tool's input schema, calls them with timeouts, restarts a
// server that dies or does not answer in time, and stops them all on Close.
// A server of scope task runs one instance per task instead, in the task's
// Session (ForTask). Tool failures come back as results for the model; only
// the caller's own cancellation is an error.
package toolhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os/exec"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	defaultCallTimeout    = 2 * time.Minute
	defaultStartTimeout   = 60 * time.Second
	defaultMaxResultBytes = 32 << 10
	defaultStopTimeout    = 3 * time.Second
)

// ErrClosed is returned by Call after Close (of the host, or of the session
// called).
var ErrClosed = errors.New("tool host is closed")

// Scope says how many instances of a server run.
type Scope string

// The scopes of a server.
const (
	// ScopeProcess runs one instance for the whole process, shared by every
	// task; the zero Scope means it too.
	ScopeProcess Scope = "process"
	// ScopeTask runs one instance per task, started by ForTask with the
	// task's variables expanded in its Command and Env (see TaskVars).
	ScopeTask Scope = "task"
)

// ServerConfig describes one MCP server run over stdio.
type ServerConfig struct {
	// Name is unique; the server's tools are called "Name/tool". No "/" or spaces.
	Name string
	// Command is the program and its arguments.
	Command []string
	// URL, instead of Command, is a remote server's streamable HTTP
	// endpoint (ScopeProcess only); Headers go with each request to it.
	URL     string
	Headers map[string]string
	// OAuth, with URL, signs the requests in with client credentials.
	OAuth *OAuthClient
	// Env is the server's whole environment, plus PATH and HOME inherited from
	// ours unless set here. No other variable of ours reaches the server.
	Env map[string]string
	// Scope is ScopeProcess (or empty) or ScopeTask. With ScopeTask,
	// Command and Env are templates: ${WORKSPACE}, ${TASK_REF} and
	// ${BRANCH} are replaced by a task's values when its instance starts,
	// and $${ stands for a literal "${" (TaskVars).
	Scope Scope
	// SystemPrompt is text about this server's tools for the system prompt.
	SystemPrompt string
	// Allow and Deny choose which of the server's tools are offered: globs of
	// tool names (path.Match syntax, without the server prefix). A tool is
	// offered when Allow is empty or one of its globs matches, and no Deny
	// glob matches. A tool not offered is not callable either: the model
	// gets the "unknown tool" answer.
	Allow, Deny []string
	// InProcess, when set, serves the server from this process instead of
	// running Command: it is called with the task's variables (the probe's
	// placeholders at Start) and the server it returns is connected over
	// in-memory transports. Only such a server's results may carry
	// Result.Ran: it is the daemon's own.
	InProcess func(vars TaskVars) (*mcp.Server, error)
	// Confine, when set, makes the process that runs Command (expanded)
	// with Env: a task's sandbox, with the task's variables. The command it
	// returns must end its whole tree when its process is killed; the host
	// adds only stderr and the wait delay.
	Confine func(vars TaskVars, argv []string, env map[string]string) (*exec.Cmd, error)
	// CallTimeout bounds each call of this server's tools instead of
	// Options.CallTimeout (the built-in server's commands have their own,
	// longer limit); 0: Options.CallTimeout.
	CallTimeout time.Duration

	// vars are the task's values an instance was expanded with (forTask).
	vars TaskVars
}

// offers reports whether the server offers its tool name to the model. The
// globs were checked by validate.
func (s ServerConfig) offers(name string) bool {
	return (len(s.Allow) == 0 || matchAny(s.Allow, name)) && !matchAny(s.Deny, name)
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// Options configures Start. Zero values mean defaults.
type Options struct {
	Servers []ServerConfig
	// CallTimeout bounds each tool call; 0 means 2 minutes. A call that
	// outlives it restarts its server.
	CallTimeout time.Duration
	// StartTimeout bounds starting a server, its handshake and listing its tools; 0 means 60s.
	StartTimeout time.Duration
	// MaxResultBytes caps the result text given to the model; 0 means 32 KiB.
	MaxResultBytes int
	// StopTimeout is how long Close waits for a server to exit after closing its
	// input, and again after SIGTERM, before killing it; 0 means 3s.
	StopTimeout time.Duration
	// Logger receives start, restart and stderr logs; nil discards them.
	Logger *slog.Logger
	// Redact removes secrets from everything a server says that is passed
	// on: every result and tool error (before it is cut to MaxResultBytes),
	// and the tools' descriptions and schemas. A server runs as our user
	// and may have read a secret from its environment, a file or our
	// process; this is the one place its words enter the conversation, and
	// from there the model requests, the checkpoints, the planning history
	// and the comments. nil passes text on as it is.
	Redact func(string) string
	// Connect, if set, replaces running the server's Command (a test seam).
	Connect func(ctx context.Context, s ServerConfig) (mcp.Transport, error)
}

func (o Options) withDefaults() Options {
	if o.CallTimeout <= 0 {
		o.CallTimeout = defaultCallTimeout
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = defaultStartTimeout
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = defaultMaxResultBytes
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = defaultStopTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	return o
}

// Tool is one tool of one server.
type Tool struct {
	Server      string
	Name        string
	Description string
	// InputSchema is the JSON Schema of the tool's arguments, as the server sent it.
	InputSchema json.RawMessage
	// ReadOnly is the server's readOnlyHint annotation: the tool does not
	// change its environment. Planning mode lets only these run before the
	// plan exists.
	ReadOnly bool
}

// FullName is the name Call takes: "server/tool".
func (t Tool) FullName() string { return t.Server + "/" + t.Name }

// Host owns the running MCP servers. It is safe for concurrent use.
type Host struct {
	opts   Options
	log    *slog.Logger
	client *mcp.Client
	// servers are every configured server in config order: a process-scoped
	// one running, a task-scoped one as its probe found it (its tools, no
	// instance).
	servers []*server
	byName  map[string]*server
	tools   []Tool
	// resources are what the process-scoped servers listed at start,
	// searched and read through the host's resources/ tools.
	resources []resource

	life      *lifetime // ends on Close
	asking    asking    // the calls in flight, for their servers' questions (ask.go)
	mu        sync.Mutex
	sessions  map[*Session]struct{} // open, closed with the host
	closeOnce sync.Once
	closeErr  error
}

// Start starts every process-scoped server and probes every task-scoped one,
// all at once, and lists their tools. If one cannot start, the starts under
// way are cancelled, the servers started are stopped, and the error names
// the server that failed.
//
// The catalog must be known before any task (the engine builds it and checks
// it fits the context budget at startup), so a task-scoped server is started
// here once as a probe, with its variables set to placeholders (an empty
// temporary directory as WORKSPACE, "probe" as TASK_REF and BRANCH): its
// tools are listed, filtered and redacted as any server's, and it is
// stopped. A task's own instance answers for the same tools (ForTask).
func Start(ctx context.Context, opts Options) (*Host, error) {
	opts = opts.withDefaults()
	if err := validate(opts); err != nil {
		return nil, err
	}
	h := &Host{
		opts:     opts,
		log:      opts.Logger,
		byName:   make(map[string]*server, len(opts.Servers)),
		life:     newLifetime(),
		sessions: map[*Session]struct{}{},
	}
	// No roots: servers use the directories they are given on the command
	// line. Questions (form elicitation) are advertised and go to the
	// asking call's task (ask.go).
	h.client = mcp.NewClient(&mcp.Implementation{Name: "coding-agent", Version: "1"},
		&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}, ElicitationHandler: h.elicit})
	servers, err := startEach(ctx, opts.Servers, func(ctx context.Context, cfg ServerConfig) (*server, error) {
		var s *server
		var err error
		if cfg.Scope == ScopeTask {
			s, err = h.probe(ctx, cfg)
		} else {
			s, err = h.startServer(ctx, cfg, h.life, h.log, "")
		}
		if err != nil {
			return nil, fmt.Errorf("starting MCP server %q: %w", cfg.Name, err)
		}
		return s, nil
	})
	if err != nil {
		h.life.end()
		return nil, err
	}
	h.servers = servers
	for _, s := range servers {
		h.byName[s.cfg.Name] = s
		h.tools = append(h.tools, s.tools...)
		h.resources = append(h.resources, s.resources...)
		h.log.Info("started MCP server", "server", s.cfg.Name, "scope", s.cfg.scope(), "tools", len(s.tools), "withheld", s.withheld,
			"resources", len(s.resources))
	}
	if len(h.resources) > 0 {
		h.tools = append(h.tools, resourceTools(len(h.resources))...)
	}
	return h, nil
}

func validate(opts Options) error {
	seen := make(map[string]bool, len(opts.Servers))
	var errs []error
	for i, s := range opts.Servers {
		switch {
		case s.Name == "":
			errs = append(errs, fmt.Errorf("starting MCP server #%d: the server has no name", i+1))
		case strings.ContainsAny(s.Name, "/ \t\n"):
			errs = append(errs, fmt.Errorf("starting MCP server %q: the name must not contain '/' or spaces", s.Name))
		case seen[s.Name]:
			errs = append(errs, fmt.Errorf("starting MCP server %q: duplicate server name", s.Name))
		case s.Name == ResourceServer:
			errs = append(errs, fmt.Errorf("starting MCP server %q: the name is the host's own (its resource tools)", s.Name))
		case opts.Connect == nil && s.InProcess == nil && len(s.Command) == 0 && s.URL == "":
			errs = append(errs, fmt.Errorf("starting MCP server %q: no command", s.Name))
		case s.URL != "" && s.Scope == ScopeTask:
			errs = append(errs, fmt.Errorf("starting MCP server %q: a remote server (url) is process-scoped", s.Name))
		case s.Scope != "" && s.Scope != ScopeProcess && s.Scope != ScopeTask:
			errs = append(errs, fmt.Errorf("starting MCP server %q: scope %q is not %q or %q", s.Name, s.Scope, ScopeProcess, ScopeTask))
		}
		for _, g := range slices.Concat(s.Allow, s.Deny) {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				errs = append(errs, fmt.Errorf("starting MCP server %q: tool filter %q is not a valid glob", s.Name, g))
			}
		}
		seen[s.Name] = true
	}
	return errors.Join(errs...)
}

// Tools returns every tool of every server: servers in config order, each
// server's tools in the order it listed them (a task-scoped server's as its
// probe listed them).
func (h *Host) Tools() []Tool {
	out := make([]Tool, len(h.tools))
	copy(out, h.tools)
	return out
}

// Servers returns the server configs, in order (for system prompts).
func (h *Host) Servers() []ServerConfig {
	out := make([]ServerConfig, len(h.opts.Servers))
	copy(out, h.opts.Servers)
	return out
}

// Restarts reports how many times the named server has been restarted (0
// for a task-scoped server: see Session.Restarts).
func (h *Host) Restarts(server string) int {
	s, ok := h.byName[server]
	if !ok {
		return 0
	}
	return int(s.restarts.Load())
}

// Call calls the tool fullName ("server/tool") with args, a JSON object.
//
// Everything that goes wrong with the tool (an error result, an unknown tool or
// server, arguments that are not one JSON object or do not match the tool's
// input schema, a timeout, a crashed server) comes back as a Result
// with IsError set and a message for the model, and a nil error. The error is
// non-nil only when ctx ends (or the host is closed): then stop working.
//
// A task-scoped server has no instance outside a task: its tools are called
// through the task's Session, and calling one here is a tool error.
func (h *Host) Call(ctx context.Context, fullName string, args json.RawMessage) (Result, error) {
	return h.call(ctx, h.life, nil, fullName, args)
}

// call is Call for the owner whose life is given (the host, or a session):
// instances are the owner's instances of the task-scoped servers.
func (h *Host) call(ctx context.Context, life *lifetime, instances map[string]*server, fullName string, args json.RawMessage) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("calling MCP tool %s: %w", fullName, err)
	}
	if life.ended() || h.life.ended() {
		return Result{}, fmt.Errorf("calling MCP tool %s: %w", fullName, ErrClosed)
	}
	if srv, tool, _ := strings.Cut(fullName, "/"); srv == ResourceServer && len(h.resources) > 0 {
		m, err := parseArgs(args)
		if err != nil {
			return h.toolError(fmt.Sprintf("Invalid arguments for %s: %v.", fullName, err)), nil
		}
		return h.callResources(ctx, tool, m), nil
	}
	s, tool, problem := h.resolve(fullName)
	if problem != "" {
		return h.toolError(problem), nil
	}
	if s.cfg.Scope == ScopeTask {
		if s, problem = instance(instances, s, tool); problem != "" {
			return h.toolError(problem), nil
		}
	}
	m, err := parseArgs(args)
	if err != nil {
		return h.toolError(fmt.Sprintf("Invalid arguments for %s: %v. Send the arguments as one JSON object that matches the tool's input schema.", fullName, err)), nil
	}
	// A server may trust its schema and crash on anything else: it is not
	// called with arguments that do not match.
	if problem := checkArgs(s.schemas[tool], args); problem != "" {
		return h.toolError(fmt.Sprintf("Invalid arguments for %s: %s. The tool was not called: send the arguments again as one JSON object that matches the tool's input schema.", fullName, problem)), nil
	}
	return s.call(ctx, tool, m)
}

// resolve finds the server and tool of fullName, or explains what is wrong.
func (h *Host) resolve(fullName string) (*server, string, string) {
	srv, tool, ok := strings.Cut(fullName, "/")
	if !ok || srv == "" || tool == "" {
		return nil, "", fmt.Sprintf("Invalid tool name %q: tool names have the form server/tool. Known servers: %s.", fullName, strings.Join(h.serverNames(), ", "))
	}
	s, ok := h.byName[srv]
	if !ok {
		return nil, "", fmt.Sprintf("Unknown MCP server %q in tool name %q. Known servers: %s.", srv, fullName, strings.Join(h.serverNames(), ", "))
	}
	if !s.hasTool(tool) {
		return nil, "", fmt.Sprintf("Unknown tool %q on MCP server %q. Its tools are: %s.", tool, srv, strings.Join(s.toolNames(), ", "))
	}
	return s, tool, ""
}

func (h *Host) serverNames() []string {
	names := make([]string, len(h.servers))
	for i, s := range h.servers {
		names[i] = s.cfg.Name
	}
	return names
}

// parseArgs checks that raw is one JSON object (empty or null means {}).
func parseArgs(raw json.RawMessage) (map[string]any, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return map[string]any{}, nil
	}
	if trimmed[0] != '{' {
		return nil, errors.New("the arguments are not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("the arguments are not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("there is more after the JSON object")
	}
	return m, nil
}

// toolError is a tool error result with message for the model. The
// message may quote what the server said, so it is redacted too.
func (h *Host) toolError(msg string) Result {
	r := truncate(h.opts.Redact(msg), h.opts.MaxResultBytes)
	r.IsError = true
	return r
}

// result turns an MCP tool result into a Result, redacted before it is
// cut (a secret across the cut would leave its first part behind).
func (h *Host) result(res *mcp.CallToolResult, own bool) Result {
	r := truncate(h.opts.Redact(renderContent(res)), h.opts.MaxResultBytes)
	r.IsError = res.IsError
	if own {
		r.Ran = h.ran(res.StructuredContent)
	}
	return r
}

// ran reads the command an in-process server's result says it ran: a
// structured content with a command line; nil when it has none.
func (h *Host) ran(structured any) *CommandRun {
	if structured == nil {
		return nil
	}
	b, err := json.Marshal(structured)
	if err != nil {
		return nil
	}
	var c CommandRun
	if json.Unmarshal(b, &c) != nil || c.Command == "" {
		return nil
	}
	c.Command = h.opts.Redact(c.Command)
	return &c
}

// Close stops every server, and the instances of every session still open:
// calls in flight are cancelled, each server's input is closed, and a
// server still running after StopTimeout gets SIGTERM, then SIGKILL.
// Nothing of ours runs after Close returns.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		h.life.end()
		h.mu.Lock()
		sessions := slices.Collect(maps.Keys(h.sessions))
		h.mu.Unlock()
		errs := make([]error, len(sessions)+1)
		var wg sync.WaitGroup
		for i, s := range sessions {
			wg.Go(func() { errs[i] = s.Close() })
		}
		wg.Go(func() { errs[len(sessions)] = closeAll(h.servers) })
		wg.Wait()
		h.closeErr = errors.Join(errs...)
	})
	return h.closeErr
}
