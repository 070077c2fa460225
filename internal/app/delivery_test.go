package app_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/workspace"
)

// quickstart gives e the README's quickstart configuration: the built-in
// workspace tools (no MCP server), its sandbox, workspace and delivery, with
// the env's forge, model and folders.
func quickstart(t *testing.T, e *env) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Quickstart.*?```yaml\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README's quickstart has no yaml block")
	}
	env := map[string]string{"GITHUB_TOKEN": "unused", "OPENAI_API_KEY": "unused"}
	q, _, err := config.Parse(m[1], func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("the README's quickstart configuration: %v", err)
	}
	if !q.TaskWorkspaces() {
		t.Fatal("the README's quickstart gives tasks no workspace")
	}
	e.cfg.MCPServers, e.cfg.Delivery, e.cfg.Sandbox = q.MCPServers, q.Delivery, q.Sandbox
	e.cfg.Workspace = q.Workspace
	e.cfg.Workspace.Root = filepath.Join(filepath.Dir(e.cfg.StateDir), "workspaces")
	if err := e.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// checkout is where the task ref works.
func (e *env) checkout(t testing.TB, ref task.Ref) string {
	t.Helper()
	m, err := workspace.New(workspace.Options{Root: e.cfg.Workspace.Root})
	if err != nil {
		t.Fatal(err)
	}
	return m.Dir(ref)
}

// writeFiles writes each file into the task's checkout through the
// built-in workspace tools, one call a turn, then says done.
func writeFiles(files ...string) func(e *env, r llmtest.Received) llmtest.Step {
	return func(e *env, r llmtest.Received) llmtest.Step {
		if n := toolResults(r); n < len(files) {
			return e.call(r, "Writing "+files[n]+".", "workspace/write_file",
				map[string]any{"path": files[n], "content": files[n] + " from coding-agent\n"})
		}
		return done("Wrote " + strings.Join(files, " and ") + ".")
	}
}

// forgeGit is the emulator's git and delivery view, the same for each.
type forgeGit struct {
	repo     string
	file     func(branch, path string) (string, bool)
	commits  func(branch string) []forgetest.GitCommit
	changes  func() []change
	branches func() []string
}

type change struct {
	Head, Body, Title string
	Draft             bool
}

func (e *env) git() forgeGit {
	if e.gh != nil {
		return forgeGit{repo: e.ref.Repo,
			file:     func(b, p string) (string, bool) { return e.gh.FileAt(e.ref.Repo, b, p) },
			commits:  func(b string) []forgetest.GitCommit { return e.gh.Log(e.ref.Repo, b) },
			branches: func() []string { return e.gh.Branches(e.ref.Repo) },
			changes: func() []change {
				var out []change
				for _, p := range e.gh.Pulls(e.ref.Repo) {
					out = append(out, change{Head: p.Head, Body: p.Body, Title: p.Title, Draft: p.Draft})
				}
				return out
			}}
	}
	if e.gt != nil {
		return forgeGit{repo: e.ref.Repo,
			file:     func(b, p string) (string, bool) { return e.gt.FileAt(e.ref.Repo, b, p) },
			commits:  func(b string) []forgetest.GitCommit { return e.gt.Log(e.ref.Repo, b) },
			branches: func() []string { return e.gt.Branches(e.ref.Repo) },
			changes: func() []change {
				var out []change
				for _, p := range e.gt.Pulls(e.ref.Repo) {
					// Gitea's draft is its WIP: title prefix.
					out = append(out, change{Head: p.Head, Body: p.Body, Title: strings.TrimPrefix(p.Title, "WIP: "),
						Draft: strings.HasPrefix(p.Title, "WIP: ")})
				}
				return out
			}}
	}
	return forgeGit{repo: e.ref.Repo,
		file:     func(b, p string) (string, bool) { return e.gl.FileAt(e.ref.Repo, b, p) },
		commits:  func(b string) []forgetest.GitCommit { return e.gl.Log(e.ref.Repo, b) },
		branches: func() []string { return e.gl.Branches(e.ref.Repo) },
		changes: func() []change {
			var out []change
			for _, m := range e.gl.MRs(e.ref.Repo) {
				out = append(out, change{Head: m.SourceBranch, Body: m.Description, Title: m.Title, Draft: m.Draft})
			}
			return out
		}}
}

// The quickstart delivers, on both forges: a labelled issue → the model
// writes a file through the filesystem server started in the task's
// checkout → the branch coding-agent/issue-N holds the change in one
// commit, a draft pull/merge request closes the issue, and the last comment
// names the commit and links the change; a reply adds a commit to the same
// branch and change. The token is in no file of the workspaces and not in
// the log.
func TestQuickstartDeliversADraftChange(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range emulatedForges {
		t.Run(fg, func(t *testing.T) {
			round := 1
			e := newEnv(t, setup{forge: fg, kind: task.Issue, provider: config.ProviderOpenAI, native: true, conversation: true,
				respond: func(e *env, r llmtest.Received) llmtest.Step {
					if round == 1 {
						return writeFiles("hello.txt")(e, r)
					}
					return writeFiles("bye.txt")(e, r)
				}})
			quickstart(t, e)
			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent awaiting response")
			g := e.git()
			branch := "coding-agent/issue-" + strconv.Itoa(e.ref.Number)
			if got, ok := g.file(branch, "hello.txt"); !ok || got != "hello.txt from coding-agent\n" {
				t.Fatalf("the branch %s holds hello.txt = %q, %v; branches %v", branch, got, ok, g.branches())
			}
			log := g.commits(branch)
			if len(log) < 2 || log[0].AuthorName != "coding-agent" || !strings.Contains(log[0].Subject, "hello.txt") ||
				!strings.Contains(log[0].Body, "Wrote hello.txt.") {
				t.Errorf("the branch's newest commit: %+v", log)
			}
			changes := slices.DeleteFunc(g.changes(), func(c change) bool { return c.Head != branch })
			if len(changes) != 1 || !changes[0].Draft || !strings.Contains(changes[0].Body, "Closes #"+strconv.Itoa(e.ref.Number)) {
				t.Fatalf("changes for %s: %+v, want one draft that closes the issue", branch, changes)
			}
			cs := e.botComments()
			last := cs[len(cs)-1]
			if !strings.Contains(last, log[0].SHA) || !strings.Contains(last, "draft") {
				t.Errorf("the last comment does not name the commit %s and the draft change:\n%s", log[0].SHA, last)
			}

			round = 2
			e.addComment("alice", "Please also add a goodbye file.")
			e.runOK(t)
			if got, ok := g.file(branch, "bye.txt"); !ok || got != "bye.txt from coding-agent\n" {
				t.Errorf("round 2 did not add bye.txt to %s: %q, %v", branch, got, ok)
			}
			if _, ok := g.file(branch, "hello.txt"); !ok {
				t.Errorf("round 2 lost hello.txt")
			}
			if n := len(g.commits(branch)); n != len(log)+1 {
				t.Errorf("%d commits on %s after round 2, want %d", n, branch, len(log)+1)
			}
			if changes := slices.DeleteFunc(g.changes(), func(c change) bool { return c.Head != branch }); len(changes) != 1 {
				t.Errorf("%d changes for %s after round 2, want the same one", len(changes), branch)
			}
			checkNoTokenUnder(t, e, e.cfg.Workspace.Root)
		})
	}
}

// checkNoTokenUnder: the forge token, plain or as git's Basic credential,
// is in no file below dir and not in the log.
func checkNoTokenUnder(t *testing.T, e *env, dir string) {
	t.Helper()
	token := e.token()
	forms := []string{token, base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token)),
		base64.StdEncoding.EncodeToString([]byte("oauth2:" + token))}
	files := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&os.ModeSymlink != 0 {
			return err
		}
		files++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, f := range forms {
			if strings.Contains(string(b), f) {
				t.Errorf("%s holds the token", p)
			}
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	logs, _ := os.ReadFile(e.cfg.Logging.File)
	for _, f := range forms {
		if strings.Contains(string(logs), f) {
			t.Error("the log holds the token")
		}
	}
}

// A pull or merge request task gets its commit on its own head branch, and
// no new change is opened.
func TestChangeTaskPushesToItsHeadBranch(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, c := range []struct {
		forge string
		kind  task.Kind
	}{{task.GitHub, task.PullRequest}, {task.GitLab, task.MergeRequest}, {task.Gitea, task.PullRequest}} {
		t.Run(c.forge, func(t *testing.T) {
			e := newEnv(t, setup{forge: c.forge, kind: c.kind, provider: config.ProviderOpenAI, native: true,
				respond: writeFiles("hello.txt")})
			quickstart(t, e)
			g := e.git()
			before := g.changes()
			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent done")
			if got, ok := g.file(e.head, "hello.txt"); !ok || got != "hello.txt from coding-agent\n" {
				t.Fatalf("the head branch %s holds hello.txt = %q, %v", e.head, got, ok)
			}
			if after := g.changes(); len(after) != len(before) {
				t.Errorf("%d changes after the task, %d before: a new one was opened", len(after), len(before))
			}
			if slices.ContainsFunc(g.branches(), func(b string) bool { return strings.HasPrefix(b, "coding-agent/") }) {
				t.Errorf("a branch of the agent's own was pushed: %v", g.branches())
			}
		})
	}
}

// A task that fails pushes nothing and opens nothing; its failure comment
// says where its workspace is kept, and the file it wrote is there.
func TestFailedTaskPushesNothing(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range emulatedForges {
		t.Run(fg, func(t *testing.T) {
			e := newEnv(t, setup{forge: fg, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
				respond: func(e *env, r llmtest.Received) llmtest.Step {
					if toolResults(r) == 0 {
						return writeFiles("half.txt")(e, r)
					}
					return llmtest.Reply{Content: "I am not sure what to do.", Usage: llmtest.Usage{In: 10, Out: 5}}
				}})
			quickstart(t, e)
			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent failed")
			g := e.git()
			if bs := g.branches(); !slices.Equal(bs, []string{"main"}) {
				t.Errorf("branches after a failure: %v, want main alone", bs)
			}
			if cs := g.changes(); len(cs) != 0 {
				t.Errorf("changes after a failure: %+v", cs)
			}
			dir := e.checkout(t, e.ref)
			if _, err := os.Stat(filepath.Join(dir, "half.txt")); err != nil {
				t.Errorf("the failed task's workspace was not kept: %v", err)
			}
			cs := e.botComments()
			if !strings.Contains(cs[len(cs)-1], dir) {
				t.Errorf("the failure comment does not say where the workspace is (%s):\n%s", dir, cs[len(cs)-1])
			}
		})
	}
}

// Two tasks at once (two workers) work in two workspaces through two
// instances of the filesystem server: neither reaches the other's files.
func TestTwoTasksAtOnceNeverShareAWorkspace(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	var (
		mu    sync.Mutex
		refs  = map[int]task.Ref{}
		other = map[int]int{}
		reads = map[int]string{}
	)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			n := taskNumber(t, r)
			mu.Lock()
			mine, theirs := e.checkout(t, refs[n]), e.checkout(t, refs[other[n]])
			mu.Unlock()
			switch toolResults(r) {
			case 0:
				return e.call(r, "Writing.", "workspace/write_file", map[string]any{"path": filepath.Join(mine, "mine.txt"), "content": strconv.Itoa(n)})
			case 1:
				return e.call(r, "Peeking.", "workspace/read_file", map[string]any{"path": filepath.Join(theirs, "mine.txt")})
			}
			mu.Lock()
			if reads[n] == "" { // the peek's result; then the done question, as the peek failed
				reads[n] = lastToolResult(r)
			}
			mu.Unlock()
			return done("Wrote mine.txt.")
		}})
	quickstart(t, e)
	e.cfg.Continuous.Consumer.Workers = 2
	second := e.gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "Another file", Body: "Create another.txt.", Author: "alice",
		Labels: []string{"coding agent", "bug"}})
	mu.Lock()
	refs[e.ref.Number], refs[second] = e.ref, task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: second}
	other[e.ref.Number], other[second] = second, e.ref.Number
	mu.Unlock()
	e.runOK(t)
	for n := range refs {
		got, ok := e.gh.FileAt("acme/app", "coding-agent/issue-"+strconv.Itoa(n), "mine.txt")
		if !ok || got != strconv.Itoa(n) {
			t.Errorf("task %d's branch holds mine.txt = %q, %v", n, got, ok)
		}
		if r := strings.ToLower(reads[n]); !strings.Contains(r, "denied") && !strings.Contains(r, "outside") {
			t.Errorf("task %d read the other task's file: %q", n, reads[n])
		}
	}
	checkNoTokenUnder(t, e, e.cfg.Workspace.Root)
}

var taskLine = regexp.MustCompile(`Task: issue github:acme/app#(\d+)`)

