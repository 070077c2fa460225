package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/sandbox"
	"github.com/coding-agent/coding-agent/internal/task"
)

// ErrDoctor is returned by Doctor when a check failed.
var ErrDoctor = errors.New("a check failed")

// doctor writes the checks' lines.
type doctor struct {
	out    io.Writer
	failed bool
}

func (d *doctor) line(level, what, msg string, args ...any) {
	if level == "FAIL" {
		d.failed = true
	}
	fmt.Fprintf(d.out, "%-4s  %-6s %s\n", level, what, fmt.Sprintf(msg, args...))
}

// Doctor talks to the configured services and writes one line per check:
// ok, warn, or FAIL with what to fix. With fix it creates the labels the
// repositories lack. It returns ErrDoctor when a check failed.
func (a *App) Doctor(ctx context.Context, out io.Writer, fix bool) error {
	d := &doctor{out: out}
	a.doctorForge(ctx, d, fix)
	budget := a.doctorModel(ctx, d)
	a.doctorTools(ctx, d, budget)
	a.doctorSandbox(d)
	a.doctorListener(d)
	if d.failed {
		return ErrDoctor
	}
	return nil
}

func (a *App) doctorForge(ctx context.Context, d *doctor, fix bool) {
	setup := a.setup
	acct, err := setup.Account(ctx)
	if err != nil {
		d.line("FAIL", "forge", "%s: %s (check the token or app and the api_url)", a.cfg.TaskSource, a.redact(err.Error()))
		return
	}
	if acct.Bot {
		d.line("ok", "forge", "%s: acting as @%s, a bot user", a.cfg.TaskSource, acct.Login)
	} else {
		fixWith := forges[a.cfg.TaskSource].BotAdvice
		d.line("warn", "forge", "%s: acting as @%s, a user account: comments written as @%s are taken for the agent's own "+
			"and never heard; if that is you, use %s", a.cfg.TaskSource, acct.Login, acct.Login, fixWith)
	}
	repos, beyond := a.cfg.Scope()
	if beyond != "" {
		d.line("warn", "forge", "the repositories of %s are discovered, not checked one by one here: list them to have them checked", beyond)
	}
	labels := a.cfg.Labels()
	for _, r := range repos {
		if ok, err := setup.CanPush(ctx, r); err != nil {
			d.line("FAIL", "forge", "%s: %s", r, a.redact(err.Error()))
			continue
		} else if !ok {
			d.line("FAIL", "forge", "%s: @%s cannot write there (it labels, comments and pushes): give it write access "+
				"(GitLab: Developer or higher)", r, acct.Login)
		} else {
			d.line("ok", "forge", "%s: @%s may write", r, acct.Login)
		}
		a.doctorLabels(ctx, d, setup, r, labels, fix)
	}
}

func (a *App) doctorLabels(ctx context.Context, d *doctor, setup forge.Setup, repo string, labels task.Labels, fix bool) {
	have, err := setup.RepoLabels(ctx, repo)
	if err != nil {
		d.line("FAIL", "labels", "%s: %s", repo, a.redact(err.Error()))
		return
	}
	var missing, created []string
	for _, r := range task.Roles {
		name := labels.Of(r.Role)
		if name == "" || slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(h, name) }) {
			continue
		}
		if !fix {
			missing = append(missing, name)
			continue
		}
		if err := setup.CreateLabel(ctx, repo, name, r.Color); err != nil {
			d.line("FAIL", "labels", "%s: %s", repo, a.redact(err.Error()))
			return
		}
		created = append(created, name)
	}
	switch {
	case len(missing) > 0:
		d.line("warn", "labels", "%s lacks %s: `coding-agent doctor --fix` creates them (the bot label must exist for "+
			"people to add it)", repo, quoteAll(missing))
	case len(created) > 0:
		d.line("ok", "labels", "%s: created %s", repo, quoteAll(created))
	default:
		d.line("ok", "labels", "%s: every label the agent uses exists", repo)
	}
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// probeTool is the tool both protocol probes ask the model to call.
const probeTool = "probe_echo"

