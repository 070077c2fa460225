package config

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/coding-agent/coding-agent/internal/task"
)

var (
	repoPattern    = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)
	projectPattern = regexp.MustCompile(`^([0-9]+|[^/\s]+(/[^/\s]+)+)$`)
	mcpNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// Validate checks a Config whose defaults are already in place (Parse and
// Load do that; Default gives a starting point) and returns every problem at
// once as *Problems, or nil. Sections of the task source and provider not
// selected are not checked.
func (c *Config) Validate() error {
	var k checker
	if k.oneOf("task_source", c.TaskSource, Forges...) {
		c.section().validate(&k)
	}
	k.required("state_dir", c.StateDir, "required")
	c.Database.validate(&k)
	c.LLM.validate(&k)
	validateMCP(&k, c.MCPServers, c.BuiltinTools())
	k.within("tools.call_timeout_seconds", c.Tools.CallTimeoutSeconds, 1, MaxTimeoutSeconds, "a day")
	k.within("tools.max_result_bytes", c.Tools.MaxResultBytes, 1, MaxResultBytes, "16 MiB")
	k.within("max_llm_process_num", c.MaxLLMProcessNum, 1, MaxLLMCalls, "")
	if m := c.Continuous.Producer.IntervalMinutes; math.IsNaN(m) || m*60 < 1 || m > MaxIntervalMinutes {
		k.add("continuous.producer.interval_minutes",
			fmt.Sprintf("must be a number of minutes from 1/60 (one second) to %d (a day)", MaxIntervalMinutes))
	}
	k.within("continuous.consumer.workers", c.Continuous.Consumer.Workers, 1, MaxWorkers, "")
	k.within("shutdown_grace_seconds", c.ShutdownGraceSeconds, 0, MaxShutdownGraceSeconds, "an hour")
	k.within("lease_seconds", c.LeaseSeconds, 3, MaxTimeoutSeconds, "a day")
	switch fl := c.ForgeLeaseSeconds; {
	case fl == nil: // the default (ForgeLease)
	case *fl != 0 && (*fl < minForgeLease || *fl > MaxTimeoutSeconds):
		k.add("forge_lease_seconds", fmt.Sprintf("must be 0 (off) or from %d to %d (a day)", minForgeLease, MaxTimeoutSeconds))
	case *fl != 0 && c.Database.URL != "":
		// A shared store holds the lease (lease_seconds); a holder comment
		// on the forge would contradict its takeovers.
		k.add("forge_lease_seconds", "is for hosts with stores of their own; with database.url the store's lease (lease_seconds) does its work: set it to 0")
	}
	k.oneOf("logging.level", c.Logging.Level, "debug", "info", "warn", "error")
	k.within("logging.max_age_days", c.Logging.MaxAgeDays, 0, MaxAgeDays, "ten years")
	if c.Logging.File == "" && !c.Logging.Stdout {
		k.add("logging.file", "required unless logging.stdout is true")
	}
	k.oneOf("language", c.Language, LanguageJapanese, LanguageEnglish)
	k.oneOf("comments.mode", c.Comments.Mode, CommentsLiving, CommentsSeparate)
	c.Planning.validate(&k)
	c.CommentDetection.validate(&k)
	c.Conversation.validate(&k)
	c.validateWorkspace(&k)
	c.Sandbox.validate(&k)
	c.Queue.validate(&k)
	c.Server.validate(&k)
	validateRecord(&k, c.LLM.Record)
	return k.ps.err()
}

// validate wants an empty url (the embedded store) or a PostgreSQL URL.
// Its message never repeats the URL, which may hold a password.
func (d *Database) validate(k *checker) {
	if d.URL == "" {
		return
	}
	u, err := url.Parse(d.URL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		k.add("database.url", "must be a postgres:// or postgresql:// URL (or empty for the embedded SQLite store)")
	}
}

// validate checks the comment_detection section, also when it is off.
// allowed_users holds plain user names: a leading "@" is a problem rather
// than something stripped, so the name in the file is the name matched.
func (c *CommentDetection) validate(k *checker) {
	k.within("comment_detection.check_interval", c.CheckInterval, 1, MaxCount, "")
	for i, u := range c.AllowedUsers {
		p := fmt.Sprintf("comment_detection.allowed_users[%d]", i)
		switch {
		case strings.TrimSpace(u) == "":
			k.add(p, "must name a user")
		case strings.HasPrefix(u, "@"):
			k.add(p, `must be a user name without the leading "@"`)
		case strings.ContainsFunc(u, unicode.IsSpace):
			k.add(p, "must be a single user name, without spaces")
		}
	}
}

