// Package config is the typed configuration of coding-agent: a YAML file with
// ${VAR} expansion, defaults, and a Validate that lists every problem at once
// with its key path.
//
// Rules a config file follows:
//   - ${VAR} and ${VAR:-default} are expanded in every scalar value (never in
//     keys); ":-" uses the default when VAR is unset or empty; the default is
//     the literal text up to the first "}". $${ is a literal "${", $$NAME a
//     literal "$NAME". A variable set to "" without a default expands to
//     "", and a problem its value makes says the variable is empty.
//   - $NAME without braces is taken for a forgotten ${NAME} (a problem that
//     shows the fix) where nothing else is likely: a value that is $NAME
//     alone, and an upper-case $NAME inside any longer value but an MCP
//     server's command and system_prompt, workspace.checks, sandbox.setup
//     and the completion keywords (a shell script's and prose's own $). Any other $ is kept as is: before
//     a digit or punctuation, at the end, a lower-case $name inside text.
//     Inside a flow list or map ([a, b] or
//     {k: v}) a value holding ${...} must be quoted, as YAML requires.
//   - ${WORKSPACE}, ${TASK_REF} and ${BRANCH} (TaskVariables) are not read
//     from the environment: a task sets them when a server of scope task
//     starts for it, so they may appear only in the command and env of such
//     a server, where they are kept (see MCPServer). Anywhere else they are
//     a problem.
//   - A number or boolean key takes a plain scalar (max_llm_process_num: 5),
//     or a string that came from ${VAR} expansion; a quoted literal ("5") is a
//     string and so a type error.
//   - An explicit null (key: or key: ~) leaves the default in place; an explicit
//     empty string "" replaces it.
//   - Keys of features this version does not build yet are accepted with a
//     Warning (see notYetSupported); any other unknown key is a Problem.
//   - A list replaces its default as a whole: completion_keywords: [done]
//     leaves only "done", and completion_keywords: [] leaves none.
package config

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
)

// LLM providers accepted in llm.provider.
const (
	ProviderOpenAI   = "openai"
	ProviderLMStudio = "lmstudio"
	ProviderOllama   = "ollama"
)

// Values accepted in llm.constrained.
const (
	ConstrainedOff  = "off"
	ConstrainedAuto = "auto"
)

// Languages accepted in language: the language of the comments the agent
// writes on the task.
const (
	LanguageJapanese = "ja"
	LanguageEnglish  = "en"
)

// Values accepted in comments.mode.
const (
	// CommentsLiving: each round shows one living comment, edited in place
	// with every step, and one closing comment.
	CommentsLiving = "living"
	// CommentsSeparate: a comment per model call (planning mode: a
	// progress comment and a comment per phase visit).
	CommentsSeparate = "separate"
)

// Comments is the comments section.
type Comments struct {
	Mode string `yaml:"mode"` // CommentsLiving or CommentsSeparate; default living
}

// Values accepted in the planning section.
const (
	StrategyChainOfThought = "chain_of_thought" // planning.strategy

	DecompositionMinimal  = "minimal"  // planning.decomposition_level
	DecompositionModerate = "moderate" // planning.decomposition_level
	DecompositionDetailed = "detailed" // planning.decomposition_level

	StorageJSONL = "jsonl" // planning.history.storage_type
)

// Config is the whole configuration. Its task sources are its forge
// sections (sections.go).
type Config struct {
	// File is the config file Load read, as an absolute path; "" for Parse.
	File             string           `yaml:"-"`
	TaskSource       string           `yaml:"task_source"`         // a forge section's key (Forges); required
	StateDir         string           `yaml:"state_dir"`           // directory of the embedded store; default ./data
	Database         Database         `yaml:"database"`            // a shared PostgreSQL store instead of the embedded one
	GitHub           GitHub           `yaml:"github"`              // read when TaskSource is github
	GitLab           GitLab           `yaml:"gitlab"`              // read when TaskSource is gitlab
	Gitea            Gitea            `yaml:"gitea"`               // read when TaskSource is gitea (Gitea or Forgejo)
	LLM              LLM              `yaml:"llm"`                 // model provider settings
	MCPServers       []MCPServer      `yaml:"mcp_servers"`         // tool servers started over stdio
	Tools            Tools            `yaml:"tools"`               // limits on tool calls
	MaxLLMProcessNum int              `yaml:"max_llm_process_num"` // most LLM requests per task; default 1000
	Continuous       Continuous       `yaml:"continuous"`          // long-running (producer/consumer) mode
	Logging          Logging          `yaml:"logging"`             // log destination and level
	Language         string           `yaml:"language"`            // "en" or "ja": language of the comments the agent writes; default "en"
	Comments         Comments         `yaml:"comments"`            // how a round reports on the task
	Planning         Planning         `yaml:"planning"`            // planning mode
	CommentDetection CommentDetection `yaml:"comment_detection"`   // reading new comments while a task runs
	Conversation     Conversation     `yaml:"conversation"`        // the follow-up conversation after a task
	Trust            Trust            `yaml:"trust"`               // who may start and steer the agent
	Workspace        Workspace        `yaml:"workspace"`           // a git checkout per task, the built-in tools and the checks
	Sandbox          Sandbox          `yaml:"sandbox"`             // how the commands the model runs are confined
	Delivery         Delivery         `yaml:"delivery"`            // the work as a branch and a draft pull/merge request
	Queue            Queue            `yaml:"queue"`               // the job queue between producer and consumers
	Server           Server           `yaml:"server"`              // serve's HTTP listener: webhooks, /healthz, /readyz, /metrics

	// ShutdownGraceSeconds is how long, after SIGINT/SIGTERM, a task in
	// hand may take to reach its next checkpoint before its model request
	// or tool call is cancelled (that step is done again on resume);
	// default 5, >= 0.
	ShutdownGraceSeconds int `yaml:"shutdown_grace_seconds"`

	// HostName names this host in the store and in the comments a takeover
	// posts; default the machine's host name.
	HostName string `yaml:"host_name"`
	// LeaseSeconds is how long a running task stays held by its process
	// without a renewal; the holder renews it every third of that, and
	// any process sharing the store takes over a task whose lease expired;
	// default 60, >= 3.
	LeaseSeconds int `yaml:"lease_seconds"`
	// ForgeLeaseSeconds is, for hosts that each have a store of their
	// own, how long a task a host took stays its own on the forge without
	// a heartbeat (the host edits its holder comment every third of
	// that); other hosts put a task whose holder stayed silent that long
	// up again. nil (not set): DefaultForgeLeaseSeconds without
	// database.url, off with it (see ForgeLease); 0: off, no holder
	// comment; else >= 30, and not with database.url.
	ForgeLeaseSeconds *int `yaml:"forge_lease_seconds"`
}

