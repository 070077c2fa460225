package config_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/config"
)

// defaultPlanning spells out the documented defaults of the planning section,
// so a change to Default() shows up here.
var defaultPlanning = config.Planning{
	Enabled:            true,
	Strategy:           "chain_of_thought",
	MaxSubtasks:        100,
	DecompositionLevel: "moderate",
	PrePlanning:        config.PrePlanning{Enabled: true, MaxToolCalls: 10},
	Execution:          config.PlanExecution{MaxLLMCallsPerAction: 20, MaxAttemptsPerAction: 2},
	Reflection:         config.Reflection{Enabled: true, TriggerOnError: true, TriggerInterval: 3},
	Revision:           config.Revision{MaxRevisions: 3},
	Verification:       config.Verification{Enabled: true, MaxRounds: 2},
	Replan:             config.Replan{MaxReplans: 1},
	History:            config.PlanHistory{StorageType: "jsonl", Directory: "planning_history"},
	LLMCallComments:    config.LLMCallComments{Enabled: true},
}

func TestPlanningAndLanguageDefaults(t *testing.T) {
	if diff := cmp.Diff(defaultPlanning, config.Default().Planning); diff != "" {
		t.Errorf("Default().Planning (-want +got):\n%s", diff)
	}
	if got := config.Default().Language; got != config.LanguageEnglish {
		t.Errorf("Default().Language = %q, want %q", got, config.LanguageEnglish)
	}
	if got := config.Default().Comments.Mode; got != config.CommentsLiving {
		t.Errorf("Default().Comments.Mode = %q, want %q", got, config.CommentsLiving)
	}
	for _, tail := range []string{
		"",
		"planning:\n",
		"planning: ~\n",
		"planning: {}\n",
		"planning:\n  reflection:\n  history: {}\nlanguage:\n",
	} {
		c, warnings := mustParse(t, head+gh+tail, nil)
		if diff := cmp.Diff(defaultPlanning, c.Planning); diff != "" {
			t.Errorf("%q: Planning (-want +got):\n%s", tail, diff)
		}
		if c.Language != "en" || c.Comments.Mode != "living" {
			t.Errorf("%q: Language = %q, comments.mode = %q, want en and living", tail, c.Language, c.Comments.Mode)
		}
		if len(warnings) != 0 {
			t.Errorf("%q: warnings = %v, want none", tail, warnings)
		}
	}
}

func TestPlanningFullSection(t *testing.T) {
	c, warnings := mustParse(t, head+gh+`language: en
planning:
  enabled: false
  strategy: chain_of_thought
  max_subtasks: 12
  decomposition_level: detailed
  pre_planning:
    enabled: false
    max_tool_calls: 0
  execution:
    max_llm_calls_per_action: 7
    max_attempts_per_action: 4
  reflection:
    enabled: false
    trigger_on_error: false
    trigger_interval: 0
  revision:
    max_revisions: 0
  verification:
    enabled: false
    max_rounds: 5
  replan:
    max_replans: 0
  history:
    storage_type: jsonl
    directory: /var/lib/agent/plans
  llm_call_comments:
    enabled: false
`, nil)
	if len(warnings) != 0 {
		t.Errorf("warnings = %v, want none", warnings)
	}
	want := config.Planning{
		Enabled:            false,
		Strategy:           "chain_of_thought",
		MaxSubtasks:        12,
		DecompositionLevel: "detailed",
		PrePlanning:        config.PrePlanning{Enabled: false, MaxToolCalls: 0},
		Execution:          config.PlanExecution{MaxLLMCallsPerAction: 7, MaxAttemptsPerAction: 4},
		Reflection:         config.Reflection{Enabled: false, TriggerOnError: false, TriggerInterval: 0},
		Revision:           config.Revision{MaxRevisions: 0},
		Verification:       config.Verification{Enabled: false, MaxRounds: 5},
		Replan:             config.Replan{MaxReplans: 0},
		History:            config.PlanHistory{StorageType: "jsonl", Directory: "/var/lib/agent/plans"},
		LLMCallComments:    config.LLMCallComments{Enabled: false},
	}
	if diff := cmp.Diff(want, c.Planning); diff != "" {
		t.Errorf("Planning (-want +got):\n%s", diff)
	}
	if c.Language != config.LanguageEnglish {
		t.Errorf("Language = %q, want %q", c.Language, config.LanguageEnglish)
	}
}