// servedModels lists the models the configured server serves, and says
// where it is.
func (a *App) servedModels(ctx context.Context, timeout time.Duration) (served []string, where string, err error) {
	c := a.cfg.LLM
	p, err := a.provider()
	if err != nil {
		return nil, "", err
	}
	_, _, _, where = p.settings(c)
	served, err = p.served(ctx, c, a.httpClient(timeout, false), a.Log)
	return served, where, err
}

// serves reports whether served holds model (Ollama's ":latest" implied).
func serves(served []string, model string) bool {
	return slices.ContainsFunc(served, func(s string) bool { return s == model || s == model+":latest" })
}

// reachModel checks, before any task is claimed, that the model server
// answers: a command that would work on tasks fails at its start when it
// does not, rather than failing the first task it claims. A server that
// answers without listing the model is only logged (some list their models
// their own way); `doctor` says more.
func (a *App) reachModel(ctx context.Context) error {
	provider, model := a.model()
	served, where, err := a.servedModels(ctx, 30*time.Second)
	if err != nil {
		return fmt.Errorf("the %s model server at %s does not answer: %s (is it running? `coding-agent doctor` checks it)",
			provider, where, a.redact(err.Error()))
	}
	if !serves(served, model) {
		a.Log.Warn("the model server does not list the configured model", "provider", provider, "model", model, "served", served)
	}
	return nil
}

// doctorModel checks the model and returns the context budget it found
// (zero when the model could not be asked).
func (a *App) doctorModel(ctx context.Context, d *doctor) engine.Budget {
	c := a.cfg.LLM
	provider, model := a.model()
	served, where, err := a.servedModels(ctx, c.Timeout())
	if err != nil {
		d.line("FAIL", "model", "%s at %s: %s (is the server running? the api key right?)", provider, where, a.redact(err.Error()))
		return engine.Budget{}
	}
	if !serves(served, model) {
		hint := ""
		if pull := providers[provider].pull; pull != "" {
			hint = "; " + fmt.Sprintf(pull, model)
		}
		d.line("FAIL", "model", "%s at %s does not serve %q (it serves %s)%s", provider, where, model, quoteAll(served), hint)
		return engine.Budget{}
	}
	budget := a.budget(ctx)
	d.line("ok", "model", "%s at %s serves %q; context %d tokens, %d kept for the reply", provider, where, model,
		budget.ContextLength, budget.Reserve)
	m, err := a.newLLM(budget)
	if err != nil {
		d.line("FAIL", "model", "%s", err)
		return budget
	}
	native, nerr := probeNative(ctx, m)
	jsonOK, jerr := probeJSON(ctx, m)
	if nerr != nil || jerr != nil {
		d.line("FAIL", "model", "probing the model: %s", a.redact(errors.Join(nerr, jerr).Error()))
		return budget
	}
	held := a.probeHeld(ctx, m)
	switch {
	case native && jsonOK:
		d.line("ok", "model", "it calls tools natively and in the JSON protocol (function_calling: %t)", c.FunctionCalling)
	case native && !c.FunctionCalling:
		d.line("warn", "model", "it calls tools natively but did not follow the JSON protocol: set llm.function_calling: true")
	case native:
		d.line("ok", "model", "it calls tools natively (function_calling: true)")
	case jsonOK && c.FunctionCalling:
		d.line("FAIL", "model", "it made no native tool call but follows the JSON protocol: set llm.function_calling: false")
	case jsonOK:
		d.line("ok", "model", "it follows the JSON protocol (function_calling: false)")
	case held.format:
		d.line("warn", "model", "it neither made a native tool call nor followed the JSON protocol when asked to, "+
			"but the server holds its answers to a reply schema: only the JSON protocol with a schema can drive tools")
	default:
		d.line("FAIL", "model", "it neither made a native tool call nor followed the JSON protocol when asked to: "+
			"it cannot drive tools; choose a model trained for tool use")
	}
	a.doctorHeld(d, held, native, jsonOK)
	return budget
}