// validate checks the conversation section, also when it is off.
func (c *Conversation) validate(k *checker) {
	for i, w := range c.CompletionKeywords {
		k.required(fmt.Sprintf("conversation.completion_keywords[%d]", i), w, "must not be empty")
	}
	if h := c.TimeoutHours; math.IsNaN(h) || h <= 0 || h > MaxTimeoutHours {
		k.add("conversation.timeout_hours", fmt.Sprintf("must be a number of hours more than 0 and at most %d (a year)", MaxTimeoutHours))
	}
	k.within("conversation.max_rounds", c.MaxRounds, 1, MaxCount, "")
	k.within("conversation.poll_seconds", c.PollSeconds, 5, MaxTimeoutSeconds, "a day")
}

// validate checks the planning section. Its values are checked even when
// planning is off, so a mistake shows before it is switched on; only the
// history directory, which is created when planning runs, waits for that.
func (p *Planning) validate(k *checker) {
	k.oneOf("planning.strategy", p.Strategy, StrategyChainOfThought)
	k.within("planning.max_subtasks", p.MaxSubtasks, 1, MaxCount, "")
	k.oneOf("planning.decomposition_level", p.DecompositionLevel,
		DecompositionMinimal, DecompositionModerate, DecompositionDetailed)
	k.within("planning.pre_planning.max_tool_calls", p.PrePlanning.MaxToolCalls, 0, MaxCount, "")
	k.within("planning.execution.max_llm_calls_per_action", p.Execution.MaxLLMCallsPerAction, 1, MaxCount, "")
	k.within("planning.execution.max_attempts_per_action", p.Execution.MaxAttemptsPerAction, 1, MaxAttempts, "")
	k.within("planning.reflection.trigger_interval", p.Reflection.TriggerInterval, 0, MaxCount, "")
	k.within("planning.revision.max_revisions", p.Revision.MaxRevisions, 0, MaxAttempts, "")
	k.within("planning.verification.max_rounds", p.Verification.MaxRounds, 1, MaxAttempts, "")
	k.within("planning.replan.max_replans", p.Replan.MaxReplans, 0, MaxAttempts, "")
	k.oneOf("planning.history.storage_type", p.History.StorageType, StorageJSONL)
	if p.Enabled {
		k.required("planning.history.directory", p.History.Directory, "required when planning.enabled is true")
	}
}

func (g *GitHub) validate(k *checker) {
	const when = "required when task_source is github"
	k.url("github.api_url", g.APIURL)
	if a := g.App; a != nil {
		if g.Token != "" {
			k.add("github.app", "sign in with github.app or github.token, not both")
		}
		if a.AppID <= 0 {
			k.add("github.app.app_id", "required: the app's id (a positive number, on the app's settings page)")
		}
		k.required("github.app.private_key_file", a.PrivateKeyFile, "required: the app's private key (.pem)")
		k.atLeast("github.app.installation_id", int(a.InstallationID), 0)
	} else {
		k.required("github.token", g.Token.Reveal(), when+" (or github.token_file, or github.app)")
	}
	validateScope(k, "github", "organization", g.Owner, g.Repositories)
	validateLabels(k, "github", g.labels())
}

// validateScope wants an owner (a user or org's name) or repositories
// ("owner/name" each, none twice), or both, in section.
func validateScope(k *checker, section, org, owner string, repos []string) {
	if owner == "" && len(repos) == 0 {
		k.add(section, "owner or repositories is required (or both)")
	}
	if strings.ContainsAny(owner, "/ ") {
		k.add(section+".owner", "must be a user or "+org+" name (list repositories under "+section+".repositories)")
	}
	seen := map[string]string{}
	for i, r := range repos {
		p := fmt.Sprintf("%s.repositories[%d]", section, i)
		switch first, dup := seen[strings.ToLower(r)]; {
		case !repoPattern.MatchString(r):
			k.add(p, `must be "owner/name"`)
		case dup:
			k.add(p, "repeats "+first)
		default:
			seen[strings.ToLower(r)] = p
		}
	}
}