// A partial section keeps the defaults of every key it does not name.
func TestPlanningPartialSectionKeepsOtherDefaults(t *testing.T) {
	c, _ := mustParse(t, head+gh+"planning:\n  decomposition_level: minimal\n  reflection:\n    trigger_interval: 5\n", nil)
	want := defaultPlanning
	want.DecompositionLevel = "minimal"
	want.Reflection.TriggerInterval = 5
	if diff := cmp.Diff(want, c.Planning); diff != "" {
		t.Errorf("Planning (-want +got):\n%s", diff)
	}
}

func TestLanguage(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"language: ja\n", "ja"},
		{"language: en\n", "en"},
		{"language: ${AGENT_LANG}\n", "en"},
		{"language: ${UNSET_LANG:-en}\n", "en"},
	} {
		c, _ := mustParse(t, head+gh+tc.line, map[string]string{"AGENT_LANG": "en"})
		if c.Language != tc.want {
			t.Errorf("%q: Language = %q, want %q", tc.line, c.Language, tc.want)
		}
	}
}

// comments.mode takes living (the default) or separate, and nothing else.
func TestCommentsMode(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"", "living"},
		{"comments:\n  mode: separate\n", "separate"},
		{"comments:\n  mode: living\n", "living"},
	} {
		c, _ := mustParse(t, head+gh+tc.line, nil)
		if c.Comments.Mode != tc.want {
			t.Errorf("%q: comments.mode = %q, want %q", tc.line, c.Comments.Mode, tc.want)
		}
	}
	checkProblems(t, head+gh, nil, []problemCase{
		{"comments:\n  mode: chatty\n", config.Problems{
			{Path: "comments.mode", Msg: "must be one of: living, separate", Line: 7},
		}},
		{"comments:\n  mod: separate\n", config.Problems{
			{Path: "comments.mod", Msg: `unknown key (did you mean "mode"?)`, Line: 7},
		}},
	})
}

