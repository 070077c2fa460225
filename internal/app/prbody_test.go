package app_test

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// roundWork scripts one round in either mode through the built-in
// workspace tools: write file, then run command (none when ""), then end.
// The plain loop's closing words are closing; planning mode's one action
// says what it did, and its verification note is closing. The file holds
// a line naming it (roundWriting gives other content).
func roundWork(planning bool, file, command, closing string) func(e *env, r llmtest.Received) llmtest.Step {
	return roundWriting(planning, file, file+" from coding-agent\n", command, closing)
}

// roundWriting is roundWork writing content.
func roundWriting(planning bool, file, content, command, closing string) func(e *env, r llmtest.Received) llmtest.Step {
	if !planning {
		return func(e *env, r llmtest.Received) llmtest.Step {
			switch n := toolResults(r); {
			case n == 0:
				return e.call(r, "Writing "+file+".", "workspace/write_file", map[string]any{"path": file, "content": content})
			case n == 1 && command != "":
				return e.call(r, "Running "+command+".", "workspace/run_command", map[string]any{"command": command})
			}
			return done(closing)
		}
	}
	return func(e *env, r llmtest.Received) llmtest.Step {
		w := where(r)
		switch w.Phase {
		case "pre-planning":
			return understanding("")
		case "planning":
			return object(map[string]any{"phase": "planning",
				"goal_understanding": map[string]any{"main_objective": "Add " + file, "success_criteria": []string{file + " exists"}},
				"task_decomposition": map[string]any{"subtasks": []map[string]any{{"id": "t1", "description": "the file"}}},
				"action_plan": map[string]any{"actions": []map[string]any{
					{"id": "a1", "task_id": "t1", "description": "Write " + file, "tools": []string{"workspace/write_file"}}}}})
		case "execution":
			switch {
			case w.Tools == 0:
				return e.call(r, "", "workspace/write_file", map[string]any{"path": file, "content": content})
			case w.Tools == 1 && command != "":
				return e.call(r, "", "workspace/run_command", map[string]any{"command": command})
			}
			return actionEnd(w.Action, "completed", "Wrote "+file+" with its line", "")
		case "verification":
			return verification(true, closing)
		}
		return llmtest.Fault{Status: 400, Body: "unexpected phase " + w.Phase}
	}
}

// roundSections are the round headings of a change's body, in order.
var roundHeading = regexp.MustCompile(`(?m)^#### (?:Round|ラウンド) (\d+)`)

