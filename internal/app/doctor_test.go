package app_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// modelThat answers doctor's probes as a model does unheld: asked to call
// probe_echo, a native call when native; asked for the JSON protocol's
// object, that object when json; prose otherwise.
func modelThat(native, json bool) func(*env, llmtest.Received) llmtest.Step {
	return func(_ *env, r llmtest.Received) llmtest.Step {
		switch {
		case len(r.Tools) > 0 && native && asked(r, "Call the tool probe_echo"):
			return llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "probe_echo", Args: map[string]string{"text": "ready"}}}}
		case len(r.Tools) == 0 && json && asked(r, "Reply with exactly this JSON object"):
			return llmtest.Reply{Content: "<think>easy</think>\n```json\n" +
				`{"comment": "ready", "command": {"tool": "probe/echo", "args": {"text": "ready"}}}` + "\n```"}
		}
		return llmtest.Reply{Content: "Sure! I would be glad to help with that."}
	}
}

// asked reports whether the request's last message asks for what text says.
func asked(r llmtest.Received, text string) bool {
	return len(r.Messages) > 0 && strings.Contains(r.Messages[len(r.Messages)-1].Content, text)
}

// modelUnder is a model as modelThat, on a server that holds its answers
// to what h says: a reply schema, tool_choice "required".
func modelUnder(h llmtest.Honours, native, json bool) func(*env, llmtest.Received) llmtest.Step {
	return func(e *env, r llmtest.Received) llmtest.Step {
		step, err := h.Answer(r)
		if err != nil {
			e.t.Errorf("answering request %d under %+v: %v", r.N, h, err)
		}
		if step != nil {
			return step
		}
		return modelThat(native, json)(e, r)
	}
}

// doctor runs `coding-agent doctor` on e's config and returns its lines.
func doctor(t *testing.T, e *env, fix bool) (string, error) {
	t.Helper()
	a, err := app.New(t.Context(), e.cfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var out strings.Builder
	err = a.Doctor(t.Context(), &out, fix)
	t.Logf("doctor:\n%s", out.String())
	return out.String(), err
}

func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("doctor's output lacks %q", w)
		}
	}
}

func TestDoctorPassesAndFixesLabels(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, c := range []struct{ forge, provider, model string }{
		{task.GitHub, config.ProviderOpenAI, "gpt-test"},
		{task.GitLab, config.ProviderOllama, "qwen-test"},
		{task.GitHub, config.ProviderLMStudio, "local-model"},
		{task.Gitea, config.ProviderOpenAI, "gpt-test"},
	} {
		fg, provider := c.forge, c.provider
		t.Run(fg+"-"+provider, func(t *testing.T) {
			e := newEnv(t, setup{forge: fg, kind: task.Issue, provider: provider, native: true,
				respond: modelThat(true, true)})
			where := provider + " at " + e.model.OpenAIURL()
			if provider == config.ProviderOllama {
				where = provider + " at " + e.model.URL()
			}
			if fg == task.GitLab {
				e.gl.AddMember("acme/app", e.gl.BotUsername, 30)
			}
			out, err := doctor(t, e, false)
			if err != nil {
				t.Fatalf("doctor = %v, want no failed check", err)
			}
			wantLines(t, out, "warn  forge  "+fg+": acting as @", "a user account",
				"ok    forge  acme/app: @", "may write",
				"warn  labels acme/app lacks \"coding agent processing\"", "doctor --fix",
				"ok    model  "+where+` serves "`+c.model+`"`,
				"it calls tools natively and in the JSON protocol",
				"ok    mcp    fs started with 3 tools", "fit in half of the")
			if strings.Contains(out, "FAIL") {
				t.Errorf("a FAIL line without an error")
			}
			out, err = doctor(t, e, true)
			if err != nil {
				t.Fatal(err)
			}
			wantLines(t, out, "ok    labels acme/app: created \"coding agent processing\", \"coding agent done\"")
			color := func(name string) string {
				switch fg {
				case task.GitHub:
					return e.gh.RepoLabelColor("acme/app", name)
				case task.Gitea:
					return e.gt.LabelColor("acme/app", name)
				}
				return e.gl.ProjectLabelColor("acme/app", name)
			}
			if c := strings.TrimPrefix(color("coding agent done"), "#"); c != "0e8a16" {
				t.Errorf("the done label's color %q, want 0e8a16", c)
			}
			out, _ = doctor(t, e, false)
			wantLines(t, out, "ok    labels acme/app: every label the agent uses exists")
		})
	}
}

