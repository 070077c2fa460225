package app_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Signed in as a GitHub App (github.app, no token), the agent acts as the
// app's bot user through an installation token it asks for with the app's
// JWT (the emulator checks it with the app's public key): its comments,
// its push over git and its draft pull request are the bot's, and the
// installation it found on the repository is the one used.
func TestGitHubAppActsAsItsBot(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
		respond: writeFiles("hello.txt")})
	quickstart(t, e)
	key := e.gh.InstallApp(4242, "coding-agent-app", "acme")
	path := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(path, key, 0o600); err != nil {
		t.Fatal(err)
	}
	e.cfg.GitHub.Token = ""
	e.cfg.GitHub.App = &config.GitHubApp{AppID: 4242, PrivateKeyFile: path, PrivateKey: config.Secret(key)}
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent done")
	var bots, token []string
	for _, c := range e.gh.Comments(e.ref.Repo, e.ref.Number) {
		switch c.Author {
		case "coding-agent-app[bot]":
			bots = append(bots, c.Body)
		case "coding-agent-bot": // the emulator's token user
			token = append(token, c.Body)
		}
	}
	if len(bots) < 2 || len(token) != 0 {
		t.Errorf("comments by the app's bot %d, by the token's user %d; want the agent's all the bot's", len(bots), len(token))
	}
	g := e.git()
	branch := "coding-agent/issue-" + strconv.Itoa(e.ref.Number)
	if _, ok := g.file(branch, "hello.txt"); !ok {
		t.Errorf("the push with the installation token did not land on %s: branches %v", branch, g.branches())
	}
	changes := slices.DeleteFunc(g.changes(), func(c change) bool { return c.Head != branch })
	if len(changes) != 1 || !changes[0].Draft {
		t.Errorf("changes %+v, want one draft", changes)
	}
	if n := e.gh.InstallationTokens(); n != 1 {
		t.Errorf("%d installation tokens asked for, want 1 (it lives an hour)", n)
	}
	if logs, _ := os.ReadFile(e.cfg.Logging.File); strings.Contains(string(logs), "PRIVATE KEY") {
		t.Error("the log holds the app's private key")
	}
}

// asApp signs e's agent in as a GitHub App installed on acme instead of
// with a token.
func asApp(t *testing.T, e *env) {
	t.Helper()
	key := e.gh.InstallApp(4242, "coding-agent-app", "acme")
	path := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(path, key, 0o600); err != nil {
		t.Fatal(err)
	}
	e.cfg.GitHub.Token = ""
	e.cfg.GitHub.App = &config.GitHubApp{AppID: 4242, PrivateKeyFile: path, PrivateKey: config.Secret(key)}
}

// An installation token revoked mid-run, its expiry an hour ahead, is
// replaced at the first 401: the run goes on as the app's bot and ends
// done, with one new token for the whole burst of refused requests.
func TestGitHubAppRevokedTokenIsReplaced(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if r.N == 1 {
				e.gh.RevokeInstallationTokens()
			}
			return writeThenDone(e, r)
		}})
	asApp(t, e)
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent done")
	if got := e.record().Status; got != task.Done {
		t.Errorf("store status %s, want done", got)
	}
	if n := e.gh.InstallationTokens(); n != 2 {
		t.Errorf("%d installation tokens asked for, want 2: the first, and one when it was refused", n)
	}
	if bots := e.botComments(); len(bots) < 2 || !strings.Contains(bots[len(bots)-1], "Created hello.txt") {
		t.Errorf("the bot's comments %q, want its closing comment among them", bots)
	}
}

// When the app's installation is removed mid-run, no new token can be had:
// `run` fails naming it, and the task it held is not left running in the
// store (nor failed: it was not the task's fault) but queued, so that once
// the app is installed again the next run resumes it and finishes it.
func TestGitHubAppUninstalledStopsTheRun(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if r.N == 1 {
				e.gh.Uninstall("acme")
			}
			return writeThenDone(e, r)
		}})
	asApp(t, e)
	err := e.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "installation") || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("run = %v, want an error saying the app's installation was removed", err)
	}
	if got := e.record().Status; got != task.Queued {
		t.Errorf("store status %s after the refusal, want queued (resumed by the next run)", got)
	}
	if slices.Contains(e.labels(), "coding agent failed") {
		t.Errorf("labels %v: a refused credential failed the task", e.labels())
	}
	e.gh.Install("acme")
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent done")
	if got := e.record().Status; got != task.Done {
		t.Errorf("store status %s after the app was installed again, want done", got)
	}
}

// `serve` whose app was uninstalled backs off: passes made one after
// another (each webhook makes one) fail at once, saying why, and GitHub
// sees one refused request and one refused token request, not one of each
// per pass.
func TestServeBacksOffWhenTheAppIsRefused(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, seed: unlabelled})
	asApp(t, e)
	s := e.serveHTTP(t)
	s.discovered()
	e.gh.Uninstall("acme")
	from := len(e.gh.Requests())
	failed := func() int {
		b, _ := os.ReadFile(e.cfg.Logging.File)
		return strings.Count(string(b), "polling pass failed")
	}
	for i := range 5 {
		// Another issue each time: each delivery is another event.
		n := e.gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "Task " + strconv.Itoa(i), Author: "alice"})
		if status := s.send("/webhooks/github", e.gh.LabelHook("acme/app", n, "coding agent", "", hookSecret)); status != http.StatusAccepted {
			t.Fatalf("delivery %d: status %d", i+1, status)
		}
		waitFor(t, "the pass to fail", func() bool { return failed() > i })
	}
	var refused []string
	for _, r := range e.gh.Requests()[from:] {
		if r.Status == http.StatusUnauthorized || r.Status == http.StatusNotFound {
			refused = append(refused, r.Method+" "+r.Path)
		}
	}
	if len(refused) > 2 {
		t.Errorf("%d requests refused over 5 passes, want at most 2 (the first, and its new token's): %q", len(refused), refused)
	}
	if b, _ := os.ReadFile(e.cfg.Logging.File); !strings.Contains(string(b), "installation was removed") {
		t.Error("the log does not say the app's installation was removed")
	}
}

// A token revoked at the run's last reply is replaced by the request that
// posts the step's comment, and git asks for the token at each command:
// the push that follows is made with the new one and lands.
func TestGitHubAppRevokedTokenIsReplacedBeforeThePush(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	write := writeFiles("hello.txt")
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			step := write(e, r)
			if toolResults(r) == 1 { // the last reply: the push comes next
				e.gh.RevokeInstallationTokens()
			}
			return step
		}})
	quickstart(t, e)
	asApp(t, e)
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent done")
	branch := "coding-agent/issue-" + strconv.Itoa(e.ref.Number)
	if _, ok := e.git().file(branch, "hello.txt"); !ok {
		t.Errorf("the push after the revocation did not land on %s", branch)
	}
	if n := e.gh.InstallationTokens(); n != 2 {
		t.Errorf("%d installation tokens asked for, want 2", n)
	}
}