// An issue's pull or merge request explains itself, on both forges and in
// both modes: after a follow-up round its body (written by the daemon)
// closes the issue and quotes it, lists every file changed with the
// diffstat, and holds one section per round, each with what was run (the
// command and its exit status) or "Nothing was run."; the first round's
// section is still there, as written. Each round's commit subject says
// what that round changed (its file), not the issue's title. References
// use the forge's own notation.
func TestChangeBodyExplainsEachRound(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, fg := range emulatedForges {
		for _, planning := range []bool{false, true} {
			name := fg + "/plain"
			if planning {
				name = fg + "/planning"
			}
			t.Run(name, func(t *testing.T) {
				round := 1
				var script [3]func(*env, llmtest.Received) llmtest.Step
				closing := [3]string{1: "Wrote hello.txt.", 2: "Wrote bye.txt and read it back."}
				if planning { // the verification note
					closing = [3]string{1: "All criteria are met: I read hello.txt.", 2: "All criteria are met: I read bye.txt."}
				}
				script[1] = roundWork(planning, "hello.txt", "", closing[1])
				script[2] = roundWork(planning, "bye.txt", "cat bye.txt", closing[2])
				e := newEnv(t, setup{forge: fg, kind: task.Issue, provider: config.ProviderOpenAI, native: true, conversation: true,
					planning: planning, respond: func(e *env, r llmtest.Received) llmtest.Step { return script[round](e, r) }})
				quickstart(t, e)
				e.cfg.Language = config.LanguageEnglish
				e.runOK(t)
				g := e.git()
				branch := "coding-agent/issue-" + strconv.Itoa(e.ref.Number)
				body := oneChange(t, g, branch).Body
				first := roundSection(t, body, 1)
				for _, want := range []string{"Closes #" + strconv.Itoa(e.ref.Number), "Add a greeting file", "Create hello.txt saying hello.",
					"`hello.txt`", "1 file changed"} {
					if !strings.Contains(body, want) {
						t.Errorf("round 1: the body lacks %q:\n%s", want, body)
					}
				}
				if !strings.Contains(first, "Nothing was run.") {
					t.Errorf("round 1 ran nothing, its section does not say so:\n%s", first)
				}
				subject1 := g.commits(branch)[0].Subject
				if !strings.Contains(subject1, "hello.txt") || strings.Contains(subject1, "Add a greeting file") {
					t.Errorf("round 1's commit subject %q does not say what it changed (or copies the title)", subject1)
				}

				round = 2
				e.addComment("alice", "Please also add a goodbye file.")
				e.runOK(t)
				body = oneChange(t, g, branch).Body
				if n := roundHeading.FindAllStringSubmatch(body, -1); len(n) != 2 || n[0][1] != "1" || n[1][1] != "2" {
					t.Errorf("round sections after round 2: %v, want rounds 1 and 2:\n%s", n, body)
				}
				if got := roundSection(t, body, 1); got != first {
					t.Errorf("round 2 rewrote round 1's section:\n%s\nwas:\n%s", got, first)
				}
				second := roundSection(t, body, 2)
				for _, want := range []string{"`bye.txt`", "`cat bye.txt`", "exit 0"} {
					if !strings.Contains(second, want) {
						t.Errorf("round 2's section lacks %q:\n%s", want, second)
					}
				}
				for _, want := range []string{"`hello.txt`", "`bye.txt`", "2 files changed"} {
					if !strings.Contains(body, want) {
						t.Errorf("round 2: the body lacks %q:\n%s", want, body)
					}
				}
				log := g.commits(branch)
				subject2 := log[0].Subject
				if !strings.Contains(subject2, "bye.txt") || subject2 == subject1 || strings.Contains(subject2, "Add a greeting file") {
					t.Errorf("round 2's commit subject %q does not say what it changed (round 1's: %q)", subject2, subject1)
				}
				if planning && strings.Contains(log[0].Subject+log[0].Body, "All criteria are met") && !strings.Contains(log[0].Body, "Wrote bye.txt") {
					t.Errorf("planning mode's commit is the verification note: %+v", log[0])
				}
				checkNotation(t, fg, body+"\n"+log[0].Subject+"\n"+log[0].Body)
			})
		}
	}
}

// A pull or merge request task's commits each say what their round
// changed, not the change's title; the change's description keeps what
// its author wrote and gains the daemon's account of each round, in the
// forge's own notation (never GitLab's `!N` on GitHub).
func TestChangeTaskCommitsSayWhatEachRoundChanged(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, c := range []struct {
		forge string
		kind  task.Kind
	}{{task.GitHub, task.PullRequest}, {task.GitLab, task.MergeRequest}, {task.Gitea, task.PullRequest}} {
		t.Run(c.forge, func(t *testing.T) {
			round := 1
			e := newEnv(t, setup{forge: c.forge, kind: c.kind, provider: config.ProviderOpenAI, native: true, conversation: true,
				seed: func(s *forgetest.IssueSeed) { s.Title, s.Body = "Greeting feature", "The author's own description." },
				respond: func(e *env, r llmtest.Received) llmtest.Step {
					if round == 1 {
						return roundWork(false, "hello.txt", "", "Wrote hello.txt.")(e, r)
					}
					return roundWork(false, "bye.txt", "", "Wrote bye.txt.")(e, r)
				}})
			quickstart(t, e)
			e.cfg.Language = config.LanguageEnglish
			e.runOK(t)
			round = 2
			e.addComment("alice", "Please also add a goodbye file.")
			e.runOK(t)
			g := e.git()
			log := g.commits(e.head)
			if len(log) < 2 {
				t.Fatalf("commits on %s: %+v", e.head, log)
			}
			for i, file := range []string{"bye.txt", "hello.txt"} {
				if s := log[i].Subject; strings.Contains(s, "Greeting feature") || !strings.Contains(s, file) {
					t.Errorf("commit %d's subject %q: want what its round changed (%s), not the title", i, s, file)
				}
			}
			body := oneChange(t, g, e.head).Body
			if !strings.HasPrefix(body, "The author's own description.") {
				t.Errorf("the author's description was not kept first:\n%s", body)
			}
			if n := roundHeading.FindAllString(body, -1); len(n) != 2 {
				t.Errorf("round sections: %v, want 2:\n%s", n, body)
			}
			checkNotation(t, c.forge, body+"\n"+log[0].Subject+"\n"+log[0].Body+"\n"+log[1].Subject+"\n"+log[1].Body)
		})
	}
}