// Database is the database section: where the state store lives. With URL
// empty the store is the embedded SQLite file in state_dir; with a URL it is
// that PostgreSQL database, which several hosts may share.
type Database struct {
	URL string `yaml:"url"` // postgres:// or postgresql:// URL; "": the embedded SQLite store; its password is a secret
}

// Postgres reports whether the store is a PostgreSQL database.
func (d Database) Postgres() bool { return d.URL != "" }

// GitHub is the github section.
type GitHub struct {
	APIURL          string     `yaml:"api_url"`          // REST root; a GHE URL ends in /api/v3; default https://api.github.com
	Token           Secret     `yaml:"token"`            // personal access token; required unless TokenFile or App
	TokenFile       string     `yaml:"token_file"`       // file holding the token instead (read by Parse into Token)
	App             *GitHubApp `yaml:"app"`              // sign in as a GitHub App installation instead of a token
	Owner           string     `yaml:"owner"`            // user or org whose repositories are searched
	Repositories    []string   `yaml:"repositories"`     // "owner/name" each; with Owner, at least one is required
	Query           string     `yaml:"query"`            // extra search qualifiers appended to the search
	BotName         string     `yaml:"bot_name"`         // the token's login; empty: learned from GET /user
	BotLabel        string     `yaml:"bot_label"`        // label that asks for the agent; default "coding agent"
	ProcessingLabel string     `yaml:"processing_label"` // set while the agent works; default "coding agent processing"
	DoneLabel       string     `yaml:"done_label"`       // set when finished; default "coding agent done"
	FailedLabel     string     `yaml:"failed_label"`     // set when the task failed; default "coding agent failed"

	PausedLabel           string `yaml:"paused_label"`            // the task is paused; default "coding agent paused"
	StoppedLabel          string `yaml:"stopped_label"`           // the task was stopped; default "coding agent stopped"
	AwaitingResponseLabel string `yaml:"awaiting_response_label"` // finished, awaiting a reply; default "coding agent awaiting response"
}

// GitHubApp is the github.app section: the agent acts as the app's bot
// user through an installation token, renewed before it expires.
type GitHubApp struct {
	AppID          int64  `yaml:"app_id"`           // the app's id (its settings page); required
	PrivateKeyFile string `yaml:"private_key_file"` // the app's private key (.pem, as GitHub hands it out); required
	InstallationID int64  `yaml:"installation_id"`  // 0: the installation on the repositories (or owner), looked up
	// PrivateKey is the key file's PEM, read by Parse; a secret.
	PrivateKey Secret `yaml:"-"`
}

// GitLab is the gitlab section.
type GitLab struct {
	APIURL          string   `yaml:"api_url"`                 // REST root; default https://gitlab.com/api/v4
	Token           Secret   `yaml:"token"`                   // personal, project or group access token; required unless TokenFile
	TokenFile       string   `yaml:"token_file"`              // file holding the token instead (read by Parse into Token)
	Projects        []string `yaml:"project_id,scalarorlist"` // numeric IDs or "group/project" paths; a scalar or a list in YAML
	Group           string   `yaml:"group"`                   // group ID or path searched with its subgroups
	BotName         string   `yaml:"bot_name"`                // the token's username; empty: learned from GET /user
	BotLabel        string   `yaml:"bot_label"`               // as in GitHub
	ProcessingLabel string   `yaml:"processing_label"`        // as in GitHub
	DoneLabel       string   `yaml:"done_label"`              // as in GitHub
	FailedLabel     string   `yaml:"failed_label"`            // as in GitHub

	PausedLabel           string `yaml:"paused_label"`            // as in GitHub
	StoppedLabel          string `yaml:"stopped_label"`           // as in GitHub
	AwaitingResponseLabel string `yaml:"awaiting_response_label"` // as in GitHub
}

// LLM is the llm section.
type LLM struct {
	Provider        string `yaml:"provider"`         // ProviderOpenAI, ProviderLMStudio or ProviderOllama; required
	FunctionCalling bool   `yaml:"function_calling"` // native tool calls; false: JSON text protocol; default true
	TimeoutSeconds  int    `yaml:"timeout_seconds"`  // per request; default 600
	// CompactAt is the share of the context budget (context_length less
	// max_token) at which the conversation is compacted; default 0.7.
	CompactAt float64  `yaml:"compact_at"`
	OpenAI    OpenAI   `yaml:"openai"`   // read when Provider is openai
	LMStudio  LMStudio `yaml:"lmstudio"` // read when Provider is lmstudio
	Ollama    Ollama   `yaml:"ollama"`   // read when Provider is ollama

	// Constrained is ConstrainedAuto to have the server hold the replies to
	// the protocol (the reply's schema as a grammar in the JSON protocol,
	// tool_choice required with native calls), or ConstrainedOff (default).
	Constrained string `yaml:"constrained"`

	// Record is a file every model request and raw answer is appended
	// to, redacted, one JSON line per attempt, for a bug report; "" (the
	// default): off. Relative to the working directory, like state_dir.
	Record string `yaml:"record"`
}