func (g *GitLab) validate(k *checker) {
	const when = "required when task_source is gitlab"
	k.url("gitlab.api_url", g.APIURL)
	k.required("gitlab.token", g.Token.Reveal(), when+" (or gitlab.token_file)")
	if len(g.Projects) == 0 && g.Group == "" {
		k.add("gitlab", "project_id or group is required (or both)")
	}
	for i, p := range g.Projects {
		if !projectPattern.MatchString(p) {
			k.add(fmt.Sprintf("gitlab.project_id[%d]", i), `must be a numeric ID or a "group/project" path`)
		}
	}
	validateLabels(k, "gitlab", g.labels())
}

// validateLabels wants the seven labels of a forge non-empty and pairwise
// distinct, compared without case or surrounding spaces: a task whose
// processing label equals its bot label would be picked up again and again,
// and one whose awaiting label equals its done label could never be told
// apart. A clash is reported at the later key and names the earlier one.
func validateLabels(k *checker, section string, l task.Labels) {
	var keys, vals []string
	for _, r := range task.Roles {
		keys, vals = append(keys, r.Key), append(vals, l.Of(r.Role))
	}
	for i, v := range vals {
		p := section + "." + keys[i]
		if !k.required(p, v, "required") {
			continue
		}
		for j := range i {
			if strings.EqualFold(strings.TrimSpace(vals[j]), strings.TrimSpace(v)) {
				k.add(p, "must differ from "+section+"."+keys[j])
				break
			}
		}
	}
}

func (l *LLM) validate(k *checker) {
	k.within("llm.timeout_seconds", l.TimeoutSeconds, 1, MaxTimeoutSeconds, "a day")
	if l.CompactAt < 0.1 || l.CompactAt > 0.95 {
		k.add("llm.compact_at", fmt.Sprintf("is %g; it must be between 0.1 and 0.95", l.CompactAt))
	}
	k.oneOf("llm.constrained", l.Constrained, ConstrainedOff, ConstrainedAuto)
	if !k.oneOf("llm.provider", l.Provider, Providers...) {
		return
	}
	l.provider().validate(k, "llm."+l.Provider, "required when llm.provider is "+l.Provider)
}

// modelLimits checks a provider's max_token and context_length; 0 is
// "not set" for both.
func modelLimits(k *checker, section string, maxToken, contextLength int) {
	k.within(section+".max_token", maxToken, 0, MaxReplyTokens, "")
	k.within(section+".context_length", contextLength, 0, MaxContextLength, "")
}

// validateMCP checks mcp_servers; builtin says whether the built-in tools'
// server (BuiltinServer) is on, whose name no other server may take.
func validateMCP(k *checker, servers []MCPServer, builtin bool) {
	seen := map[string]string{}
	for i, s := range servers {
		p := fmt.Sprintf("mcp_servers[%d]", i)
		name := p + ".mcp_server_name"
		switch first, dup := seen[s.Name]; {
		case s.Name == "":
			k.add(name, "required")
		case !mcpNamePattern.MatchString(s.Name):
			k.add(name, "must use only letters, digits, _ and - (it prefixes tool names as name/tool)")
		case dup:
			k.add(name, "repeats "+first)
		case s.Name == ResourcesServer:
			k.add(name, "is the name of the host's own resource tools (resources/find, resources/read): rename this server")
		case builtin && s.Name == BuiltinServer:
			k.add(name, "is the built-in tools' server name: rename this server, or set workspace.builtin_tools: false")
		default:
			seen[s.Name] = name
		}
		switch {
		case s.URL != "":
			validateRemote(k, p, s)
		case len(s.Command) == 0:
			k.add(p+".command", "required: a list of the program and its arguments (or url, for a remote server)")
		case strings.TrimSpace(s.Command[0]) == "":
			k.add(p+".command[0]", "must name a program")
		}
		if len(s.Headers) > 0 && s.URL == "" {
			k.add(p+".headers", "only with url: a command's server takes its secrets in env")
		}
		if s.OAuth != nil && s.URL == "" {
			k.add(p+".oauth", "only with url")
		}
		for key := range s.Env {
			if key == "" || strings.ContainsAny(key, "=\x00") {
				k.add(p+".env", "variable names must be non-empty and without = or NUL")
			}
		}
		switch s.Scope {
		case "", ScopeProcess, ScopeTask:
		default:
			k.add(p+".scope", "must be one of: process, task"+didYouMean(s.Scope, ScopeProcess, ScopeTask))
		}
		if s.Sandbox && !s.PerTask() && (s.Scope == "" || s.Scope == ScopeProcess) {
			k.add(p+".sandbox", "needs scope: task: a sandbox is the task's checkout, and a process-scoped server serves every task")
		}
		k.globs(p+".tools.allow", s.Tools.Allow)
		k.globs(p+".tools.deny", s.Tools.Deny)
	}
}