// probeNative asks for one native call of probeTool.
func probeNative(ctx context.Context, m llm.Client) (bool, error) {
	resp, err := m.Chat(ctx, llm.Request{
		Messages: []llm.Message{
			{Role: llm.System, Content: "You are checking that tool calls work. Use the tools you are given."},
			{Role: llm.User, Content: `Call the tool ` + probeTool + ` with the text "ready". Do not answer in prose.`},
		},
		Tools: []llm.Tool{{Name: probeTool, Description: "Echoes its text back.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}},
	})
	if err != nil {
		return false, fmt.Errorf("native tool call: %w", err)
	}
	return slices.ContainsFunc(resp.Message.ToolCalls, func(c llm.ToolCall) bool { return c.Name == probeTool }), nil
}

// probeJSON asks for the same call written as the JSON protocol's object.
func probeJSON(ctx context.Context, m llm.Client) (bool, error) {
	resp, err := m.Chat(ctx, llm.Request{Messages: []llm.Message{
		{Role: llm.System, Content: "You are checking that you can answer in JSON. Reply with one JSON object and nothing else."},
		{Role: llm.User, Content: `Reply with exactly this JSON object: {"comment": "ready", "command": {"tool": "probe/echo", "args": {"text": "ready"}}}`},
	}})
	if err != nil {
		return false, fmt.Errorf("JSON protocol: %w", err)
	}
	for _, obj := range engine.JSONObjects(engine.StripThink(resp.Message.Content)) {
		var r struct {
			Command struct {
				Tool string `json:"tool"`
			} `json:"command"`
		}
		if json.Unmarshal([]byte(obj), &r) == nil && r.Command.Tool == "probe/echo" {
			return true, nil
		}
	}
	return false, nil
}

// held is what the server holds the model's answers to, as probed: a
// reply schema (Ollama's format, OpenAI's response_format) and
// tool_choice "required"; refused is the server's error when it refused
// the field, and noChoice says the wire has no tool_choice at all
// (Ollama's).
type held struct {
	format, choice               bool
	formatRefused, choiceRefused error
	noChoice                     bool
}

// probeHeld probes whether the server enforces a reply schema and honours
// tool_choice "required". A server that refuses either is not a failure:
// the mode that needs it is not recommended.
func (a *App) probeHeld(ctx context.Context, m llm.Client) held {
	var h held
	h.format, h.formatRefused = probeFormat(ctx, m)
	if !providers[a.cfg.LLM.Provider].toolChoice {
		h.noChoice = true
	} else {
		h.choice, h.choiceRefused = probeToolChoice(ctx, m)
	}
	return h
}

// probeSchema is the reply schema of the format probe: one word, under a
// key no model writes unasked (the servers do not show the schema to the
// model).
var probeSchema = json.RawMessage(`{"type":"object","properties":{"probe_word":{"type":"string"}},"required":["probe_word"],"additionalProperties":false}`)

// probeFormat asks for prose under a reply schema: an answer that is the
// schema's JSON object and nothing else is one the server held to it.
func probeFormat(ctx context.Context, m llm.Client) (bool, error) {
	resp, err := m.Chat(ctx, llm.Request{
		Messages: []llm.Message{
			{Role: llm.System, Content: "You are checking how a server answers. Answer in plain prose."},
			{Role: llm.User, Content: "Greet me in one word."},
		},
		Format: probeSchema,
	})
	if err != nil {
		return false, err
	}
	var v struct {
		Word *string `json:"probe_word"`
	}
	dec := json.NewDecoder(strings.NewReader(engine.StripThink(resp.Message.Content)))
	dec.DisallowUnknownFields()
	return dec.Decode(&v) == nil && v.Word != nil && !dec.More(), nil
}

// probeToolChoice asks for a one-word greeting with a tool offered and
// tool_choice "required": a call is an answer the server held to it.
func probeToolChoice(ctx context.Context, m llm.Client) (bool, error) {
	resp, err := m.Chat(ctx, llm.Request{
		Messages: []llm.Message{
			{Role: llm.System, Content: "You are checking how a server answers. Answer in plain prose."},
			{Role: llm.User, Content: "Reply with a one-word greeting."},
		},
		Tools: []llm.Tool{{Name: probeTool, Description: "Echoes its text back.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}},
		ToolChoice: llm.ToolChoiceRequired,
	})
	if err != nil {
		return false, err
	}
	return len(resp.Message.ToolCalls) > 0, nil
}

// mode is a way to drive tools: native calls or the JSON protocol, held
// to the protocol by the server or not.
type mode struct {
	name                         string
	functionCalling, constrained bool
}

// recommend is the mode that works best for the model as probed: native
// calls when the model makes them (the format it was trained on), held by
// tool_choice where the server honours it; else the JSON protocol, held
// to a schema where the server enforces one (every reply is then usable,
// even from a model that did not follow the protocol unheld); ok is false
// when none works.
func recommend(native, jsonOK bool, h held) (m mode, ok bool) {
	switch {
	case native && h.choice:
		return mode{"native function calling, required by tool_choice", true, true}, true
	case native:
		return mode{"native function calling", true, false}, true
	case h.format:
		return mode{"the JSON protocol held to a schema", false, true}, true
	case jsonOK:
		return mode{"the JSON protocol", false, false}, true
	}
	return mode{}, false
}

// doctorHeld says, a line each, whether the server holds answers to a
// reply schema and honours tool_choice, and which mode to configure. A
// field the configured mode does not use is only reported.
func (a *App) doctorHeld(d *doctor, h held, native, jsonOK bool) {
	c := a.cfg.LLM
	constrained := c.Constrained == config.ConstrainedAuto
	field := providers[c.Provider].formatField
	level := func(used bool) string {
		if used {
			return "warn"
		}
		return "ok"
	}
	needFormat := level(constrained && !c.FunctionCalling)
	switch {
	case h.formatRefused != nil:
		d.line(needFormat, "model", "the server refused a reply schema sent as %s: %s", field, a.redact(h.formatRefused.Error()))
	case h.format:
		d.line("ok", "model", "the server holds answers to a reply schema sent as %s: JSON replies can be held to the protocol", field)
	default:
		d.line(needFormat, "model", "the server ignored a reply schema sent as %s (the answer did not follow it): "+
			"JSON replies cannot be held to the protocol here", field)
	}
	needChoice := level(constrained && c.FunctionCalling)
	switch {
	case h.noChoice:
		d.line(needChoice, "model", "tool_choice is not part of Ollama's API: native replies cannot be required to call a tool")
	case h.choiceRefused != nil:
		d.line(needChoice, "model", "the server refused tool_choice \"required\": %s", a.redact(h.choiceRefused.Error()))
	case h.choice:
		d.line("ok", "model", "the server honours tool_choice \"required\": native replies can be held to a tool call")
	default:
		d.line(needChoice, "model", "the server ignored tool_choice \"required\" (the answer called no tool): "+
			"native replies cannot be required to call a tool here")
	}
	m, ok := recommend(native, jsonOK, h)
	if !ok {
		return
	}
	want := fmt.Sprintf("function_calling: %t, constrained: %s", m.functionCalling, onOff(m.constrained))
	if m.functionCalling == c.FunctionCalling && m.constrained == constrained {
		d.line("ok", "model", "the mode that works best for %s here is %s (%s), as configured", a.modelName(), m.name, want)
		return
	}
	var set []string
	if m.functionCalling != c.FunctionCalling {
		set = append(set, fmt.Sprintf("llm.function_calling: %t", m.functionCalling))
	}
	if m.constrained != constrained {
		set = append(set, "llm.constrained: "+onOff(m.constrained))
	}
	d.line("warn", "model", "the mode that works best for %s here is %s: set %s", a.modelName(), m.name, strings.Join(set, " and "))
}

func onOff(constrained bool) string {
	if constrained {
		return config.ConstrainedAuto
	}
	return config.ConstrainedOff
}

// modelName is the configured model, quoted.
func (a *App) modelName() string {
	_, model := a.model()
	return fmt.Sprintf("%q", model)
}

func (a *App) doctorTools(ctx context.Context, d *doctor, b engine.Budget) {
	if len(a.cfg.MCPServers) == 0 && !a.cfg.BuiltinTools() {
		d.line("warn", "mcp", "no mcp_servers and workspace.builtin_tools is false: the agent has no tools and can only comment")
		return
	}
	start := time.Now()
	if err := a.startAgent(ctx); err != nil {
		d.line("FAIL", "mcp", "%s", a.redact(err.Error()))
		return
	}
	per := map[string]int{}
	for _, t := range a.host.Tools() {
		per[t.Server]++
	}
	for _, s := range a.host.Servers() {
		if s.URL != "" {
			d.line("ok", "mcp", "%s at %s answered with %d tools (streamable HTTP)", s.Name, a.redact(s.URL), per[s.Name])
			continue
		}
		scope := ""
		if s.Scope != "" {
			scope = fmt.Sprintf(" (scope %s: an instance per task)", s.Scope)
		}
		d.line("ok", "mcp", "%s started with %d tools%s", s.Name, per[s.Name], scope)
	}
	if b.ContextLength == 0 {
		d.line("ok", "mcp", "the system prompt and tool catalog fit in half of the context budget (started in %s)",
			time.Since(start).Round(time.Millisecond))
		return
	}
	d.line("ok", "mcp", "the system prompt and tool catalog fit in half of the %d-token budget (started in %s)",
		b.ContextLength-b.Reserve, time.Since(start).Round(time.Millisecond))
}

// doctorListener checks serve's HTTP listener, when configured: that its
// address can be listened on now, and which webhook paths it would serve.
// Whether the forge's webhooks reach it from outside cannot be seen from
// here: the lines say what to point them at.
func (a *App) doctorListener(d *doctor) {
	srv := a.cfg.Server
	if srv.Listen == "" {
		return
	}
	l, err := net.Listen("tcp", srv.Listen)
	if err != nil {
		d.line("FAIL", "server", "cannot listen on %s: %s (another process has it? change server.listen)", srv.Listen, err)
		return
	}
	l.Close()
	d.line("ok", "server", "%s can be listened on: /healthz, /readyz and /metrics", srv.Listen)
	if secret, key := a.cfg.Webhook(); secret == "" {
		d.line("warn", "server", "no %s webhook secret: pickup waits for the next poll (set server.%s)", a.cfg.TaskSource, key)
		return
	}
	d.line("ok", "server", "POST /webhooks/%s is served: point the %s webhook (issues, comments, pull or merge requests, "+
		"with the secret) at it through your TLS proxy", a.cfg.TaskSource, a.cfg.TaskSource)
}

// doctorSandbox reports the isolation this host gives each layer of the
// sandbox, and fails when it is less than sandbox.require asks for.
func (a *App) doctorSandbox(d *doctor) {
	c := a.cfg
	if !c.TaskWorkspaces() {
		return
	}
	r := sandbox.Probe()
	for _, l := range r.Layers {
		level := "ok"
		if !l.OK {
			level = "warn"
		}
		d.line(level, "sandbox", "%s: %s", l.Name, l.Detail)
	}
	want, err := sandbox.ParseLevel(c.Sandbox.Require)
	if err != nil {
		d.line("FAIL", "sandbox", "%v", err)
		return
	}
	if r.Best < want {
		d.line("FAIL", "sandbox", "this host gives %s isolation, less than sandbox.require: %s asks: the model's commands would not run (see the layers above for what is missing, or lower sandbox.require)", r.Best, want)
		return
	}
	d.line("ok", "sandbox", "the model's commands run with %s isolation (sandbox.require: %s), network %s", r.Best, want, c.Sandbox.Network)
}