func TestPlanningProblems(t *testing.T) {
	checkProblems(t, head+gh, nil, []problemCase{
		{"language: fr\n", config.Problems{
			{Path: "language", Msg: "must be one of: ja, en", Line: 6},
		}},
		{"language: \"\"\n", config.Problems{
			{Path: "language", Msg: "required (one of: ja, en)", Line: 6},
		}},
		{"planning:\n  strategy: tree_of_thought\n", config.Problems{
			{Path: "planning.strategy", Msg: "must be one of: chain_of_thought", Line: 7},
		}},
		{"planning:\n  decomposition_level: extreme\n", config.Problems{
			{Path: "planning.decomposition_level", Msg: "must be one of: minimal, moderate, detailed", Line: 7},
		}},
		{"planning:\n  max_subtasks: 0\n", config.Problems{
			{Path: "planning.max_subtasks", Msg: "must be from 1 to 1000", Line: 7},
		}},
		{"planning:\n  pre_planning: {max_tool_calls: -1}\n", config.Problems{
			{Path: "planning.pre_planning.max_tool_calls", Msg: "must be from 0 to 1000", Line: 7},
		}},
		{"planning:\n  execution:\n    max_llm_calls_per_action: 0\n    max_attempts_per_action: 0\n", config.Problems{
			{Path: "planning.execution.max_attempts_per_action", Msg: "must be from 1 to 100", Line: 9},
			{Path: "planning.execution.max_llm_calls_per_action", Msg: "must be from 1 to 1000", Line: 8},
		}},
		{"planning:\n  reflection:\n    trigger_interval: -3\n", config.Problems{
			{Path: "planning.reflection.trigger_interval", Msg: "must be from 0 to 1000", Line: 8},
		}},
		{"planning:\n  revision:\n    max_revisions: -1\n", config.Problems{
			{Path: "planning.revision.max_revisions", Msg: "must be from 0 to 100", Line: 8},
		}},
		{"planning:\n  verification:\n    max_rounds: 0\n", config.Problems{
			{Path: "planning.verification.max_rounds", Msg: "must be from 1 to 100", Line: 8},
		}},
		{"planning:\n  replan:\n    max_replans: -1\n", config.Problems{
			{Path: "planning.replan.max_replans", Msg: "must be from 0 to 100", Line: 8},
		}},
		{"planning:\n  history:\n    storage_type: sqlite\n", config.Problems{
			{Path: "planning.history.storage_type", Msg: "must be one of: jsonl", Line: 8},
		}},
		{"planning:\n  history:\n    directory: \"\"\n", config.Problems{
			{Path: "planning.history.directory", Msg: "required when planning.enabled is true", Line: 8},
		}},
		// Values are checked even with planning off, so a mistake shows before it is switched on.
		{"planning:\n  enabled: false\n  max_subtasks: -2\n  history: {storage_type: csv}\n", config.Problems{
			{Path: "planning.history.storage_type", Msg: "must be one of: jsonl", Line: 9},
			{Path: "planning.max_subtasks", Msg: "must be from 1 to 1000", Line: 8},
		}},
		// Type errors are reported where the value was read, and once.
		{"planning: true\n", config.Problems{
			{Path: "planning", Msg: "expected a mapping, got a boolean", Line: 6},
		}},
		{"planning:\n  enabled: yes\n  max_subtasks: \"5\"\n  reflection: [on]\n", config.Problems{
			{Path: "planning.enabled", Msg: "expected true or false, got a string", Line: 7},
			{Path: "planning.max_subtasks", Msg: "expected an integer, got a string", Line: 8},
			{Path: "planning.reflection", Msg: "expected a mapping, got a list", Line: 9},
		}},
		{"language: [ja]\n", config.Problems{
			{Path: "language", Msg: "expected a single value, got a list", Line: 6},
		}},
		{"planning:\n  history:\n    directory: ${PLAN_DIR}\n", config.Problems{
			{Path: "planning.history.directory", Msg: "environment variable PLAN_DIR is not set", Line: 8},
		}},
	})
}

// With planning off, its history directory is not needed.
func TestPlanningDisabledNeedsNoHistoryDirectory(t *testing.T) {
	c, _ := mustParse(t, head+gh+"planning:\n  enabled: false\n  history: {directory: \"\"}\n", nil)
	if c.Planning.Enabled || c.Planning.History.Directory != "" {
		t.Errorf("Planning = %+v, want disabled with an empty directory", c.Planning)
	}
}

func TestPlanningUnknownKeys(t *testing.T) {
	checkProblems(t, head+gh, nil, []problemCase{
		{"langauge: en\n", config.Problems{{Path: "langauge", Msg: `unknown key (did you mean "language"?)`, Line: 6}}},
		{"planing: {}\n", config.Problems{{Path: "planing", Msg: `unknown key (did you mean "planning"?)`, Line: 6}}},
		{"planning:\n  enabeld: true\n", config.Problems{{Path: "planning.enabeld", Msg: `unknown key (did you mean "enabled"?)`, Line: 7}}},
		{"planning:\n  max_subtask: 3\n", config.Problems{{Path: "planning.max_subtask", Msg: `unknown key (did you mean "max_subtasks"?)`, Line: 7}}},
		{"planning:\n  reflection:\n    trigger_intervall: 2\n",
			config.Problems{{Path: "planning.reflection.trigger_intervall", Msg: `unknown key (did you mean "trigger_interval"?)`, Line: 8}}},
		{"planning:\n  history:\n    directroy: h\n",
			config.Problems{{Path: "planning.history.directroy", Msg: `unknown key (did you mean "directory"?)`, Line: 8}}},
		{"planning:\n  execution:\n    max_attempts_per_actions: 2\n",
			config.Problems{{Path: "planning.execution.max_attempts_per_actions", Msg: `unknown key (did you mean "max_attempts_per_action"?)`, Line: 8}}},
		{"planning:\n  llm_call_comment: {enabled: false}\n",
			config.Problems{{Path: "planning.llm_call_comment", Msg: `unknown key (did you mean "llm_call_comments"?)`, Line: 7}}},
		{"planning:\n  wibble: 1\n", config.Problems{{Path: "planning.wibble", Msg: "unknown key", Line: 7}}},
	})
}