// OpenAI is llm.openai.
type OpenAI struct {
	BaseURL       string `yaml:"base_url"`       // default https://api.openai.com/v1
	APIKey        Secret `yaml:"api_key"`        // required unless APIKeyFile
	APIKeyFile    string `yaml:"api_key_file"`   // file holding the key instead (read by Parse into APIKey)
	Model         string `yaml:"model"`          // required
	MaxToken      int    `yaml:"max_token"`      // most output tokens per reply; 0: provider default
	ContextLength int    `yaml:"context_length"` // model context window in tokens; 0: by model family
}

// LMStudio is llm.lmstudio (an OpenAI-compatible server).
type LMStudio struct {
	BaseURL       string `yaml:"base_url"`       // default http://localhost:1234/v1
	Model         string `yaml:"model"`          // required
	MaxToken      int    `yaml:"max_token"`      // most output tokens per reply; 0: server default
	ContextLength int    `yaml:"context_length"` // the loaded context in tokens; 0: 4096, LM Studio's default
}

// Ollama is llm.ollama.
type Ollama struct {
	Endpoint      string `yaml:"endpoint"`       // default http://localhost:11434
	Model         string `yaml:"model"`          // required
	MaxToken      int    `yaml:"max_token"`      // most output tokens per reply (num_predict); 0: default
	ContextLength int    `yaml:"context_length"` // num_ctx; 0: the model's, at most 8192
}

// Values accepted in mcp_servers[].scope.
const (
	ScopeProcess = "process" // one instance for the process, shared by every task (the default)
	ScopeTask    = "task"    // one instance per task, with the task's variables
)

// MCPServer is one entry of mcp_servers.
//
// With Scope task, Command and Env are templates for toolhost.TaskVars:
// ${WORKSPACE}, ${TASK_REF} and ${BRANCH} (TaskVariables) stay in them, to
// be replaced when the server starts for a task, and a literal "${" is
// written $${. Any other ${VAR} is expanded when the file is loaded, as
// everywhere. With Scope process they are the literal values.
type MCPServer struct {
	Name    string   `yaml:"mcp_server_name"`      // unique, ^[A-Za-z0-9_-]+$; tools are named "Name/tool"
	Command []string `yaml:"command,tasktemplate"` // program and arguments; this or URL
	// URL is a remote server's streamable HTTP endpoint, instead of
	// Command (scope process only); Headers are sent with each of its
	// requests (Authorization: Bearer ${TOKEN}), their values secrets.
	URL     string            `yaml:"url"`
	Headers map[string]Secret `yaml:"headers"`
	// OAuth, with URL, signs in with OAuth 2.0 client credentials: each
	// request carries an access token asked of its token URL, renewed
	// before it expires.
	OAuth *OAuthClient `yaml:"oauth"`

	Env          map[string]string `yaml:"env,tasktemplate"` // extra environment of the server process only
	Scope        string            `yaml:"scope"`            // ScopeProcess (default; "" too) or ScopeTask
	SystemPrompt string            `yaml:"system_prompt"`    // text added to the system prompt about this server
	Tools        ToolFilter        `yaml:"tools"`            // which of the server's tools are offered
	// Sandbox runs the server inside the task's sandbox (the sandbox
	// section's limits, its network setting, the checkout its only
	// writable place) instead of as a plain child process; only with
	// Scope task, since a process-scoped server serves every task.
	Sandbox bool `yaml:"sandbox"`
}

// OAuthClient is mcp_servers[].oauth: an OAuth 2.0 client of the client
// credentials grant.
type OAuthClient struct {
	TokenURL     string   `yaml:"token_url"`     // the authorization server's token endpoint; "": discovered from the server
	ClientID     string   `yaml:"client_id"`     // required
	ClientSecret Secret   `yaml:"client_secret"` // required
	Scopes       []string `yaml:"scopes"`        // asked for; empty: none named
}

// PerTask reports whether the server runs one instance per task.
func (s MCPServer) PerTask() bool { return s.Scope == ScopeTask }

// ToolFilter is mcp_servers[].tools: which of a server's tools the model is
// offered and may call. Each entry is a glob of tool names (without the
// server prefix) in path.Match syntax: * ? [a-z] and \ to escape.
type ToolFilter struct {
	Allow []string `yaml:"allow"` // only tools matching one are offered; empty: every tool
	Deny  []string `yaml:"deny"`  // tools matching one are never offered, even if allowed (deny wins)
}

// Tools is the tools section.
type Tools struct {
	CallTimeoutSeconds int `yaml:"call_timeout_seconds"` // per tool call; default 120
	MaxResultBytes     int `yaml:"max_result_bytes"`     // tool output passed to the model is cut here; default 32768
}

// Continuous is the continuous section (long-running mode).
type Continuous struct {
	Producer Producer `yaml:"producer"` // the poller
	Consumer Consumer `yaml:"consumer"` // the workers
}

// Producer is continuous.producer.
type Producer struct {
	IntervalMinutes float64 `yaml:"interval_minutes"` // poll interval, fractions allowed (0.5 = 30s); default 1
}

// Consumer is continuous.consumer.
type Consumer struct {
	Workers int `yaml:"workers"` // tasks run at once; default 1
}

// Server is the server section: the HTTP listener of `serve`. Without
// Listen there is none.
type Server struct {
	Listen              string `yaml:"listen"`                // host:port, e.g. 127.0.0.1:8080 (port 0: any free port); "": no listener
	GitHubWebhookSecret Secret `yaml:"github_webhook_secret"` // serves POST /webhooks/github, verified with it
	GitLabWebhookToken  Secret `yaml:"gitlab_webhook_token"`  // serves POST /webhooks/gitlab, verified with it
	GiteaWebhookSecret  Secret `yaml:"gitea_webhook_secret"`  // serves POST /webhooks/gitea (Gitea and Forgejo), verified with it
	// UIToken serves the task pages (/tasks) to requests that carry it;
	// "": no pages.
	UIToken Secret `yaml:"ui_token"`
	// PublicURL is where people reach the listener (https://agent.example.com):
	// with ui_token, each task's closing comment links its page.
	PublicURL string `yaml:"public_url"`
	// KeepEventsDays is how long a task's events (its page) are kept.
	KeepEventsDays int `yaml:"keep_events_days"`
}

