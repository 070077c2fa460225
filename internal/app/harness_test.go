package app_test

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/postgres"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

const (
	apiKey   = "sk-test-0123456789abcdef"
	maxToken = 2048 // llm.*.max_token in the test configs
	// testContext is the context window of the test configs: large enough
	// that the scripted tasks are never compacted (the budget tests make
	// their own).
	testContext = 65536
)

// env is one end-to-end setup: a forge emulator with one labelled task, a
// scripted model server, a workspace the filesystem MCP server may write.
type env struct {
	t         testing.TB
	gh        *forgetest.GitHub
	gl        *forgetest.GitLab
	gt        *forgetest.Gitea
	model     *llmtest.Server
	cfg       *config.Config
	workspace string
	ref       task.Ref
	native    bool
	now       func() time.Time // the clock of planned runs; nil → real time
	// realLabels, when set, reads the task's labels from a real forge
	// instead of the emulator.
	realLabels func() []string
	head       string // a pull or merge request's head branch
	fork       string // the fork the head branch is in; "" for the repository itself

	mu        sync.Mutex
	claimedAt []string // labels seen by the model server at the first request
}

type setup struct {
	forge    string    // task.GitHub or task.GitLab
	kind     task.Kind // task.Issue, task.PullRequest, task.MergeRequest
	provider string    // config.ProviderOpenAI, ProviderLMStudio, ProviderOllama
	native   bool
	respond  func(e *env, r llmtest.Received) llmtest.Step // nil: write a file, then done
	planning bool                                          // planning mode; false: the plain tool loop
	// conversation: a finished task awaits a reply; false: it is done.
	conversation bool
	// seed changes the task before it is added; head names a pull or
	// merge request's head branch ("" → feature/greeting).
	seed func(*forgetest.IssueSeed)
	head string
	fork string // a pull or merge request's head is in this repository, a fork
	// npm: the server fs is the npm filesystem server
	// (@modelcontextprotocol/server-filesystem) instead of the test
	// server's file tools (mcptest.NewFileServer): for the tests about that
	// server and its catalog. The others start no node process: half a
	// second of CPU each, hundreds of times in the package.
	npm bool
}

