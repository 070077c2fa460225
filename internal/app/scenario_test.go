package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/goccy/go-yaml"
	"golang.org/x/tools/txtar"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// scenarioDir holds the scenarios: *.txtar files and their README.md.
const scenarioDir = "testdata/scenarios"

// TestScenarios runs every testdata/scenarios/*.txtar file as a subtest: one
// task, end to end (forge emulator, scripted model server, the real
// filesystem MCP server), written as data. testdata/scenarios/README.md
// describes the format; in brief:
//
//	What the scenario proves, one paragraph (the txtar comment; required).
//	-- setup --
//	forge: github       # github or gitlab
//	kind: issue         # issue, pull_request (github), merge_request (gitlab)
//	provider: openai    # openai, lmstudio or ollama
//	native: false       # tool calls natively, or as JSON commands in the text
//	planning: true      # planning mode, or the plain tool loop
//	faults: [{method: POST, path: /notes, status: 500, times: -1}]
//	-- config.yaml --   (optional: real config keys over the test config)
//	max_llm_process_num: 6
//	-- reply [planning] --
//	{"phase": "planning", ...}        (the model's text, verbatim)
//	-- call fs/write_file [execution a1] --
//	{"path": "$WORKSPACE/hello.txt", "content": "hi\n"}   (JSON arguments)
//	-- want --
//	labels: [bug, coding agent done]
//	record: {status: done}
//
// The replies and calls are the whole conversation, in order: a request
// beyond them, a request at another phase than the [bracket] says (planning
// mode), or a reply left unused fails the test. Unknown sections and keys
// fail it too.
func TestScenarios(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	paths, err := scenarioFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			t.Parallel()
			sc, err := parseScenario(path)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			sc.run(t)
		})
	}
}