// DefaultKeepEventsDays is server.keep_events_days when it is not set.
const DefaultKeepEventsDays = 30

// KeepEvents is how long a task's events are kept.
func (s Server) KeepEvents() time.Duration {
	return time.Duration(cmp.Or(s.KeepEventsDays, DefaultKeepEventsDays)) * 24 * time.Hour // 0: a Server made in code
}

// Logging is the logging section.
type Logging struct {
	File       string `yaml:"file"`         // log file, rotated daily; "" disables file logging (needs Stdout)
	Level      string `yaml:"level"`        // debug, info, warn or error; default info
	Stdout     bool   `yaml:"stdout"`       // also log to stdout
	MaxAgeDays int    `yaml:"max_age_days"` // rotated files are kept this many days; 0 keeps all; default 30
}

// Planning is the planning section: the agent plans the task, carries out the
// plan's actions, reflects on the results, revises the plan and verifies the
// outcome, instead of running one plain tool loop.
type Planning struct {
	Enabled            bool            `yaml:"enabled"`             // default true; false: the plain tool loop
	Strategy           string          `yaml:"strategy"`            // only StrategyChainOfThought (default)
	MaxSubtasks        int             `yaml:"max_subtasks"`        // default 100, >= 1
	DecompositionLevel string          `yaml:"decomposition_level"` // "minimal", "moderate" (default) or "detailed"
	PrePlanning        PrePlanning     `yaml:"pre_planning"`        // read-only look-around before the plan
	Execution          PlanExecution   `yaml:"execution"`           // limits per action
	Reflection         Reflection      `yaml:"reflection"`          // when the agent reflects
	Revision           Revision        `yaml:"revision"`            // plan revisions
	Verification       Verification    `yaml:"verification"`        // checking the outcome
	Replan             Replan          `yaml:"replan"`              // fresh plans
	History            PlanHistory     `yaml:"history"`             // where plans are recorded
	LLMCallComments    LLMCallComments `yaml:"llm_call_comments"`   // progress comments on the task
}

// PrePlanning is planning.pre_planning.
type PrePlanning struct {
	Enabled      bool `yaml:"enabled"`        // default true
	MaxToolCalls int  `yaml:"max_tool_calls"` // read-only tool calls before planning; default 10, >= 0
}

// PlanExecution is planning.execution.
type PlanExecution struct {
	MaxLLMCallsPerAction int `yaml:"max_llm_calls_per_action"` // default 20, >= 1
	MaxAttemptsPerAction int `yaml:"max_attempts_per_action"`  // default 2, >= 1
}

// Reflection is planning.reflection.
type Reflection struct {
	Enabled         bool `yaml:"enabled"`          // default true
	TriggerOnError  bool `yaml:"trigger_on_error"` // default true
	TriggerInterval int  `yaml:"trigger_interval"` // reflect every N completed actions; default 3; 0 disables the interval
}

// Revision is planning.revision.
type Revision struct {
	MaxRevisions int `yaml:"max_revisions"` // default 3, >= 0
}

// Verification is planning.verification.
type Verification struct {
	Enabled   bool `yaml:"enabled"`    // default true
	MaxRounds int  `yaml:"max_rounds"` // default 2, >= 1
}

// Replan is planning.replan.
type Replan struct {
	MaxReplans int `yaml:"max_replans"` // fresh plans after repeated failure; default 1, >= 0
}

// PlanHistory is planning.history.
type PlanHistory struct {
	StorageType string `yaml:"storage_type"` // only StorageJSONL (default)
	Directory   string `yaml:"directory"`    // default "planning_history"; relative to the working directory, like state_dir
}

// LLMCallComments is planning.llm_call_comments.
type LLMCallComments struct {
	Enabled bool `yaml:"enabled"` // default true: a comment after every LLM call
}

// CommentDetection is the comment_detection section: comments written on the
// task while the agent works on it are read at its checkpoints (where pause
// and stop are checked too) and added to the model's context. The bot's own
// comments are never heard; its name is github.bot_name or gitlab.bot_name.
type CommentDetection struct {
	Enabled       bool     `yaml:"enabled"`        // default true: new comments are read at every checkpoint
	CheckInterval int      `yaml:"check_interval"` // check at every Nth checkpoint; default 1, >= 1
	AllowedUsers  []string `yaml:"allowed_users"`  // also heard, besides the author and people with write access; names without "@"
}

// Conversation is the conversation section: a finished task gets the
// awaiting-response label and waits for a reply; a reply from the author (or,
// with AllowCollaborators, from someone with write access) resumes the work
// with the whole history as context.
type Conversation struct {
	Enabled            bool     `yaml:"enabled"`             // default true: finished tasks await a reply
	AllowCollaborators bool     `yaml:"allow_collaborators"` // default true: people with write access may reply too, not only the author
	CompletionKeywords []string `yaml:"completion_keywords"` // thanks and approval words (watch.JudgeReply): a reply of these and little else ends the conversation; default DefaultCompletionKeywords(); [] for none
	TimeoutHours       float64  `yaml:"timeout_hours"`       // default 24, > 0
	MaxRounds          int      `yaml:"max_rounds"`          // default 10, >= 1
	PollSeconds        int      `yaml:"poll_seconds"`        // how often serve checks awaiting tasks; default 30, >= 5
}