// oneChange is the one change whose head is branch.
func oneChange(t *testing.T, g forgeGit, branch string) change {
	t.Helper()
	cs := slices.DeleteFunc(g.changes(), func(c change) bool { return c.Head != branch })
	if len(cs) != 1 {
		t.Fatalf("changes with head %s: %+v, want one", branch, cs)
	}
	return cs[0]
}

// roundSection is round n's section of a change's body: from its heading
// to the next round's, or to the end of the daemon's block.
func roundSection(t *testing.T, body string, n int) string {
	t.Helper()
	loc := regexp.MustCompile(`(?m)^#### (?:Round|ラウンド) ` + strconv.Itoa(n) + `\b`).FindStringIndex(body)
	if loc == nil {
		t.Fatalf("the body has no section for round %d:\n%s", n, body)
	}
	rest := body[loc[0]:]
	if next := regexp.MustCompile(`(?m)^(?:#### (?:Round|ラウンド) \d+|<!-- /?coding-agent)`).FindAllStringIndex(rest, 2); len(next) > 1 {
		rest = rest[:next[1][0]]
	}
	return strings.TrimSpace(rest)
}

// checkNotation: on GitHub no reference is written `!N` or `owner/repo!N`.
func checkNotation(t *testing.T, fg, text string) {
	t.Helper()
	if fg == task.GitHub && regexp.MustCompile(`(^|[\s(/\w])!\d+`).MatchString(text) {
		t.Errorf("GitLab's !N notation on GitHub:\n%s", text)
	}
}

// A pull request task whose `run` is killed right after its push landed,
// before the description was updated: the next run, which pushes nothing,
// still gives the round its section (the workspace kept where the
// undescribed pushes began). The section was missing before.
func TestKillAfterThePushStillDescribesTheRound(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	bin := buildBinary(t)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.PullRequest, provider: config.ProviderOpenAI, native: true,
		seed:    func(s *forgetest.IssueSeed) { s.Title, s.Body = "Greeting feature", "The author's own description." },
		respond: roundWork(false, "hello.txt", "", "Wrote hello.txt.")})
	quickstart(t, e)
	e.cfg.Language = config.LanguageEnglish
	e.cfg.Conversation.Enabled = false
	killed, stderr := runKilledAt(t, bin, e, func(c forgetest.Call) bool {
		if !c.Served || c.Method != "POST" || !strings.HasSuffix(c.Path, "/git-receive-pack") {
			return false
		}
		_, pushed := e.git().file(e.head, "hello.txt")
		return pushed
	})
	if !killed {
		t.Fatalf("the run ended before its push landed:\n%s", stderr)
	}
	if body := oneChange(t, e.git(), e.head).Body; roundHeading.MatchString(body) {
		t.Fatalf("the description has a round section before the run that writes it was killed:\n%s", body)
	}
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("the run after the kill: %v\nthe killed run's stderr:\n%s", err, stderr)
	}
	e.wantLabels(t, "bug", "coding agent done")
	body := oneChange(t, e.git(), e.head).Body
	if n := roundHeading.FindAllString(body, -1); len(n) != 1 || !strings.Contains(roundSection(t, body, 1), "`hello.txt`") {
		t.Errorf("the description after the rerun, want one round section naming hello.txt:\n%s", body)
	}
}
