package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// runKilledAt runs `coding-agent run` (the binary bin) on e's config and
// kills it (SIGKILL) the moment the GitHub emulator has served a request
// that at picks, before the answer leaves: the request took effect and the
// process never heard so. It reports whether that moment came (the run
// may end before it) and returns what the process wrote to stderr.
func runKilledAt(t *testing.T, bin string, e *env, at func(forgetest.Call) bool) (bool, string) {
	t.Helper()
	cmd := exec.Command(bin, "run", "--config", writeConfig(t, e.cfg))
	cmd.Env = append(os.Environ(), "CA_TEST_TOKEN="+e.gh.Token, "CA_TEST_KEY="+apiKey)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	var once sync.Once
	killed := false
	e.gh.Watch(func(c forgetest.Call) bool {
		if !at(c) {
			return true
		}
		once.Do(func() {
			killed = true
			_ = cmd.Process.Kill()
			<-exited
		})
		return false
	})
	defer e.gh.Watch(nil)
	select {
	case <-exited:
	case <-time.After(2 * time.Minute): // only turns a hang into a failure that says where
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("run neither ended nor reached its kill within 2 minutes; log:\n%s", readTree(t, filepath.Dir(e.cfg.Logging.File)))
	}
	e.gh.Watch(nil)
	once.Do(func() {}) // the watch may still be killing: wait for it
	return killed, stderr.String()
}

// postedComment picks the answer to a comment POST whose body contains
// text: the comment has landed.
func postedComment(text string) func(forgetest.Call) bool {
	return servedWith("POST", func(path string) bool { return strings.HasSuffix(path, "/comments") }, text)
}

// editedComment picks the answer to a comment edit (GitHub's PATCH of
// /issues/comments/ID) whose new body contains text: the edit has landed.
func editedComment(text string) func(forgetest.Call) bool {
	return servedWith("PATCH", func(path string) bool { return strings.Contains(path, "/issues/comments/") }, text)
}

// servedWith picks the answer to a method request on a path that at
// accepts, whose JSON body's "body" contains text.
func servedWith(method string, at func(path string) bool, text string) func(forgetest.Call) bool {
	return func(c forgetest.Call) bool {
		if !c.Served || c.Method != method || !at(c.Path) {
			return false
		}
		var v struct{ Body string }
		return json.Unmarshal(c.Body, &v) == nil && strings.Contains(v.Body, text)
	}
}

// A `coding-agent run` killed right after a comment landed, before the
// process heard so or saved anything saying it had posted it: the next run
// resumes the task and finds the comment by its key instead of posting it
// again. The step comment (plain loop), the closing comment, the delivery
// added to the closing comment (an edit: the next run delivers again and
// replaces what the edit added) and planning's progress comment; each ends
// done with every comment once.
func TestKillRightAfterACommentLandedPostsItOnce(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	bin := buildBinary(t)
	for _, tc := range []struct {
		name string
		env  func(t *testing.T) *env
		at   string // the landed comment's text
		edit bool   // at is an edit's, not a new comment's
		// want are texts the bot's comments hold, each exactly once (of
		// "a|b", one of the two once).
		want []string
	}{
		{name: "step comment", at: "Writing hello.txt.", want: []string{"Writing hello.txt.", closingHello},
			env: func(t *testing.T) *env {
				return newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
			}},
		{name: "closing comment", at: "Created hello.txt with a greeting.", want: []string{"Writing hello.txt.", closingHello},
			env: func(t *testing.T) *env {
				return newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
			}},
		{name: "delivery in the closing comment", at: "coding-agent delivered its work", edit: true,
			want: []string{"Writing hello.txt.", "Wrote hello.txt.", "coding-agent delivered its work"},
			env: func(t *testing.T) *env {
				e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
					respond: writeFiles("hello.txt")})
				quickstart(t, e)
				e.cfg.Conversation.Enabled = false
				return e
			}},
		{name: "living comment, planned", at: "coding-agent が作業中です", want: plannedSteps(),
			env: func(t *testing.T) *env {
				e := planned(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, respond: fullPlan})
				e.cfg.Language = config.LanguageJapanese
				e.cfg.Planning.Reflection.TriggerInterval = 2 // the golden run: 18 requests
				e.now = nil
				return e
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.env(t)
			at := postedComment(tc.at)
			if tc.edit {
				at = editedComment(tc.at)
			}
			killed, stderr := runKilledAt(t, bin, e, at)
			if !killed {
				t.Fatalf("the run ended before a comment containing %q landed:\n%s", tc.at, stderr)
			}
			if got := strings.Count(strings.Join(e.botComments(), "\n"), tc.at); got != 1 {
				t.Fatalf("after the kill %d comments hold %q, want the one that landed", got, tc.at)
			}
			if err := e.run(context.Background()); err != nil {
				t.Fatalf("the run after the kill: %v\nthe killed run's stderr:\n%s", err, stderr)
			}
			e.wantLabels(t, "bug", "coding agent done")
			comments := e.botComments()
			all := strings.Join(comments, "\n")
			for _, w := range tc.want {
				n := 0
				for _, alt := range strings.Split(w, "|") { // either form
					n += strings.Count(all, alt)
				}
				if n != 1 {
					t.Errorf("the comments hold %q %d times, want once", w, n)
				}
			}
			if t.Failed() {
				t.Logf("the bot's comments:\n%s", strings.Join(comments, "\n-----\n"))
			}
			if tc.edit && len(e.gh.Pulls("acme/app")) != 1 {
				t.Errorf("pull requests %+v, want one", e.gh.Pulls("acme/app"))
			}
			if slices.ContainsFunc(comments, func(c string) bool { return strings.Contains(c, "took over") }) {
				t.Error("a restart on the same host said it took the task over")
			}
		})
	}
}

// plannedSteps are the texts of the golden planned run's comments
// (fullPlan, a reflection every 2 actions: 18 requests), each once: the
// living comment (its progress, each call's step, the end) and the
// closing comment's receipt.
func plannedSteps() []string {
	want := []string{"実行計画の進捗", "LLM呼び出し: 18 回", "## 🤖 coding-agent の作業記録"}
	for n := 1; n <= 18; n++ {
		want = append(want, fmt.Sprintf("**ステップ %d**", n))
	}
	return want
}