func TestDoctorSaysWhatToFix(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, tc := range []struct {
		name   string
		native bool // function_calling
		model  func(*env, llmtest.Received) llmtest.Step
		change func(*env)
		want   []string
	}{
		{"read-only bot", true, modelThat(true, true),
			func(e *env) { e.gh.SetPermission("acme/app", e.gh.BotLogin, "read") },
			[]string{"FAIL  forge  acme/app: @coding-agent-bot cannot write there", "give it write access"}},
		{"model not served", true, modelThat(true, true),
			func(e *env) { e.cfg.LLM.OpenAI.Model = "gpt-nope" },
			[]string{`FAIL  model  openai at`, `does not serve "gpt-nope" (it serves "gpt-test", "local-model", "qwen-test")`}},
		{"no native calls", true, modelThat(false, true), nil,
			[]string{"FAIL  model  it made no native tool call but follows the JSON protocol: set llm.function_calling: false"}},
		{"no tool use at all", false, modelThat(false, false), nil,
			[]string{"FAIL  model  it neither made a native tool call nor followed the JSON protocol", "cannot drive tools"}},
		{"bad token", true, modelThat(true, true),
			func(e *env) { e.cfg.GitHub.Token = "ghp_wrong" },
			[]string{"FAIL  forge  github: ", "401", "check the token"}},
		{"listener taken", true, modelThat(true, true),
			func(e *env) {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					e.t.Fatal(err)
				}
				e.t.Cleanup(func() { l.Close() })
				e.cfg.Server.Listen = l.Addr().String()
			},
			[]string{"FAIL  server cannot listen on 127.0.0.1:"}},
		{"listener without a secret", true, modelThat(true, true),
			func(e *env) { e.cfg.Server.Listen = "127.0.0.1:0" },
			[]string{"ok    server 127.0.0.1:0 can be listened on", "warn  server no github webhook secret"}},
		{"listener with a secret", true, modelThat(true, true),
			func(e *env) {
				e.cfg.Server.Listen, e.cfg.Server.GitHubWebhookSecret = "127.0.0.1:0", "s3cret-hook-value"
			},
			[]string{"ok    server POST /webhooks/github is served"}},
		{"no tools", true, modelThat(true, true),
			func(e *env) { off := false; e.cfg.MCPServers, e.cfg.Workspace.BuiltinTools = nil, &off },
			[]string{"warn  mcp    no mcp_servers and workspace.builtin_tools is false: the agent has no tools"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: tc.native,
				respond: tc.model})
			if tc.change != nil {
				tc.change(e)
			}
			out, err := doctor(t, e, false)
			failing := strings.Contains(strings.Join(tc.want, ""), "FAIL")
			if failing != errors.Is(err, app.ErrDoctor) {
				t.Errorf("doctor = %v; want ErrDoctor %t", err, failing)
			}
			wantLines(t, out, tc.want...)
			if strings.Contains(out, "ghp_wrong") {
				t.Error("doctor printed the token")
			}
		})
	}
}

// doctor reports the isolation each layer of the sandbox gives on this host
// (the CI machines give every layer) and that the model's commands run with
// what sandbox.require asks, with the built-in tools.
func TestDoctorReportsTheSandbox(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
		respond: modelThat(true, true)})
	builtinOnly(t, e)
	out, err := doctor(t, e, false)
	if err != nil {
		t.Fatalf("doctor = %v, want no failed check", err)
	}
	wantLines(t, out, "ok    mcp    workspace started with 6 tools",
		"ok    sandbox user: ", "ok    sandbox network: own network namespace", "ok    sandbox landlock: ABI",
		"ok    sandbox the model's commands run with namespaces isolation (sandbox.require: namespaces), network off")
}