// Trust is the trust section: who may make the agent act. People with
// write access and comment_detection.allowed_users may always start and
// steer it; anyone else's comments are counted, never shown to the model.
type Trust struct {
	// LabelerNeedsWriteAccess: default true: a task is worked on only when
	// its bot label was added by someone with write access (GitHub:
	// write, maintain or admin; GitLab: Developer or higher) or listed in
	// comment_detection.allowed_users; otherwise the label is removed and
	// one comment says why. false only for private repositories whose
	// every reader is trusted.
	LabelerNeedsWriteAccess bool `yaml:"labeler_needs_write_access"`
	// HearAuthorWithoutAccess: default true, as the specs ask: the task's
	// author steers it (comments, replies) even without write access.
	// false for public repositories: the author is heard only with write
	// access or on the allow list.
	HearAuthorWithoutAccess bool `yaml:"hear_author_without_access"`
}

// Workspace is the workspace section. A task gets a workspace (a git
// checkout of its repository) when something can work in it: the built-in
// tools (BuiltinTools), or some mcp_servers[] entry with scope: task.
type Workspace struct {
	Root string `yaml:"root"` // one folder per task below it; default ./workspaces
	Keep string `yaml:"keep"` // never, failed or always: which ended tasks' workspaces stay; default failed
	// BuiltinTools turns the in-process MCP server named "workspace" on
	// or off: read, write, edit, list, search and run_command in the
	// task's checkout, each command in the sandbox. nil (the default):
	// on, unless mcp_servers are configured and none is task-scoped; see
	// Config.BuiltinTools.
	BuiltinTools *bool `yaml:"builtin_tools"`
	// Checks are shell command lines the daemon itself runs in the
	// sandbox, in the checkout, before a round is called done; a failing
	// one (non-zero exit) goes back to the model with its output. They
	// need a workspace. Default none.
	Checks []string `yaml:"checks"`
	// CheckRounds is how many times, at most, a failing check goes back
	// to the model in a round; default 2, >= 0 (0: never).
	CheckRounds int `yaml:"check_rounds"`
}

// Values of workspace.keep.
const (
	KeepNever  = "never"
	KeepFailed = "failed"
	KeepAlways = "always"
)

// Values of sandbox.require: the least isolation the commands the model
// runs (and the checks, the setup and the sandboxed servers) may run with.
// A host that gives less refuses to run them.
const (
	SandboxNamespaces = "namespaces" // the commands run in Linux namespaces of their own (the default)
	SandboxLandlock   = "landlock"   // Landlock's file-system rules at least, namespaces where the host gives them
	SandboxNone       = "none"       // no isolation required: without either, commands run as plain child processes
)

// Values of sandbox.network.
const (
	NetworkOff = "off" // the commands have no network (the setup always has it)
	NetworkOn  = "on"  // the commands share the host's network
)

// Limits of the sandbox section's numbers.
const (
	MaxCommandTimeoutSeconds = 3600    // sandbox.command_timeout_seconds at most
	MinMemoryMB              = 64      // sandbox.memory_mb at least
	MinMaxProcesses          = 8       // sandbox.max_processes at least
	MinOutputBytes           = 1024    // sandbox.max_output_bytes at least
	MaxOutputBytes           = 1 << 20 // sandbox.max_output_bytes at most
)

// Sandbox is the sandbox section: how every command the model runs (the
// built-in run_command), the checks, the setup and the servers with
// sandbox: true are confined. The checkout is their one writable place.
type Sandbox struct {
	// Require is the least isolation commands may run with:
	// SandboxNamespaces (default), SandboxLandlock or SandboxNone. On a
	// host that gives less, commands are refused, not run unconfined.
	Require string `yaml:"require"`
	// Network is NetworkOff (default) or NetworkOn: whether the model's
	// commands and the checks reach the network. The setup always does.
	Network string `yaml:"network"`
	// Setup are shell command lines run in the sandbox, in the checkout,
	// with the network on, before the model's first request, and again
	// when a file SetupWatch matches has changed (installing the
	// repository's dependencies). They need a workspace. Default none.
	Setup []string `yaml:"setup"`
	// SetupWatch are globs (path.Match syntax, "/"-separated) of paths
	// relative to the checkout whose change runs Setup again: each is
	// matched against the whole relative path, so package.json is the
	// root's and web/package.json the one in web/. Default
	// DefaultSetupWatch(); a list replaces it, [] for none.
	SetupWatch []string `yaml:"setup_watch"`
	// CommandTimeoutSeconds: a command still running after this long is
	// killed with all its processes; default 300, from 1 to 3600.
	CommandTimeoutSeconds int `yaml:"command_timeout_seconds"`
	// MemoryMB is the memory a command (with its children) may use;
	// default 2048, >= 64.
	MemoryMB int `yaml:"memory_mb"`
	// MaxProcesses is how many processes a command may have at once;
	// default 256, >= 8.
	MaxProcesses int `yaml:"max_processes"`
	// MaxOutputBytes is how much of a command's output is kept (the rest
	// is cut, with a note); default 65536, from 1024 to 1 MiB.
	MaxOutputBytes int `yaml:"max_output_bytes"`
	// Env are extra variables the commands see, besides the sandbox's own
	// (PATH, HOME and the like). Names are [A-Za-z_][A-Za-z0-9_]*. A value
	// whose name says it is a secret (see secretEnvKey) is redacted from
	// logs and comments like the tokens, but the model's commands can
	// read it: Parse warns about each one.
	Env map[string]string `yaml:"env"`
	// ReadOnlyPaths are extra absolute directories the commands may read
	// (toolchains and caches outside /usr, e.g. /opt/go or a build
	// cache); default none.
	ReadOnlyPaths []string `yaml:"read_only_paths"`
}