// validateRemote checks a server reached over streamable HTTP at p: an
// http(s) URL, no command, env or sandbox (there is no process), scope
// process (one connection serves every task), header names that are HTTP
// tokens.
func validateRemote(k *checker, p string, s MCPServer) {
	k.url(p+".url", s.URL)
	if len(s.Command) > 0 {
		k.add(p+".command", "not with url: a server is a command or a url")
	}
	if len(s.Env) > 0 {
		k.add(p+".env", "not with url: a remote server has no process to pass it to (send secrets in headers)")
	}
	if s.PerTask() {
		k.add(p+".scope", "must be process with url: one connection serves every task")
	}
	if s.Sandbox {
		k.add(p+".sandbox", "not with url: a remote server runs elsewhere")
	}
	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		if !headerName.MatchString(name) {
			k.add(p+".headers", fmt.Sprintf("%q is not a header name", name))
		}
	}
	if o := s.OAuth; o != nil {
		if o.TokenURL != "" { // "": discovered from the server's metadata
			k.url(p+".oauth.token_url", o.TokenURL)
		}
		k.required(p+".oauth.client_id", o.ClientID, "required with oauth")
		k.required(p+".oauth.client_secret", o.ClientSecret.Reveal(), "required with oauth")
		if _, ok := s.Headers["Authorization"]; ok {
			k.add(p+".oauth", "not with an Authorization header: oauth sets it")
		}
	}
}

// headerName is an HTTP header name (a token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// globs wants every entry to be a non-empty path.Match pattern.
func (k *checker) globs(key string, globs []string) {
	for i, g := range globs {
		p := fmt.Sprintf("%s[%d]", key, i)
		if strings.TrimSpace(g) == "" {
			k.add(p, "must be a tool name or a glob such as get_*")
		} else if _, err := path.Match(g, ""); err != nil {
			k.add(p, "must be a valid glob (path.Match syntax: * ? [a-z], \\ escapes)")
		}
	}
}

// checker collects problems. Its messages never include the checked value.
type checker struct{ ps Problems }

func (k *checker) add(path, msg string) { k.ps = append(k.ps, Problem{Path: path, Msg: msg}) }

// minForgeLease is the shortest forge lease: a heartbeat every 10 s at
// most, and room for the forge's own latency.
const minForgeLease = 30

// required reports whether v is set, adding msg when it is not.
func (k *checker) required(path, v, msg string) bool {
	if strings.TrimSpace(v) == "" {
		k.add(path, msg)
		return false
	}
	return true
}

// oneOf reports whether v is one of allowed, adding a problem when it is not.
func (k *checker) oneOf(path, v string, allowed ...string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	want := strings.Join(allowed, ", ")
	if v == "" {
		k.add(path, "required (one of: "+want+")")
	} else {
		k.add(path, "must be one of: "+want)
	}
	return false
}

func (k *checker) atLeast(path string, v, minimum int) {
	if v < minimum {
		k.add(path, fmt.Sprintf("must be at least %d", minimum))
	}
}

// within wants v from lo to hi; the problem gives the range, with hi in
// words (as "a day") when that says more than the number.
func (k *checker) within(path string, v, lo, hi int, words string) {
	if v >= lo && v <= hi {
		return
	}
	msg := fmt.Sprintf("must be from %d to %d", lo, hi)
	if words != "" {
		msg += " (" + words + ")"
	}
	k.add(path, msg)
}

// url wants an absolute http or https URL with a host.
func (k *checker) url(path, v string) {
	if !k.required(path, v, "required") {
		return
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		k.add(path, "must be an absolute http or https URL")
	}
}