// doctor probes whether the server holds answers to a reply schema
// (Ollama's format, OpenAI's response_format) and honours tool_choice
// "required" (not part of Ollama's API), says so a line each, and names
// the mode that works best for the configured model: as configured (ok),
// or what to set (warn). A field the configured mode relies on and the
// server ignores or refuses is a warning; otherwise only reported.
func TestDoctorProbesWhatTheServerHoldsRepliesTo(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	refuseSchema := func(e *env, r llmtest.Received) llmtest.Step {
		if r.Format != nil {
			return llmtest.Fault{Status: 400}
		}
		return modelThat(false, true)(e, r)
	}
	for _, tc := range []struct {
		name, provider      string
		model               func(*env, llmtest.Received) llmtest.Step
		native, constrained bool // function_calling, constrained: auto
		want                []string
	}{
		{"openai holds both", config.ProviderOpenAI, modelUnder(llmtest.Honours{Format: true, ToolChoice: true}, true, true), true, true,
			[]string{"ok    model  the server holds answers to a reply schema sent as response_format",
				`ok    model  the server honours tool_choice "required"`,
				`ok    model  the mode that works best for "gpt-test" here is native function calling, required by tool_choice (function_calling: true, constrained: auto), as configured`}},
		{"openai holds neither", config.ProviderOpenAI, modelUnder(llmtest.Honours{}, true, true), true, true,
			[]string{"ok    model  the server ignored a reply schema sent as response_format",
				`warn  model  the server ignored tool_choice "required" (the answer called no tool)`,
				`warn  model  the mode that works best for "gpt-test" here is native function calling: set llm.constrained: off`}},
		{"lmstudio holds the schema for a model without tool use", config.ProviderLMStudio, modelUnder(llmtest.Honours{Format: true}, false, false), false, true,
			[]string{"warn  model  it neither made a native tool call nor followed the JSON protocol when asked to, but the server holds its answers to a reply schema",
				"ok    model  the server holds answers to a reply schema sent as response_format",
				`ok    model  the server ignored tool_choice "required"`,
				`ok    model  the mode that works best for "local-model" here is the JSON protocol held to a schema (function_calling: false, constrained: auto), as configured`}},
		{"openai honours tool_choice, the model calls no tool", config.ProviderOpenAI, modelUnder(llmtest.Honours{ToolChoice: true}, false, true), true, false,
			[]string{"FAIL  model  it made no native tool call but follows the JSON protocol: set llm.function_calling: false",
				`ok    model  the server honours tool_choice "required"`,
				`warn  model  the mode that works best for "gpt-test" here is the JSON protocol: set llm.function_calling: false`}},
		{"ollama holds the schema", config.ProviderOllama, modelUnder(llmtest.Honours{Format: true, ToolChoice: true}, false, true), false, true,
			[]string{"ok    model  the server holds answers to a reply schema sent as format",
				"ok    model  tool_choice is not part of Ollama's API",
				`ok    model  the mode that works best for "qwen-test" here is the JSON protocol held to a schema (function_calling: false, constrained: auto), as configured`}},
		{"ollama holds nothing", config.ProviderOllama, modelUnder(llmtest.Honours{}, true, false), true, true,
			[]string{"ok    model  the server ignored a reply schema sent as format",
				"warn  model  tool_choice is not part of Ollama's API: native replies cannot be required to call a tool",
				`warn  model  the mode that works best for "qwen-test" here is native function calling: set llm.constrained: off`}},
		{"openai refuses the schema", config.ProviderOpenAI, refuseSchema, false, true,
			[]string{"warn  model  the server refused a reply schema sent as response_format: ", "400",
				`warn  model  the mode that works best for "gpt-test" here is the JSON protocol: set llm.constrained: off`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: tc.provider, native: tc.native, respond: tc.model})
			if tc.constrained {
				e.cfg.LLM.Constrained = config.ConstrainedAuto
			}
			out, err := doctor(t, e, false)
			failing := strings.Contains(strings.Join(tc.want, ""), "FAIL")
			if failing != errors.Is(err, app.ErrDoctor) {
				t.Errorf("doctor = %v; want ErrDoctor %t", err, failing)
			}
			wantLines(t, out, tc.want...)
		})
	}
}