func newEnv(t testing.TB, s setup) *env {
	t.Helper()
	tmp := t.TempDir()
	e := &env{t: t, workspace: filepath.Join(tmp, "workspace"), native: s.native}
	if err := os.MkdirAll(e.workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	respond := s.respond
	if respond == nil {
		respond = writeThenDone
	}
	key := apiKey
	if s.provider == config.ProviderLMStudio {
		key = "" // LM Studio takes any key
	}
	e.model = llmtest.NewServer(t, llmtest.Options{APIKey: key, Models: []string{"gpt-test", "local-model", "qwen-test"},
		Responder: func(r llmtest.Received) llmtest.Step {
			if r.N == 1 {
				e.mu.Lock()
				e.claimedAt = e.labels()
				e.mu.Unlock()
			}
			return respond(e, r)
		}})
	cfg := config.Default()
	cfg.StateDir = filepath.Join(tmp, "data")
	cfg.Logging.File = filepath.Join(tmp, "logs", "coding-agent.log")
	cfg.Logging.Level = "debug"
	cfg.LLM.FunctionCalling = s.native
	cfg.Planning.Enabled = s.planning
	cfg.Conversation.Enabled = s.conversation
	cfg.Planning.History.Directory = filepath.Join(tmp, "planning_history")
	cfg.LLM.Provider = s.provider
	switch s.provider {
	case config.ProviderOpenAI:
		cfg.LLM.OpenAI = config.OpenAI{BaseURL: e.model.OpenAIURL(), APIKey: apiKey, Model: "gpt-test", MaxToken: maxToken,
			ContextLength: testContext}
	case config.ProviderLMStudio:
		cfg.LLM.LMStudio = config.LMStudio{BaseURL: e.model.OpenAIURL(), Model: "local-model", ContextLength: testContext}
	case config.ProviderOllama:
		cfg.LLM.Ollama = config.Ollama{Endpoint: e.model.URL(), Model: "qwen-test", MaxToken: maxToken, ContextLength: testContext}
	}
	fs := []string{mcptest.Build(t), "-files", e.workspace}
	if s.npm {
		fs = []string{mcptest.NodeModule(t, ".bin/mcp-server-filesystem"), e.workspace}
	}
	cfg.MCPServers = []config.MCPServer{{
		Name:         "fs",
		Command:      fs,
		SystemPrompt: "The project lives in " + e.workspace + ".",
	}}
	cfg.TaskSource = s.forge
	seed := forgetest.IssueSeed{Title: "Add a greeting file", Body: "Create hello.txt saying hello.", Author: "alice",
		Labels: []string{"coding agent", "bug"}}
	if s.seed != nil {
		s.seed(&seed)
	}
	e.head, e.fork = cmp.Or(s.head, "feature/greeting"), s.fork
	switch s.forge {
	case task.GitHub:
		e.gh = forgetest.NewGitHub(t)
		e.gh.AddRepo("acme/app")
		e.gh.AddComment("acme/app", e.addItem(e.gh, task.GitHub, s.kind, seed), "bob", "Please keep it short.")
		e.gh.SetPermission("acme/app", "bob", "write") // a collaborator: heard
		cfg.GitHub.APIURL, cfg.GitHub.Token, cfg.GitHub.Repositories = e.gh.URL(), config.Secret(e.gh.Token), []string{"acme/app"}
	case task.GitLab:
		e.gl = forgetest.NewGitLab(t)
		e.gl.AddProject("acme/app")
		n := e.addGitLab(s.kind, seed)
		e.gl.AddNote("acme/app", e.glKind(), n, "bob", "Please keep it short.", false)
		e.gl.AddMember("acme/app", "bob", 30) // a Developer: heard
		cfg.GitLab.APIURL, cfg.GitLab.Token, cfg.GitLab.Projects = e.gl.URL(), config.Secret(e.gl.Token), []string{"acme/app"}
	case task.Gitea:
		e.gt = forgetest.NewGitea(t)
		e.gt.AddRepo("acme/app")
		e.gt.AddComment("acme/app", e.addItem(e.gt, task.Gitea, s.kind, seed), "bob", "Please keep it short.")
		e.gt.SetPermission("acme/app", "bob", "write") // a collaborator: heard
		cfg.Gitea.APIURL, cfg.Gitea.Token, cfg.Gitea.Repositories = e.gt.URL(), config.Secret(e.gt.Token), []string{"acme/app"}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config is invalid: %v", err)
	}
	e.cfg = cfg
	return e
}

// token is the forge token the env's config holds (the other forges' are empty).
func (e *env) token() string {
	return (e.cfg.GitHub.Token + e.cfg.GitLab.Token + e.cfg.Gitea.Token).Reveal()
}

// emulator is what every forge emulator has alike: its request log and
// faults, and its git repositories.
type emulator interface {
	Requests() []forgetest.Request
	Inject(forgetest.Fault)
	Count(method, path string) int
	FileAt(repo, branch, path string) (string, bool)
	Files(repo, branch string) []string
	Branches(repo string) []string
	Head(repo, branch string) (string, bool)
	Log(repo, branch string) []forgetest.GitCommit
	CommitFile(repo, branch, path, content, message string) string
}

// emu is the env's forge emulator.
func (e *env) emu() emulator {
	switch {
	case e.gh != nil:
		return e.gh
	case e.gt != nil:
		return e.gt
	}
	return e.gl
}

// addLabelBy adds label to the env's task as user.
func (e *env) addLabelBy(label, user string) {
	switch {
	case e.gh != nil:
		e.gh.AddLabelBy(e.ref.Repo, e.ref.Number, label, user)
	case e.gt != nil:
		e.gt.AddLabelBy(e.ref.Repo, e.ref.Number, label, user)
	default:
		e.gl.AddLabelBy(e.ref.Repo, e.glKind(), e.ref.Number, label, user)
	}
}

// emulatedForges are the forges the end-to-end suites run on.
var emulatedForges = []string{task.GitHub, task.GitLab, task.Gitea}

// changeKind is the kind of a change task on forge: a pull request, or
// GitLab's merge request.
func changeKind(forge string) task.Kind { return task.Forges[forge].ChangeKind }

// issuesAndPulls is an emulator whose changes are pull requests that
// share the issues' numbers (GitHub, Gitea).
type issuesAndPulls interface {
	AddIssue(repo string, s forgetest.IssueSeed) int
	AddPull(repo string, s forgetest.PullSeed) int
}

// addItem adds the env's task to em, an emulator of forge.
func (e *env) addItem(em issuesAndPulls, forge string, kind task.Kind, seed forgetest.IssueSeed) int {
	n := 0
	if kind == task.PullRequest {
		n = em.AddPull("acme/app", forgetest.PullSeed{IssueSeed: seed, Head: e.head, Base: "main", HeadRepo: e.fork})
	} else {
		n = em.AddIssue("acme/app", seed)
	}
	e.ref = task.Ref{Forge: forge, Repo: "acme/app", Kind: kind, Number: n}
	return n
}

func (e *env) addGitLab(kind task.Kind, seed forgetest.IssueSeed) int {
	n := 0
	if kind == task.MergeRequest {
		n = e.gl.AddMR("acme/app", forgetest.MRSeed{IssueSeed: seed, SourceBranch: e.head, TargetBranch: "main", SourceProject: e.fork})
	} else {
		n = e.gl.AddIssue("acme/app", seed)
	}
	e.ref = task.Ref{Forge: task.GitLab, Repo: "acme/app", Kind: kind, Number: n}
	return n
}

func (e *env) glKind() string {
	if e.ref.Kind == task.MergeRequest {
		return forgetest.KindMergeRequest
	}
	return forgetest.KindIssue
}

// labels are the task's labels on the forge now, sorted.
func (e *env) labels() []string {
	var l []string
	switch {
	case e.realLabels != nil:
		l = e.realLabels()
	case e.gh != nil:
		l = e.gh.Labels(e.ref.Repo, e.ref.Number)
	case e.gt != nil:
		l = e.gt.Labels(e.ref.Repo, e.ref.Number)
	default:
		l = e.gl.Labels(e.ref.Repo, e.glKind(), e.ref.Number)
	}
	l = slices.Clone(l)
	slices.Sort(l)
	return l
}

// botComments are the bodies the bot posted, oldest first, without the
// hidden line naming each (postonce.Mark: its key is the run's own), and
// without its holder comments (the forge lease's heartbeat, not something
// said about the task: holderComments has them).
func (e *env) botComments() []string {
	var out []string
	for _, b := range e.allBotComments() {
		if _, ok := report.HolderOf(b); !ok {
			out = append(out, b)
		}
	}
	return out
}

// holderComments are the hosts the bot's holder comments name, oldest
// first.
func (e *env) holderComments() []string {
	var out []string
	for _, b := range e.allBotComments() {
		if h, ok := report.HolderOf(b); ok {
			out = append(out, h.Host)
		}
	}
	return out
}

// note is one comment on the task: GitHub's and Gitea's comments, and
// GitLab's notes (system: one GitLab wrote itself, such as "added label").
type note struct {
	author, body string
	system       bool
}

// thread is every comment on the task, oldest first.
func (e *env) thread() []note {
	var out []note
	switch {
	case e.gh != nil:
		for _, c := range e.gh.Comments(e.ref.Repo, e.ref.Number) {
			out = append(out, note{author: c.Author, body: c.Body})
		}
	case e.gt != nil:
		for _, c := range e.gt.Comments(e.ref.Repo, e.ref.Number) {
			out = append(out, note{author: c.Author, body: c.Body})
		}
	default:
		for _, n := range e.gl.Notes(e.ref.Repo, e.glKind(), e.ref.Number) {
			out = append(out, note{author: n.Author, body: n.Body, system: n.System})
		}
	}
	return out
}

// allComments are the bodies of every comment on the task, oldest first.
func (e *env) allComments() []string {
	var out []string
	for _, n := range e.thread() {
		out = append(out, n.body)
	}
	return out
}

// allBotComments are the bodies the bot posted, oldest first.
func (e *env) allBotComments() []string {
	var out []string
	for _, n := range e.thread() {
		if n.author == e.botName() && !n.system {
			out = append(out, postonce.Unmark(n.body))
		}
	}
	return out
}

// run is `coding-agent run` in-process; it returns Run's error.
func (e *env) run(ctx context.Context) error {
	e.t.Helper()
	return e.runWith(ctx, app.Options{Now: e.now})
}

// runWith is run with the app's options o (retry waits are skipped).
func (e *env) runWith(ctx context.Context, o app.Options) error {
	e.t.Helper()
	o.Sleep = noWait
	a, err := app.New(ctx, e.cfg, o)
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Run(ctx)
}

// noWait replaces retry backoff in tests: the retry happens at once.
func noWait(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// record is the task's row in the configured store.
func (e *env) record() store.Record {
	e.t.Helper()
	var st store.Store
	var err error
	if e.cfg.Database.URL != "" {
		st, err = postgres.Open(context.Background(), e.cfg.Database.URL, postgres.Options{})
	} else {
		st, err = sqlite.Open(context.Background(), e.cfg.StateDir)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.Get(context.Background(), e.ref)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// toolResults counts the tool results the conversation holds so far.
func toolResults(r llmtest.Received) int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == llm.ToolRole || (m.Role == llm.User && strings.HasPrefix(m.Content, engine.ResultPrefix)) {
			n++
		}
	}
	return n
}

// call asks for one tool call in the mode the env runs in.
func (e *env) call(r llmtest.Received, comment, tool string, args map[string]any) llmtest.Step {
	if !e.native {
		b, _ := json.Marshal(map[string]any{"comment": comment, "command": map[string]any{"tool": tool, "args": args}})
		return llmtest.Reply{Content: string(b), Usage: llmtest.Usage{In: 100, Out: 20}}
	}
	server, name, _ := strings.Cut(tool, "/")
	for _, fn := range r.ToolNames {
		if fn == server+"__"+name {
			return llmtest.Reply{Content: comment, ToolCalls: []llmtest.Call{{Name: fn, Args: args}}, Usage: llmtest.Usage{In: 100, Out: 20}}
		}
	}
	e.t.Errorf("request %d does not offer %s natively (offered %v)", r.N, tool, r.ToolNames)
	return llmtest.Fault{Status: 400, Body: "tool not offered"}
}

func done(comment string) llmtest.Step {
	b, _ := json.Marshal(map[string]any{"done": true, "comment": comment})
	return llmtest.Reply{Content: string(b), Usage: llmtest.Usage{In: 120, Out: 10}}
}

// closingHello is writeThenDone's closing comment as posted: the model's
// words, then what ran (nothing: the filesystem server runs no command).
const closingHello = "Created hello.txt with a greeting.\n\nNo command was run: nothing here was executed."

func writeThenDone(e *env, r llmtest.Received) llmtest.Step {
	if toolResults(r) == 0 {
		return e.call(r, "Writing hello.txt.", "fs/write_file",
			map[string]any{"path": filepath.Join(e.workspace, "hello.txt"), "content": "hello from coding-agent\n"})
	}
	return done("Created hello.txt with a greeting.")
}

// helloDone reports whether comments are writeThenDone's round as the
// issue shows it by default: the living comment, holding the step's
// comment, and the closing comment.
func helloDone(c []string) bool {
	return len(c) == 2 && living(c[0], "Writing hello.txt.") && c[1] == closingHello
}

// living reports whether c is a finished living comment showing step's
// comment once.
func living(c, step string) bool {
	return strings.HasPrefix(c, "## 🤖 coding-agent worked on this") && strings.Count(c, step) == 1
}

// separate has e's task report a comment per model call (comments.mode:
// separate), for the tests about what those comments say one by one.
func separate(e *env) *env {
	e.cfg.Comments.Mode = config.CommentsSeparate
	return e
}