// defaultSetupWatch are the dependency manifests and lock files at the
// checkout's root whose change runs the setup again.
var defaultSetupWatch = []string{
	"requirements*.txt", "pyproject.toml", "setup.py", "setup.cfg", "Pipfile", "Pipfile.lock", "poetry.lock", "uv.lock",
	"package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml",
	"go.mod", "go.sum",
	"Cargo.toml", "Cargo.lock",
	"Gemfile", "Gemfile.lock",
	"composer.json", "composer.lock",
}

// DefaultSetupWatch returns a copy of the default sandbox.setup_watch.
func DefaultSetupWatch() []string { return slices.Clone(defaultSetupWatch) }

// CommandTimeout is the deadline of one command in the sandbox.
func (s Sandbox) CommandTimeout() time.Duration {
	return time.Duration(s.CommandTimeoutSeconds) * time.Second
}

// Delivery is the delivery section: when a task with a workspace ends done
// and its workspace has changes, they become one commit pushed to a branch
// and a pull request (GitHub) or merge request (GitLab) that closes the
// issue; a pull or merge request task gets the commit on its head branch.
type Delivery struct {
	Enabled      bool     `yaml:"enabled"`       // default true (it needs a workspace); false leaves git to your own tools
	Draft        bool     `yaml:"draft"`         // default true: the pull/merge request is a draft
	BranchPrefix string   `yaml:"branch_prefix"` // default coding-agent/: an issue's branch is coding-agent/issue-12
	Author       Identity `yaml:"author"`        // the commits' author and committer
	// MaxFileBytes: a file of the checkout larger than this many bytes is
	// left out of the commit (and the closing comment names it); default
	// 5,000,000, > 0.
	MaxFileBytes int64 `yaml:"max_file_bytes"`
}

// Values of queue.type.
const (
	QueueMemory   = "memory"
	QueueRabbitMQ = "rabbitmq"
)

// Queue is the queue section: how jobs go from the producer to the
// consumers.
type Queue struct {
	Type     string   `yaml:"type"`     // memory (in-process, the default) or rabbitmq
	RabbitMQ RabbitMQ `yaml:"rabbitmq"` // read when Type is rabbitmq
}

// RabbitMQ is queue.rabbitmq.
type RabbitMQ struct {
	URL           string `yaml:"url"`            // amqp://user:password@host:5672/vhost; default amqp://guest:guest@127.0.0.1:5672/
	Name          string `yaml:"name"`           // the queue; the dead-letter queue is <name>.dead; default coding-agent
	MaxDeliveries int    `yaml:"max_deliveries"` // deliveries of a job before it goes to the dead-letter queue; default 5
}

// Identity is a git author.
type Identity struct {
	Name  string `yaml:"name"`  // default coding-agent
	Email string `yaml:"email"` // default coding-agent@users.noreply.example
}

// TaskWorkspaces reports whether tasks get a workspace: the built-in tools
// are on, or some MCP server is task-scoped.
func (c *Config) TaskWorkspaces() bool {
	return c.BuiltinTools() || slices.ContainsFunc(c.MCPServers, MCPServer.PerTask)
}

// BuiltinTools reports whether tasks get the built-in workspace tools:
// workspace.builtin_tools when it is set, else true unless mcp_servers
// are configured and none of them is task-scoped (such a config works
// without a checkout, as it did before the built-in tools).
func (c *Config) BuiltinTools() bool {
	if b := c.Workspace.BuiltinTools; b != nil {
		return *b
	}
	return len(c.MCPServers) == 0 || slices.ContainsFunc(c.MCPServers, MCPServer.PerTask)
}

// BuiltinServer is the name of the built-in tools' in-process MCP server:
// its tools are offered as workspace/read and the like, so no configured
// server may have it while they are on.
const BuiltinServer = "workspace"

// ResourcesServer is the name under which the tool host offers the tools
// that find and read the servers' resources (toolhost.ResourceServer).
const ResourcesServer = "resources"

// defaultCompletionKeywords are the words of a reply that end a conversation
// when none are configured (Japanese and English thanks and acknowledgements).
var defaultCompletionKeywords = []string{
	"ありがとう", "ありがとうございます", "ありがとうございました",
	"完了", "OK", "了解", "承知",
	"thank you", "thanks", "done", "complete",
}

// DefaultCompletionKeywords returns a copy of the default
// conversation.completion_keywords.
func DefaultCompletionKeywords() []string { return slices.Clone(defaultCompletionKeywords) }

// Default returns a Config holding every default; TaskSource and LLM.Provider
// are left empty.
func Default() *Config {
	c := &Config{
		StateDir: "./data",
		GitHub:   GitHub{APIURL: "https://api.github.com"},
		GitLab:   GitLab{APIURL: "https://gitlab.com/api/v4"},
		LLM: LLM{
			FunctionCalling: true,
			TimeoutSeconds:  600,
			CompactAt:       0.7,
			Constrained:     ConstrainedOff,
			OpenAI:          OpenAI{BaseURL: "https://api.openai.com/v1"},
			LMStudio:        LMStudio{BaseURL: "http://localhost:1234/v1"},
			Ollama:          Ollama{Endpoint: "http://localhost:11434"},
		},
		Tools:            Tools{CallTimeoutSeconds: 120, MaxResultBytes: 32768},
		MaxLLMProcessNum: 1000,
		Continuous:       Continuous{Producer: Producer{IntervalMinutes: 1}, Consumer: Consumer{Workers: 1}},
		Logging:          Logging{File: "logs/coding-agent.log", Level: "info", MaxAgeDays: 30},
		Language:         LanguageEnglish,
		Comments:         Comments{Mode: CommentsLiving},
		Planning:         defaultPlanning(),
		CommentDetection: CommentDetection{Enabled: true, CheckInterval: 1},
		Trust:            Trust{LabelerNeedsWriteAccess: true, HearAuthorWithoutAccess: true},
		Workspace:        Workspace{Root: "./workspaces", Keep: KeepFailed, CheckRounds: 2},
		Sandbox: Sandbox{Require: SandboxNamespaces, Network: NetworkOff, SetupWatch: DefaultSetupWatch(),
			CommandTimeoutSeconds: 300, MemoryMB: 2048, MaxProcesses: 256, MaxOutputBytes: 65536},
		Delivery: Delivery{Enabled: true, Draft: true, BranchPrefix: "coding-agent/", MaxFileBytes: 5_000_000,
			Author: Identity{Name: "coding-agent", Email: "coding-agent@users.noreply.example"}},
		Conversation: Conversation{
			Enabled:            true,
			AllowCollaborators: true,
			CompletionKeywords: DefaultCompletionKeywords(),
			TimeoutHours:       24,
			MaxRounds:          10,
			PollSeconds:        30,
		},
		Queue: Queue{Type: QueueMemory, RabbitMQ: RabbitMQ{URL: "amqp://guest:guest@127.0.0.1:5672/",
			Name: "coding-agent", MaxDeliveries: 5}},
		Server:               Server{KeepEventsDays: DefaultKeepEventsDays},
		ShutdownGraceSeconds: 5,
		LeaseSeconds:         60,
	}
	for _, section := range sections { // every label role's default
		for _, r := range task.Roles {
			labelField(section(c), r.Key).SetString(r.Default)
		}
	}
	return c
}