// scenarioFiles lists the scenarios; any other file but the README is a
// mistake (a misspelt extension would otherwise never run).
func scenarioFiles() ([]string, error) {
	entries, err := os.ReadDir(scenarioDir)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, en := range entries {
		switch {
		case en.Name() == "README.md":
		case !en.IsDir() && strings.HasSuffix(en.Name(), ".txtar"):
			paths = append(paths, filepath.Join(scenarioDir, en.Name()))
		default:
			return nil, fmt.Errorf("%s: unexpected %s: only *.txtar scenarios and README.md belong there", scenarioDir, en.Name())
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: no scenarios", scenarioDir)
	}
	return paths, nil
}

// scenario is one parsed scenario file.
type scenario struct {
	setup  scenarioSetup
	config []byte // config.yaml; nil when absent
	steps  []scriptStep
	want   scenarioWant
}

type scenarioSetup struct {
	Forge    string          `yaml:"forge"`
	Kind     task.Kind       `yaml:"kind"`
	Provider string          `yaml:"provider"`
	Native   bool            `yaml:"native"`
	Planning bool            `yaml:"planning"`
	Faults   []scenarioFault `yaml:"faults"`
}

// scenarioFault is a forgetest.Fault.
type scenarioFault struct {
	Method     string `yaml:"method"`
	Path       string `yaml:"path"`
	Status     int    `yaml:"status"`
	Times      int    `yaml:"times"`
	AfterServe bool   `yaml:"after_serve"`
}

// scriptStep is one model reply: text (a reply section) or a tool call.
type scriptStep struct {
	section string // the section name, for messages
	at      string // the phase (and action) it answers; "" in the plain loop
	tool    string // "server/tool" for a call; "" for a reply
	body    string // the reply's text, or the call's JSON arguments
}

// Stages of a scenario file: its sections come in this order.
const (
	wantSetup = iota
	wantConfigOrSteps
	wantSteps
	afterWant
)

func parseScenario(path string) (*scenario, error) {
	a, err := txtar.ParseFile(path)
	if err != nil {
		return nil, err
	}
	return parseArchive(a)
}

func parseArchive(a *txtar.Archive) (*scenario, error) {
	if strings.TrimSpace(string(a.Comment)) == "" {
		return nil, errors.New("the comment before the first section must say what the scenario proves")
	}
	sc := &scenario{}
	stage := wantSetup
	for i, f := range a.Files {
		var err error
		if stage, err = sc.section(stage, f); err != nil {
			return nil, fmt.Errorf("section %d (-- %s --): %w", i+1, f.Name, err)
		}
	}
	if stage != afterWant {
		return nil, errors.New("no want section: a scenario ends with -- want --")
	}
	return sc, nil
}

// section reads one section in stage and returns the next stage.
func (sc *scenario) section(stage int, f txtar.File) (int, error) {
	switch {
	case stage == afterWant:
		return stage, errors.New("want must be the last section")
	case stage == wantSetup && f.Name != "setup":
		return stage, errors.New("the first section must be setup")
	case f.Name == "setup":
		if stage != wantSetup {
			return stage, errors.New("setup must come once, first")
		}
		return wantConfigOrSteps, sc.readSetup(f.Data)
	case f.Name == "config.yaml":
		if stage != wantConfigOrSteps {
			return stage, errors.New("config.yaml must come once, right after setup")
		}
		sc.config = f.Data
		// Its keys are checked here; it is applied over the env's config.
		return wantSteps, decodeStrict(f.Data, config.Default())
	case f.Name == "want":
		if err := decodeStrict(f.Data, &sc.want); err != nil {
			return stage, err
		}
		return afterWant, sc.want.validate(sc.setup.Planning)
	}
	st, err := parseStep(f, sc.setup.Planning)
	if err != nil {
		return stage, err
	}
	sc.steps = append(sc.steps, st)
	return wantSteps, nil
}

func decodeStrict(data []byte, v any) error {
	if err := yaml.UnmarshalWithOptions(data, v, yaml.Strict()); err != nil {
		return fmt.Errorf("\n%s", yaml.FormatError(err, false, true))
	}
	return nil
}

func (sc *scenario) readSetup(data []byte) error {
	s := &sc.setup
	if err := decodeStrict(data, s); err != nil {
		return err
	}
	kinds := map[string][]task.Kind{task.GitHub: {task.Issue, task.PullRequest}, task.GitLab: {task.Issue, task.MergeRequest}}
	k, ok := kinds[s.Forge]
	switch {
	case !ok:
		return fmt.Errorf("forge %q: want github or gitlab", s.Forge)
	case !slices.Contains(k, s.Kind):
		return fmt.Errorf("kind %q: want one of %v on %s", s.Kind, k, s.Forge)
	case !slices.Contains([]string{config.ProviderOpenAI, config.ProviderLMStudio, config.ProviderOllama}, s.Provider):
		return fmt.Errorf("provider %q: want openai, lmstudio or ollama", s.Provider)
	}
	for i, f := range s.Faults {
		if f.Status < 100 {
			return fmt.Errorf("fault %d: status %d: want an HTTP status", i+1, f.Status)
		}
	}
	return nil
}

var (
	stepName = regexp.MustCompile(`^(reply|call (\S+/\S+))(?: \[(.+)\])?$`)
	phases   = []string{"pre-planning", "planning", "reflection", "revision", "verification", "replan decision"}
)

// parseStep reads a reply or call section.
func parseStep(f txtar.File, planning bool) (scriptStep, error) {
	m := stepName.FindStringSubmatch(f.Name)
	if m == nil {
		return scriptStep{}, errors.New("unknown section: want setup, config.yaml, reply, call SERVER/TOOL or want")
	}
	st := scriptStep{section: f.Name, tool: m[2], at: m[3], body: strings.TrimSuffix(string(f.Data), "\n")}
	switch action, isExec := strings.CutPrefix(st.at, "execution "); {
	case !planning && st.at != "":
		return st, errors.New("a [phase] is for planning mode only")
	case !planning:
	case st.at == "":
		return st, errors.New("in planning mode every reply says where it is asked: [phase] or [execution ACTION]")
	case isExec && action != "" && !strings.Contains(action, " "):
	case !slices.Contains(phases, st.at):
		return st, fmt.Errorf("[%s]: want [execution ACTION] or one of %q", st.at, phases)
	}
	if st.tool != "" {
		if _, _, err := st.callArgs(); err != nil {
			return st, err
		}
	}
	return st, nil
}

// callArgs decodes a call's body: the tool's arguments, and "$comment", the
// text that goes with the call.
func (st scriptStep) callArgs() (args map[string]any, comment string, err error) {
	if err := json.Unmarshal([]byte(st.body), &args); err != nil || args == nil {
		return nil, "", fmt.Errorf("the body must be a JSON object of arguments: %v", err)
	}
	if c, ok := args["$comment"]; ok {
		if comment, ok = c.(string); !ok {
			return nil, "", errors.New(`"$comment" must be a string`)
		}
		delete(args, "$comment")
	}
	return args, comment, nil
}

// placeholders replaces $WORKSPACE and $FORBIDDEN in e's scenario texts.
func placeholders(e *env) *strings.Replacer {
	return strings.NewReplacer("$WORKSPACE", e.workspace, "$FORBIDDEN", forbidden)
}

// step renders st as the model's answer to r.
func (st scriptStep) step(e *env, r llmtest.Received) llmtest.Step {
	body := placeholders(e).Replace(st.body)
	if st.tool == "" {
		return llmtest.Reply{Content: body, Usage: llmtest.Usage{In: 100, Out: 20}}
	}
	args, comment, err := scriptStep{body: body}.callArgs()
	if err != nil { // $WORKSPACE holding a quote or backslash
		e.t.Errorf("request %d (-- %s --): %v", r.N, st.section, err)
		return llmtest.Fault{Status: 400, Body: "bad call"}
	}
	return e.call(r, comment, st.tool, args)
}

// label says where a request is asked, as a step's [bracket] does.
func label(w at) string {
	if w.Action != "" {
		return w.Phase + " " + w.Action
	}
	return w.Phase
}

// script answers the model's requests with the steps, in order; a request
// out of step is answered 400 (the task ends) and noted as a problem.
type script struct {
	sc       *scenario
	mu       sync.Mutex
	problems []string
}

func (s *script) respond(e *env, r llmtest.Received) llmtest.Step {
	where := label(where(r))
	var problem string
	switch {
	case r.N > len(s.sc.steps):
		problem = fmt.Sprintf("request %d [%s] is beyond the script's %d replies", r.N, where, len(s.sc.steps))
	case s.sc.setup.Planning && s.sc.steps[r.N-1].at != where:
		problem = fmt.Sprintf("request %d is asked at [%s], but the script's reply %d is -- %s --", r.N, where, r.N, s.sc.steps[r.N-1].section)
	default:
		return s.sc.steps[r.N-1].step(e, r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, problem)
	return llmtest.Fault{Status: 400, Body: "out of the scenario's script"}
}

func (sc *scenario) run(t *testing.T) {
	s := &script{sc: sc}
	set := setup{forge: sc.setup.Forge, kind: sc.setup.Kind, provider: sc.setup.Provider,
		native: sc.setup.Native, planning: sc.setup.Planning, respond: s.respond}
	var e *env
	if sc.setup.Planning {
		e = planned(t, set)
	} else {
		e = newEnv(t, set)
	}
	if sc.config != nil {
		if err := decodeStrict(sc.config, e.cfg); err != nil {
			t.Fatalf("config.yaml: %v", err)
		}
		if err := e.cfg.Validate(); err != nil {
			t.Fatalf("config.yaml makes the config invalid: %v", err)
		}
	}
	for _, f := range sc.setup.Faults {
		fault := forgetest.Fault{Method: f.Method, Path: f.Path, Status: f.Status, Times: f.Times, AfterServe: f.AfterServe}
		e.emu().Inject(fault)
	}
	err := e.run(context.Background())
	s.mu.Lock()
	problems := slices.Clone(s.problems)
	s.mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("the conversation left the script:\n%s", strings.Join(problems, "\n"))
	}
	if n := len(e.model.Requests()); n < len(sc.steps) {
		t.Errorf("the model was asked %d times; the script has %d replies (the first unused: -- %s --)", n, len(sc.steps), sc.steps[n].section)
	}
	sc.want.check(t, e, err)
}