// planning and language are built now: they no longer warn, while a feature
// still missing does.
func TestPlanningNoLongerUnsupported(t *testing.T) {
	_, warnings := mustParse(t, head+gh+`planning:
  enabled: true
language: ja
metrics:
  enabled: true
`, nil)
	want := []config.Warning{{Path: "metrics", Msg: "done differently by this version: set server.listen, and serve answers GET /metrics there; ignored", Line: 9}}
	if diff := cmp.Diff(want, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

func TestPlanningEnvExpansion(t *testing.T) {
	const src = `planning:
  enabled: ${PLANNING:-true}
  max_subtasks: ${SUBTASKS:-100}
  decomposition_level: ${LEVEL:-moderate}
  reflection: {trigger_interval: "${INTERVAL:-3}", trigger_on_error: "${ON_ERROR:-true}"}
  history:
    directory: ${PLAN_HOME}/history
  llm_call_comments:
    enabled: ${COMMENTS}
`
	for _, tc := range []struct {
		name string
		vars map[string]string
		want config.Planning
	}{
		{"defaults", map[string]string{"PLAN_HOME": "/srv", "COMMENTS": "true"}, func() config.Planning {
			p := defaultPlanning
			p.History.Directory = "/srv/history"
			return p
		}()},
		{"set", map[string]string{"PLANNING": "false", "SUBTASKS": "8", "LEVEL": "minimal", "INTERVAL": "0",
			"ON_ERROR": "FALSE", "PLAN_HOME": "rel", "COMMENTS": "false"}, func() config.Planning {
			p := defaultPlanning
			p.Enabled = false
			p.MaxSubtasks = 8
			p.DecompositionLevel = "minimal"
			p.Reflection.TriggerInterval = 0
			p.Reflection.TriggerOnError = false
			p.History.Directory = "rel/history"
			p.LLMCallComments.Enabled = false
			return p
		}()},
	} {
		c, _ := mustParse(t, head+gh+src, tc.vars)
		if diff := cmp.Diff(tc.want, c.Planning); diff != "" {
			t.Errorf("%s: Planning (-want +got):\n%s", tc.name, diff)
		}
	}

	got := problems(t, head+gh+src, map[string]string{"PLANNING": "maybe", "SUBTASKS": "0", "PLAN_HOME": "/srv"})
	want := config.Problems{
		{Path: "planning.enabled", Msg: "expected true or false, got a string", Line: 7},
		{Path: "planning.llm_call_comments.enabled", Msg: "environment variable COMMENTS is not set", Line: 14},
		{Path: "planning.max_subtasks", Msg: "must be from 1 to 1000", Line: 8},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestValidatePlanningOnDefault(t *testing.T) {
	c := config.Default()
	c.TaskSource = "github"
	c.GitHub.Token = "t"
	c.GitHub.Owner = "acme"
	c.LLM.Provider = "ollama"
	c.LLM.Ollama.Model = "m"
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	c.Language = "de"
	c.Planning.Execution.MaxAttemptsPerAction = 0
	c.Planning.History.Directory = " "
	got := validateProblems(t, c)
	want := config.Problems{
		{Path: "language", Msg: "must be one of: ja, en"},
		{Path: "planning.execution.max_attempts_per_action", Msg: "must be from 1 to 100"},
		{Path: "planning.history.directory", Msg: "required when planning.enabled is true"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