// defaultPlanning is the planning section's defaults: every phase on.
func defaultPlanning() Planning {
	return Planning{
		Enabled:            true,
		Strategy:           StrategyChainOfThought,
		MaxSubtasks:        100,
		DecompositionLevel: DecompositionModerate,
		PrePlanning:        PrePlanning{Enabled: true, MaxToolCalls: 10},
		Execution:          PlanExecution{MaxLLMCallsPerAction: 20, MaxAttemptsPerAction: 2},
		Reflection:         Reflection{Enabled: true, TriggerOnError: true, TriggerInterval: 3},
		Revision:           Revision{MaxRevisions: 3},
		Verification:       Verification{Enabled: true, MaxRounds: 2},
		Replan:             Replan{MaxReplans: 1},
		History:            PlanHistory{StorageType: StorageJSONL, Directory: "planning_history"},
		LLMCallComments:    LLMCallComments{Enabled: true},
	}
}

// labelsOf is the labels a forge's section (a pointer to it) configures:
// its field of each role's key (task.Roles).
func labelsOf(section any) task.Labels {
	var l task.Labels
	for _, r := range task.Roles {
		l.Set(r.Role, labelField(section, r.Key).String())
	}
	return l
}

// labelField is the field of a forge's section (a pointer to it) whose
// key is key; every section has one per role (TestEverySectionHasEveryLabel).
func labelField(section any, key string) reflect.Value {
	v := reflect.ValueOf(section).Elem()
	for i := range v.NumField() {
		if name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); name == key {
			return v.Field(i)
		}
	}
	panic(fmt.Sprintf("config: %s has no field %s", v.Type(), key))
}

// Timeout is the per-request deadline of an LLM call.
func (l LLM) Timeout() time.Duration { return time.Duration(l.TimeoutSeconds) * time.Second }

// CallTimeout is the deadline of one tool call.
func (t Tools) CallTimeout() time.Duration { return time.Duration(t.CallTimeoutSeconds) * time.Second }

// Lease is how long a running task stays held without a renewal.
func (c *Config) Lease() time.Duration {
	return time.Duration(c.LeaseSeconds) * time.Second
}

// DefaultForgeLeaseSeconds is the forge lease of a host with a store of
// its own when forge_lease_seconds is not set. Such a host cannot know
// whether others with stores of their own watch the same repositories, so
// it holds its tasks on the forge unless told it is alone (0): a task whose
// host died, or died between taking it and recording it, is put up again
// about five minutes later, for one edit of a comment per task every 100 s.
const DefaultForgeLeaseSeconds = 300

// ForgeLease is how long a task stays its host's on the forge without a
// heartbeat; 0: off. Not set, it is DefaultForgeLeaseSeconds, but off with
// database.url: there the shared store's lease (Lease) holds the tasks.
func (c *Config) ForgeLease() time.Duration {
	switch {
	case c.ForgeLeaseSeconds != nil:
		return time.Duration(*c.ForgeLeaseSeconds) * time.Second
	case c.Database.URL != "":
		return 0
	}
	return DefaultForgeLeaseSeconds * time.Second
}

// ShutdownGrace is how long a task in hand may take to reach a checkpoint
// after a shutdown signal before its step is cut.
func (c *Config) ShutdownGrace() time.Duration {
	return time.Duration(c.ShutdownGraceSeconds) * time.Second
}

// Interval is the poll interval of the producer.
func (p Producer) Interval() time.Duration {
	return time.Duration(p.IntervalMinutes * float64(time.Minute))
}

// Timeout is how long a finished task awaits a reply before the conversation
// ends.
func (c Conversation) Timeout() time.Duration {
	return time.Duration(c.TimeoutHours * float64(time.Hour))
}

// PollInterval is how often serve checks the tasks awaiting a reply.
func (c Conversation) PollInterval() time.Duration {
	return time.Duration(c.PollSeconds) * time.Second
}