// taskNumber is the issue a request works on, from its first prompt.
func taskNumber(t testing.TB, r llmtest.Received) int {
	for _, m := range r.Messages {
		if sm := taskLine.FindStringSubmatch(m.Content); sm != nil {
			n, _ := strconv.Atoi(sm[1])
			return n
		}
	}
	t.Fatalf("request %d names no task", r.N)
	return 0
}

func lastToolResult(r llmtest.Received) string { return r.Messages[len(r.Messages)-1].Content }

// A `run` killed in the middle of a task (while the model answers, after
// it wrote a file): the next run reuses the workspace as the killed one
// left it (the file is there, so nothing was cloned afresh), finishes, and
// opens one pull request with the file.
func TestKilledTaskReusesItsWorkspace(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	quickstart(t, e)
	e.cfg.Conversation.Enabled = false
	dir := e.checkout(t, e.ref)
	arrived := make(chan struct{})
	e.model.Script(
		llmtest.Reply{Content: `{"comment":"Writing hello.txt.","command":{"tool":"workspace/write_file","args":{"path":"hello.txt",` +
			`"content":"hello before the kill\n"}}}`},
		llmtest.Slow{Arrived: arrived},
	)
	_, stderr := runKilled(t, e, arrived)
	if got, err := os.ReadFile(filepath.Join(dir, "hello.txt")); err != nil || string(got) != "hello before the kill\n" {
		t.Fatalf("after the kill the workspace holds hello.txt = %q, %v\n%s", got, err, stderr)
	}
	e.model.Script(done("Wrote hello.txt."))
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent done")
	branch := "coding-agent/issue-" + strconv.Itoa(e.ref.Number)
	if got, ok := e.gh.FileAt("acme/app", branch, "hello.txt"); !ok || got != "hello before the kill\n" {
		t.Errorf("the delivered branch holds hello.txt = %q, %v", got, ok)
	}
	if ps := e.gh.Pulls("acme/app"); len(ps) != 1 || ps[0].Head != branch {
		t.Errorf("pull requests %+v, want one from %s", ps, branch)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the done task's workspace is still there: %v", err)
	}
}