// validateWorkspace checks the workspace and delivery sections, also when
// no task gets a workspace; the keys that only work in one (the checks, the
// setup) are a problem then.
func (c *Config) validateWorkspace(k *checker) {
	w := c.Workspace
	k.required("workspace.root", w.Root, "required: the folder the tasks' workspaces go in")
	k.oneOf("workspace.keep", w.Keep, KeepNever, KeepFailed, KeepAlways)
	commandLines(k, "workspace.checks", w.Checks)
	k.within("workspace.check_rounds", w.CheckRounds, 0, MaxAttempts, "")
	if !c.TaskWorkspaces() {
		why := "needs a workspace, and no task gets one: " + noWorkspaceFix(w.BuiltinTools)
		if len(w.Checks) > 0 {
			k.add("workspace.checks", why)
		}
		if len(c.Sandbox.Setup) > 0 {
			k.add("sandbox.setup", why)
		}
		if len(c.Sandbox.SetupWatch) > 0 && !slices.Equal(c.Sandbox.SetupWatch, defaultSetupWatch) {
			k.add("sandbox.setup_watch", why)
		}
	}
	d := c.Delivery
	if d.BranchPrefix != "" && (!branchPrefix.MatchString(d.BranchPrefix) || strings.Contains(d.BranchPrefix, "..")) {
		k.add("delivery.branch_prefix", "must be usable in a git branch name: letters, digits and ._/- , not starting with - or /, without ..")
	}
	k.required("delivery.author.name", d.Author.Name, "required: git needs an author")
	if !strings.Contains(d.Author.Email, "@") {
		k.add("delivery.author.email", "must be an e-mail address")
	}
	if d.MaxFileBytes <= 0 || d.MaxFileBytes > MaxDeliveryFileBytes {
		k.add("delivery.max_file_bytes", fmt.Sprintf("must be from 1 to %d (1 GiB)", MaxDeliveryFileBytes))
	}
}

// noWorkspaceFix says how to give tasks a workspace, given
// workspace.builtin_tools as written.
func noWorkspaceFix(builtin *bool) string {
	if builtin != nil {
		return "set workspace.builtin_tools: true, or give an mcp_servers entry scope: task"
	}
	return "set workspace.builtin_tools: true (off by default when every mcp_servers entry is process-scoped), " +
		"or give an mcp_servers entry scope: task"
}

// commandLines wants every entry of a list of shell command lines to hold
// a command.
func commandLines(k *checker, key string, lines []string) {
	for i, l := range lines {
		k.required(fmt.Sprintf("%s[%d]", key, i), l, "must be a command line")
	}
}

// validate checks the sandbox section, also when no task gets a
// workspace (its keys that need one are checked by validateWorkspace).
func (s *Sandbox) validate(k *checker) {
	if !slices.Contains([]string{SandboxNamespaces, SandboxLandlock, SandboxNone}, s.Require) {
		k.add("sandbox.require", "must be one of: namespaces, landlock, none"+
			didYouMean(s.Require, SandboxNamespaces, SandboxLandlock, SandboxNone))
	}
	if s.Network != NetworkOff && s.Network != NetworkOn {
		k.add("sandbox.network", "must be one of: off, on")
	}
	commandLines(k, "sandbox.setup", s.Setup)
	for i, g := range s.SetupWatch {
		p := fmt.Sprintf("sandbox.setup_watch[%d]", i)
		switch _, err := path.Match(g, ""); {
		case strings.TrimSpace(g) == "":
			k.add(p, "must be a file name or a glob such as requirements*.txt")
		case err != nil:
			k.add(p, "must be a valid glob (path.Match syntax: * ? [a-z], \\ escapes)")
		case strings.HasPrefix(g, "/") || slices.Contains(strings.Split(g, "/"), ".."):
			k.add(p, "must be a path relative to the checkout, without a leading / or ..")
		}
	}
	if s.CommandTimeoutSeconds < 1 || s.CommandTimeoutSeconds > MaxCommandTimeoutSeconds {
		k.add("sandbox.command_timeout_seconds", fmt.Sprintf("must be from 1 to %d", MaxCommandTimeoutSeconds))
	}
	k.within("sandbox.memory_mb", s.MemoryMB, MinMemoryMB, MaxMemoryMB, "1 TiB")
	k.within("sandbox.max_processes", s.MaxProcesses, MinMaxProcesses, MaxMaxProcesses, "")
	if s.MaxOutputBytes < MinOutputBytes || s.MaxOutputBytes > MaxOutputBytes {
		k.add("sandbox.max_output_bytes", fmt.Sprintf("must be from %d to %d (1 MiB)", MinOutputBytes, MaxOutputBytes))
	}
	for _, name := range slices.Sorted(maps.Keys(s.Env)) {
		if !validEnvName(name) {
			k.add("sandbox.env."+name, "must be a variable name: letters, digits and _, not starting with a digit")
		}
	}
	for i, p := range s.ReadOnlyPaths {
		key := fmt.Sprintf("sandbox.read_only_paths[%d]", i)
		switch {
		case strings.TrimSpace(p) == "":
			k.add(key, "must be a directory")
		case strings.HasPrefix(p, "~"):
			k.add(key, "must be an absolute path (~ is not expanded: write ${HOME}/...)")
		case !strings.HasPrefix(p, "/"):
			k.add(key, "must be an absolute path")
		case path.Clean(p) == "/":
			k.add(key, "must not be /: the commands would read every file, the agent's secrets and store among them")
		}
	}
}