// SlogLevel is Level as a slog.Level (info for an unknown level).
func (l Logging) SlogLevel() slog.Level {
	switch l.Level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// secretEnvKey reports whether the name of an MCP server's environment
// variable says its value is a secret: one of its words (split at anything
// but letters and digits) is TOKEN, KEY, SECRET, PASSWORD, PASS, AUTH,
// CREDENTIAL and the like, or ends in TOKEN, SECRET, PASSWORD or APIKEY
// (GITHUB_PERSONAL_ACCESS_TOKEN, OPENAI_API_KEY, DB_PASSWORD, AUTHTOKEN).
// A word that only contains one (KEYRING_BACKEND, AUTHOR, PASSTHROUGH) does
// not count: its value would be redacted from every tool result.
func secretEnvKey(name string) bool {
	for _, w := range strings.FieldsFunc(strings.ToUpper(name), func(r rune) bool {
		return (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	}) {
		switch w {
		case "TOKEN", "TOKENS", "KEY", "KEYS", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASS", "PWD",
			"AUTH", "CREDENTIAL", "CREDENTIALS", "PAT":
			return true
		}
		for _, end := range []string{"TOKEN", "SECRET", "PASSWORD", "APIKEY"} {
			if strings.HasSuffix(w, end) {
				return true
			}
		}
	}
	return false
}

// sandboxSecrets are the names of sandbox.env whose values are secrets
// (see secretEnvKey and plainValue), sorted.
func (c *Config) sandboxSecrets() []string {
	var names []string
	for _, k := range slices.Sorted(maps.Keys(c.Sandbox.Env)) {
		if secretEnvKey(k) && !plainValue(c.Sandbox.Env[k]) {
			names = append(names, k)
		}
	}
	return names
}

// plainValue reports values no secret has, whatever the variable's name:
// switches and small numbers. Redacting them would blank out every "true"
// and "8080" in the tools' output.
func plainValue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "false", "yes", "no", "on", "off", "none", "null", "enabled", "disabled":
		return true
	}
	return len(v) < 6 && strings.Trim(v, "0123456789") == ""
}

// Secrets returns every configured secret, for redaction of logs and comments:
// every field of type Secret (the forge tokens and webhook secrets, the
// GitHub App's key, the OpenAI API key), the values of MCP server env and
// sandbox.env whose name says they are secrets (unless plainly not one),
// and passwords in URL fields (the RabbitMQ URL when the queue is
// rabbitmq). Empty values are left out;
// duplicates appear once; longer values come first so a redactor replacing
// them in order never leaves part of one behind.
func (c *Config) Secrets() []string {
	all := secretFields(reflect.ValueOf(c).Elem())
	for _, s := range c.MCPServers {
		for _, v := range s.Headers {
			// "Bearer T": T alone may show where the header does not.
			if _, token, ok := strings.Cut(strings.TrimSpace(v.Reveal()), " "); ok && len(token) >= 8 {
				all = append(all, strings.TrimSpace(token))
			}
		}
		for k, v := range s.Env {
			if s.PerTask() {
				v, _ = untemplate(v) // the text, task variables aside
			}
			if secretEnvKey(k) && !plainValue(v) {
				all = append(all, v)
			}
		}
	}
	for _, v := range c.sandboxSecrets() {
		all = append(all, c.Sandbox.Env[v])
	}
	urls := c.urls()
	if c.Queue.Type == QueueRabbitMQ {
		urls = append(urls, c.Queue.RabbitMQ.URL)
	}
	for _, raw := range urls {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			p, _ := u.User.Password()
			all = append(all, p, rawPassword(raw))
		}
	}
	var out []string
	for _, s := range all {
		if strings.TrimSpace(s) != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), cmp.Compare(a, b)) })
	return out
}

// rawPassword is the password of a URL as written in it, percent-escapes
// and all (db-pass%40word), which is how it appears where the URL is
// quoted; "" when it has none.
func rawPassword(raw string) string {
	_, rest, ok := strings.Cut(raw, "//")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return ""
	}
	_, pass, _ := strings.Cut(rest[:at], ":")
	return pass
}

// urls lists every URL field.
func (c *Config) urls() []string {
	return []string{c.GitHub.APIURL, c.GitLab.APIURL, c.LLM.OpenAI.BaseURL,
		c.LLM.LMStudio.BaseURL, c.LLM.Ollama.Endpoint, c.Database.URL}
}

// PrivatePaths are the files and folders of the daemon that the commands the
// model runs must never read: the config file, the files secrets are read
// from, the state, the logs, the planning history, the workspaces' root
// (other tasks' checkouts and every task's repository) and the model
// recording (every task's conversation). Relative paths are made absolute;
// a path that cannot be is left out.
func (c *Config) PrivatePaths() []string {
	var out []string
	appKey := ""
	if c.GitHub.App != nil {
		appKey = c.GitHub.App.PrivateKeyFile
	}
	logDir := "" // no log file: nothing to hide (filepath.Dir("") would be the working directory)
	if c.Logging.File != "" {
		logDir = filepath.Dir(c.Logging.File)
	}
	for _, p := range []string{c.File, c.GitHub.TokenFile, appKey, c.GitLab.TokenFile,
		c.LLM.OpenAI.APIKeyFile, c.StateDir, logDir, c.Planning.History.Directory, c.Workspace.Root,
		c.LLM.Record} {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil && !slices.Contains(out, abs) {
			out = append(out, abs)
		}
	}
	return out
}

// Secret is a configured value the daemon must never show: a token, a
// key, a webhook secret. Config.Secrets finds every field of this type,
// wherever it is in the configuration, so a new one is redacted without a
// list to keep (TestEverySecretIsASecret holds the fields whose names say
// secret to it). It prints as [secret] (fmt's %s and %v, slog); Reveal is
// the value, for the one place that sends it.
type Secret string

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// String is "[secret]", or "" for an empty one.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[secret]"
}

// LogValue is what slog shows of it: its String.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

var secretType = reflect.TypeFor[Secret]()

// secretFields are the values of every Secret in v, a configuration value:
// its fields, and theirs, through pointers, slices and maps.
func secretFields(v reflect.Value) []string {
	var out []string
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			out = append(out, secretFields(v.Elem())...)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out = append(out, secretFields(v.Field(i))...)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			out = append(out, secretFields(v.Index(i))...)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			out = append(out, secretFields(v.MapIndex(k))...)
		}
	case reflect.String:
		if v.Type() == secretType {
			out = append(out, v.String())
		}
	}
	return out
}
