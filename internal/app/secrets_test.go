package app_test

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/sanitize"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// A `coding-agent run` process with the forge token and the API key in its
// environment works with an MCP server that reads the process's
// environment (/proc/<ppid>/environ) and prints both secrets from its own
// in every encoding, and a model that quotes whatever it reads in its
// comments, its plan and its verification. Neither secret, in any form,
// reaches a model request, the store file (its raw bytes, after the task
// finished and its checkpoint was dropped), the planning history, the log,
// a comment on the forge, or the process's output.
func TestSecretsReachNothing(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, c := range []struct {
		name     string
		forge    string
		planning bool
		native   bool
		respond  func(*env, llmtest.Received) llmtest.Step
	}{
		{"plain-native", task.GitHub, false, true, leakingLoop},
		{"planned-json", task.GitHub, true, false, leakingPlan},
		{"gitea-plain-native", task.Gitea, false, true, leakingLoop},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, setup{forge: c.forge, kind: task.Issue, provider: config.ProviderOpenAI,
				native: c.native, planning: c.planning, respond: c.respond})
			e.cfg.MCPServers = append(e.cfg.MCPServers, config.MCPServer{Name: "t", Command: []string{mcptest.Build(t)},
				Env: map[string]string{"LEAK_TOKEN": "${CA_TEST_TOKEN}", "LEAK_KEY": "${CA_TEST_KEY}"}})
			cmd := exec.Command(buildBinary(t), "run", "--config", writeConfig(t, e.cfg))
			cmd.Env = append(os.Environ(), "CA_TEST_TOKEN="+e.token(), "CA_TEST_KEY="+apiKey)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out)
			}
			e.wantLabels(t, "bug", "coding agent done")
			checkNothingLeaked(t, e, string(out))
		})
	}
}

// leakingLoop reads the parent's environment and both secrets, quoting
// each result in the next step's comment and the last in its closing one.
func leakingLoop(e *env, r llmtest.Received) llmtest.Step {
	quote := "What I read: " + r.Messages[len(r.Messages)-1].Content
	switch toolResults(r) {
	case 0:
		return e.call(r, "Reading my parent's environment.", "t/parent_env", map[string]any{})
	case 1:
		return e.call(r, quote, "t/leak_env", map[string]any{"name": "LEAK_TOKEN"})
	case 2:
		return e.call(r, quote, "t/leak_env", map[string]any{"name": "LEAK_KEY"})
	}
	return done(quote)
}

// leakingPlan reads the same in pre-planning and again in its one action,
// and writes what it read into its understanding, its plan (the history's
// plan line), its action's summary and its verification's evidence.
func leakingPlan(e *env, r llmtest.Received) llmtest.Step {
	w := where(r)
	read := "nothing"
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if c := r.Messages[i].Content; strings.Contains(c, "plain: ") || strings.Contains(c, "parent_env") {
			read = c
			break
		}
	}
	switch w.Phase {
	case "pre-planning":
		switch w.Tools {
		case 0:
			return e.call(r, "", "t/parent_env", map[string]any{})
		case 1:
			return e.call(r, "", "t/leak_env", map[string]any{"name": "LEAK_TOKEN"})
		case 2:
			return e.call(r, "", "t/leak_env", map[string]any{"name": "LEAK_KEY"})
		}
		return understanding("What I read: " + read)
	case "planning":
		return object(map[string]any{"phase": "planning", "comment": "Planned after reading: " + read,
			"goal_understanding": map[string]any{"main_objective": "Add hello.txt; the environment said " + read,
				"success_criteria": []string{"hello.txt exists"}},
			"task_decomposition": map[string]any{"subtasks": []map[string]any{{"id": "t1", "description": "greeting"}}},
			"action_plan": map[string]any{"actions": []map[string]any{
				{"id": "a1", "task_id": "t1", "description": "Write hello.txt", "tools": []string{"fs/write_file"}}}}})
	case "execution":
		switch w.Tools {
		case 0:
			return e.call(r, "", "t/leak_env", map[string]any{"name": "LEAK_TOKEN"})
		case 1:
			return e.write(r, "", "hello.txt", "hello\n")
		}
		return actionEnd(w.Action, "completed", "written after reading "+read, "")
	case "verification":
		return object(map[string]any{"phase": "verification", "comment": "Checked: " + read,
			"verification": map[string]any{"passed": true, "criteria": []map[string]any{
				{"criterion": "hello.txt exists", "met": true, "evidence": read}}},
			"additional_actions": []any{}})
	}
	e.t.Errorf("request %d: unexpected phase %q", r.N, w.Phase)
	return llmtest.Fault{Status: 400, Body: "unexpected"}
}

// checkNothingLeaked looks for the token and the API key, in every form
// mcptest.Leaked knows, in every place the run wrote, and checks that the
// leaking tools did run and were redacted (a test that saw no secret
// proves nothing).
func checkNothingLeaked(t *testing.T, e *env, output string) {
	t.Helper()
	places := map[string]string{"the process's output": output}
	var seen strings.Builder
	for _, r := range e.model.Requests() {
		var b strings.Builder
		b.Write(r.Body)
		for _, m := range r.Messages {
			b.WriteString("\n" + m.Content)
			for _, c := range m.ToolCalls {
				b.WriteString("\n" + string(c.Arguments))
			}
		}
		places[fmt.Sprintf("model request %d", r.N)] = b.String()
		seen.WriteString(b.String())
	}
	for name, dir := range map[string]string{"the store": e.cfg.StateDir, "the planning history": e.cfg.Planning.History.Directory,
		"the log": filepath.Dir(e.cfg.Logging.File)} {
		places[name] = readTree(t, dir)
	}
	places["the comments"] = strings.Join(e.allComments(), "\n")
	for place, text := range places {
		for name, secret := range map[string]string{"the forge's token": e.token(), "the API key": apiKey} {
			if w := mcptest.Leaked(text, secret); w != "" {
				t.Errorf("%s reached %s: %q", name, place, w)
			}
		}
	}
	if s := seen.String(); !strings.Contains(s, "plain: "+sanitize.Redacted) ||
		!(strings.Contains(s, "CA_TEST_TOKEN="+sanitize.Redacted) || strings.Contains(s, "permission denied")) {
		t.Errorf("the model never saw the leaking tools' redacted output:\n%s", s)
	}
	if !strings.Contains(places["the comments"], sanitize.Redacted) {
		t.Errorf("no comment quotes what the tools printed:\n%s", places["the comments"])
	}
	if e.cfg.Planning.Enabled && !strings.Contains(places["the planning history"], sanitize.Redacted) {
		t.Errorf("the history does not quote what the tools printed:\n%s", places["the planning history"])
	}
}

// readTree is every file under dir, concatenated as raw bytes ("" when dir
// does not exist).
func readTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		b.Write(data)
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b.String()
}