// A pull or merge request from a fork is worked on read-only: its head is
// checked out from the forge's own ref for it, nothing is pushed anywhere,
// and the change is offered as a patch in the last comment.
func TestForkChangeGetsAPatch(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, c := range []struct {
		forge string
		kind  task.Kind
	}{{task.GitHub, task.PullRequest}, {task.GitLab, task.MergeRequest}, {task.Gitea, task.PullRequest}} {
		t.Run(c.forge, func(t *testing.T) {
			e := newEnv(t, setup{forge: c.forge, kind: c.kind, provider: config.ProviderOpenAI, native: true,
				fork: "stranger/app", respond: writeFiles("hello.txt")})
			quickstart(t, e)
			forkHead, _ := e.emu().Head("stranger/app", e.head)
			baseBranches := e.emu().Branches("acme/app")
			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent done")
			cs := e.botComments()
			last := cs[len(cs)-1]
			if !strings.Contains(last, "git apply") || !strings.Contains(last, "+hello.txt from coding-agent") {
				t.Errorf("the last comment is not the patch:\n%s", last)
			}
			head, _ := e.emu().Head("stranger/app", e.head)
			branches := e.emu().Branches("acme/app")
			if head != forkHead || !slices.Equal(branches, baseBranches) {
				t.Errorf("something was pushed: the fork's head %s → %s, the base's branches %v → %v", forkHead, head, baseBranches, branches)
			}
		})
	}
}