// queueName is a RabbitMQ queue name this project accepts: printable, no
// spaces, not the broker's reserved amq. prefix.
var queueName = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,200}$`)

func (q Queue) validate(k *checker) {
	if !k.oneOf("queue.type", q.Type, QueueMemory, QueueRabbitMQ) || q.Type != QueueRabbitMQ {
		return
	}
	r := q.RabbitMQ
	if k.required("queue.rabbitmq.url", r.URL, "required") {
		u, err := url.Parse(r.URL)
		if err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") || u.Host == "" {
			k.add("queue.rabbitmq.url", "must be an amqp:// or amqps:// URL with a host")
		}
	}
	if k.required("queue.rabbitmq.name", r.Name, "required") &&
		(!queueName.MatchString(r.Name) || strings.HasPrefix(r.Name, "amq.")) {
		k.add("queue.rabbitmq.name", "must be 1-200 letters, digits and _.:- , not starting with amq.")
	}
	k.within("queue.rabbitmq.max_deliveries", r.MaxDeliveries, 1, MaxCount, "")
}

// branchPrefix is what a branch name may start with here (a subset of git's
// rules that needs no escaping anywhere).
var branchPrefix = regexp.MustCompile(`^[A-Za-z0-9._][A-Za-z0-9._/-]*$`)

// validate wants a listen address with a port when the server is on, and
// a listen address for a webhook secret to be of use.
func (s Server) validate(k *checker) {
	if s.KeepEventsDays < 1 || s.KeepEventsDays > 3650 {
		k.add("server.keep_events_days", "must be from 1 to 3650")
	}
	if s.UIToken != "" && len(s.UIToken) < 16 {
		k.add("server.ui_token", "must be at least 16 characters: it is all that guards the task pages")
	}
	if s.PublicURL != "" {
		if u, err := url.Parse(s.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			k.add("server.public_url", "must be an http or https URL, e.g. https://agent.example.com")
		}
	}
	if s.Listen == "" {
		if s.GitHubWebhookSecret != "" || s.GitLabWebhookToken != "" || s.GiteaWebhookSecret != "" {
			k.add("server.listen", "required when a webhook secret or token is set: the address to listen on, e.g. 127.0.0.1:8080")
		}
		if s.UIToken != "" {
			k.add("server.listen", "required when server.ui_token is set: the address to serve the task pages on, e.g. 127.0.0.1:8080")
		}
		return
	}
	_, port, err := net.SplitHostPort(s.Listen)
	if err != nil {
		k.add("server.listen", "must be host:port or :port, e.g. 127.0.0.1:8080")
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		k.add("server.listen", "the port must be a number from 0 to 65535")
	}
}

// Warnings are the things a valid config does that are worth telling: Parse
// and Load return them with the decoder's own.
//   - no tools at all: no mcp_servers, and the built-in tools turned off;
//   - sandbox.network: off with sandbox.require: none, where a host without
//     namespaces or Landlock could not keep the network from the commands;
//   - each sandbox.env variable held for a secret: the model's commands can
//     read it, and write it into the work they deliver.
func (c *Config) Warnings() []Warning {
	var ws []Warning
	if len(c.MCPServers) == 0 && !c.BuiltinTools() {
		ws = append(ws, Warning{Path: "mcp_servers", Msg: "none configured: the agent would have no tools, " +
			"and could only write comments (workspace.builtin_tools is false)"})
	}
	if c.Sandbox.Require == SandboxNone && c.Sandbox.Network == NetworkOff {
		ws = append(ws, Warning{Path: "sandbox.network", Msg: "off is kept only where the host gives namespaces or Landlock: " +
			"with sandbox.require: none, on a host without either the commands run with the network " +
			"(coding-agent doctor says what this host gives)"})
	}
	for _, name := range c.sandboxSecrets() {
		ws = append(ws, Warning{Path: "sandbox.env." + name, Msg: "is taken for a secret: it is redacted from logs and comments, " +
			"but the model's commands can read it, and could write it into the work that is delivered"})
	}
	return ws
}
