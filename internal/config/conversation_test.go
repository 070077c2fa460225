package config_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/task"
)

// The documented defaults of the comment_detection and conversation sections
// and of the labels they use, spelt out so a change to Default() shows up here.
var (
	defaultCommentDetection = config.CommentDetection{Enabled: true, CheckInterval: 1}
	defaultConversation     = config.Conversation{
		Enabled:            true,
		AllowCollaborators: true,
		CompletionKeywords: []string{"ありがとう", "ありがとうございます", "ありがとうございました",
			"完了", "OK", "了解", "承知", "thank you", "thanks", "done", "complete"},
		TimeoutHours: 24,
		MaxRounds:    10,
		PollSeconds:  30,
	}
	defaultLabels = task.Labels{
		Bot: "coding agent", Processing: "coding agent processing",
		Done: "coding agent done", Failed: "coding agent failed",
		Paused: "coding agent paused", Stopped: "coding agent stopped",
		Awaiting: "coding agent awaiting response",
	}
)

func TestCommentDetectionAndConversationDefaults(t *testing.T) {
	d := config.Default()
	if diff := cmp.Diff(defaultCommentDetection, d.CommentDetection); diff != "" {
		t.Errorf("Default().CommentDetection (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(defaultConversation, d.Conversation); diff != "" {
		t.Errorf("Default().Conversation (-want +got):\n%s", diff)
	}
	for _, source := range []string{"github", "gitlab"} {
		d.TaskSource = source
		if got := d.Labels(); got != defaultLabels {
			t.Errorf("%s: Default().Labels() = %+v, want %+v", source, got, defaultLabels)
		}
	}
	for _, tail := range []string{
		"",
		"comment_detection:\nconversation:\n",
		"comment_detection: ~\nconversation: ~\n",
		"comment_detection: {}\nconversation: {}\n",
		"comment_detection:\n  allowed_users:\nconversation:\n  completion_keywords: ~\n  timeout_hours:\n",
		"  paused_label:\n  stopped_label: ~\n  awaiting_response_label:\n",
	} {
		c, warnings := mustParse(t, head+gh+tail, nil)
		if diff := cmp.Diff(defaultCommentDetection, c.CommentDetection); diff != "" {
			t.Errorf("%q: CommentDetection (-want +got):\n%s", tail, diff)
		}
		if diff := cmp.Diff(defaultConversation, c.Conversation); diff != "" {
			t.Errorf("%q: Conversation (-want +got):\n%s", tail, diff)
		}
		if got := c.Labels(); got != defaultLabels {
			t.Errorf("%q: Labels() = %+v, want %+v", tail, got, defaultLabels)
		}
		if len(warnings) != 0 {
			t.Errorf("%q: warnings = %v, want none", tail, warnings)
		}
	}
}

// DefaultCompletionKeywords and every Default() hand out their own copy, so
// one caller's change reaches no other.
func TestDefaultCompletionKeywordsIsACopy(t *testing.T) {
	k := config.DefaultCompletionKeywords()
	if diff := cmp.Diff(defaultConversation.CompletionKeywords, k); diff != "" {
		t.Fatalf("DefaultCompletionKeywords (-want +got):\n%s", diff)
	}
	k[0] = "changed"
	a := config.Default()
	a.Conversation.CompletionKeywords[1] = "changed too"
	if got := config.DefaultCompletionKeywords(); got[0] != "ありがとう" || got[1] != "ありがとうございます" {
		t.Errorf("DefaultCompletionKeywords() = %q after callers changed their copies", got)
	}
	if got := config.Default().Conversation.CompletionKeywords; got[1] != "ありがとうございます" {
		t.Errorf("Default() keywords = %q after another Default() was changed", got)
	}
}

func TestCommentDetectionAndConversationFullSections(t *testing.T) {
	c, warnings := mustParse(t, head+gh+`  paused_label: agent paused
  stopped_label: agent stopped
  awaiting_response_label: agent waiting
comment_detection:
  enabled: false
  check_interval: 3
  allowed_users: [alice, bob-the-reviewer]
conversation:
  enabled: false
  allow_collaborators: false
  completion_keywords:
    - LGTM
    - おわり
  timeout_hours: 0.5
  max_rounds: 2
  poll_seconds: 5
gitlab:
  paused_label: gl paused
  stopped_label: gl stopped
  awaiting_response_label: gl waiting
`, nil)
	if len(warnings) != 0 {
		t.Errorf("warnings = %v, want none", warnings)
	}
	wantCD := config.CommentDetection{Enabled: false, CheckInterval: 3, AllowedUsers: []string{"alice", "bob-the-reviewer"}}
	if diff := cmp.Diff(wantCD, c.CommentDetection); diff != "" {
		t.Errorf("CommentDetection (-want +got):\n%s", diff)
	}
	wantConv := config.Conversation{Enabled: false, AllowCollaborators: false,
		CompletionKeywords: []string{"LGTM", "おわり"}, TimeoutHours: 0.5, MaxRounds: 2, PollSeconds: 5}
	if diff := cmp.Diff(wantConv, c.Conversation); diff != "" {
		t.Errorf("Conversation (-want +got):\n%s", diff)
	}
	if got := c.Conversation.Timeout(); got != 30*time.Minute {
		t.Errorf("Timeout() = %v, want 30m", got)
	}
	if got := c.Conversation.PollInterval(); got != 5*time.Second {
		t.Errorf("PollInterval() = %v, want 5s", got)
	}
	wantGitHub := defaultLabels
	wantGitHub.Paused, wantGitHub.Stopped, wantGitHub.Awaiting = "agent paused", "agent stopped", "agent waiting"
	if got := c.Labels(); got != wantGitHub {
		t.Errorf("Labels() = %+v, want %+v", got, wantGitHub)
	}
	c.TaskSource = "gitlab"
	wantGitLab := defaultLabels
	wantGitLab.Paused, wantGitLab.Stopped, wantGitLab.Awaiting = "gl paused", "gl stopped", "gl waiting"
	if got := c.Labels(); got != wantGitLab {
		t.Errorf("gitlab Labels() = %+v, want %+v", got, wantGitLab)
	}
}

// A partial section keeps the defaults of every key it does not name; a list
// replaces its default as a whole, and [] leaves it empty.
func TestConversationPartialSection(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want func(*config.Conversation)
	}{
		{"conversation:\n  max_rounds: 3\n", func(c *config.Conversation) { c.MaxRounds = 3 }},
		{"conversation:\n  completion_keywords: [done]\n", func(c *config.Conversation) { c.CompletionKeywords = []string{"done"} }},
		{"conversation:\n  completion_keywords: []\n", func(c *config.Conversation) { c.CompletionKeywords = []string{} }},
		{"conversation:\n  timeout_hours: 48\n", func(c *config.Conversation) { c.TimeoutHours = 48 }},
	} {
		c, _ := mustParse(t, head+gh+tc.yaml, nil)
		want := config.Default().Conversation
		tc.want(&want)
		if diff := cmp.Diff(want, c.Conversation); diff != "" {
			t.Errorf("%q: Conversation (-want +got):\n%s", tc.yaml, diff)
		}
		if diff := cmp.Diff(defaultCommentDetection, c.CommentDetection); diff != "" {
			t.Errorf("%q: CommentDetection (-want +got):\n%s", tc.yaml, diff)
		}
	}
}

func TestCommentDetectionAndConversationProblems(t *testing.T) {
	checkProblems(t, head+gh, nil, []problemCase{
		{"comment_detection:\n  check_interval: 0\n", config.Problems{
			{Path: "comment_detection.check_interval", Msg: "must be from 1 to 1000", Line: 7},
		}},
		{"comment_detection:\n  allowed_users: [\"@alice\", \"\", \" \", bob smith, carol]\n", config.Problems{
			{Path: "comment_detection.allowed_users[0]", Msg: `must be a user name without the leading "@"`, Line: 7},
			{Path: "comment_detection.allowed_users[1]", Msg: "must name a user", Line: 7},
			{Path: "comment_detection.allowed_users[2]", Msg: "must name a user", Line: 7},
			{Path: "comment_detection.allowed_users[3]", Msg: "must be a single user name, without spaces", Line: 7},
		}},
		{"conversation:\n  timeout_hours: 0\n", config.Problems{
			{Path: "conversation.timeout_hours", Msg: "must be a number of hours more than 0 and at most 8760 (a year)", Line: 7},
		}},
		{"conversation:\n  timeout_hours: -1.5\n", config.Problems{
			{Path: "conversation.timeout_hours", Msg: "must be a number of hours more than 0 and at most 8760 (a year)", Line: 7},
		}},
		{"conversation:\n  timeout_hours: .nan\n", config.Problems{
			{Path: "conversation.timeout_hours", Msg: "must be a number of hours more than 0 and at most 8760 (a year)", Line: 7},
		}},
		{"conversation:\n  timeout_hours: .inf\n", config.Problems{
			{Path: "conversation.timeout_hours", Msg: "must be a number of hours more than 0 and at most 8760 (a year)", Line: 7},
		}},
		{"conversation:\n  max_rounds: 0\n  poll_seconds: 4\n", config.Problems{
			{Path: "conversation.max_rounds", Msg: "must be from 1 to 1000", Line: 7},
			{Path: "conversation.poll_seconds", Msg: "must be from 5 to 86400 (a day)", Line: 8},
		}},
		{"conversation:\n  completion_keywords:\n    - done\n    - \"\"\n    - \"  \"\n", config.Problems{
			{Path: "conversation.completion_keywords[1]", Msg: "must not be empty", Line: 9},
			{Path: "conversation.completion_keywords[2]", Msg: "must not be empty", Line: 10},
		}},
		// Values are checked even with the feature off, so a mistake shows before it is switched on.
		{"comment_detection: {enabled: false, check_interval: -1}\nconversation: {enabled: false, max_rounds: 0}\n", config.Problems{
			{Path: "comment_detection.check_interval", Msg: "must be from 1 to 1000", Line: 6},
			{Path: "conversation.max_rounds", Msg: "must be from 1 to 1000", Line: 7},
		}},
		// Type errors are reported where the value was read, and once.
		{"comment_detection: true\n", config.Problems{
			{Path: "comment_detection", Msg: "expected a mapping, got a boolean", Line: 6},
		}},
		{"comment_detection:\n  allowed_users: alice\n  check_interval: 1.5\n", config.Problems{
			{Path: "comment_detection.allowed_users", Msg: "expected a list, got a string", Line: 7},
			{Path: "comment_detection.check_interval", Msg: "expected an integer, got a number", Line: 8},
		}},
		{"conversation:\n  enabled: yes\n  timeout_hours: soon\n  completion_keywords: [[done]]\n", config.Problems{
			{Path: "conversation.completion_keywords[0]", Msg: "expected a single value, got a list", Line: 9},
			{Path: "conversation.enabled", Msg: "expected true or false, got a string", Line: 7},
			{Path: "conversation.timeout_hours", Msg: "expected a number, got a string", Line: 8},
		}},
		{"  paused_label: [p]\n", config.Problems{
			{Path: "github.paused_label", Msg: "expected a single value, got a list", Line: 6},
		}},
		{"  stopped_label: \"\"\n  awaiting_response_label: \" \"\n", config.Problems{
			{Path: "github.awaiting_response_label", Msg: "required", Line: 7},
			{Path: "github.stopped_label", Msg: "required", Line: 6},
		}},
	})
}

// Every one of the seven labels of a forge must differ from the six others
// (ignoring case and surrounding spaces); a clash names both keys.
func TestLabelsPairwiseDistinct(t *testing.T) {
	checkProblems(t, head+gh, nil, []problemCase{
		{"  paused_label: coding agent\n", config.Problems{
			{Path: "github.paused_label", Msg: "must differ from github.bot_label", Line: 6},
		}},
		{"  stopped_label: Coding Agent Failed\n", config.Problems{
			{Path: "github.stopped_label", Msg: "must differ from github.failed_label", Line: 6},
		}},
		{"  awaiting_response_label: \"coding agent done \"\n", config.Problems{
			{Path: "github.awaiting_response_label", Msg: "must differ from github.done_label", Line: 6},
		}},
		{"  paused_label: halted\n  stopped_label: halted\n  awaiting_response_label: halted\n", config.Problems{
			{Path: "github.awaiting_response_label", Msg: "must differ from github.paused_label", Line: 8},
			{Path: "github.stopped_label", Msg: "must differ from github.paused_label", Line: 7},
		}},
		{"  processing_label: coding agent awaiting response\n", config.Problems{
			{Path: "github.awaiting_response_label", Msg: "must differ from github.processing_label"},
		}},
	})

	const gitlab = "task_source: gitlab\nllm: {provider: ollama, ollama: {model: m}}\ngitlab:\n  token: t\n  group: g\n"
	got := problems(t, gitlab+"  stopped_label: coding agent paused\n  awaiting_response_label: coding agent processing\n", nil)
	want := config.Problems{
		{Path: "gitlab.awaiting_response_label", Msg: "must differ from gitlab.processing_label", Line: 7},
		{Path: "gitlab.stopped_label", Msg: "must differ from gitlab.paused_label", Line: 6},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gitlab (-want +got):\n%s", diff)
	}

	// The labels of the forge not in use are not checked.
	c, _ := mustParse(t, head+gh+"gitlab: {paused_label: coding agent, stopped_label: coding agent}\n", nil)
	if c.GitLab.PausedLabel != "coding agent" {
		t.Errorf("GitLab.PausedLabel = %q", c.GitLab.PausedLabel)
	}
}

func TestCommentDetectionAndConversationUnknownKeys(t *testing.T) {
	checkProblems(t, head+gh, nil, []problemCase{
		{"coment_detection: {}\n", config.Problems{{Path: "coment_detection", Msg: `unknown key (did you mean "comment_detection"?)`, Line: 6}}},
		{"converstion: {}\n", config.Problems{{Path: "converstion", Msg: `unknown key (did you mean "conversation"?)`, Line: 6}}},
		{"comment_detection:\n  check_intervall: 2\n",
			config.Problems{{Path: "comment_detection.check_intervall", Msg: `unknown key (did you mean "check_interval"?)`, Line: 7}}},
		{"comment_detection:\n  allowed_user: [a]\n",
			config.Problems{{Path: "comment_detection.allowed_user", Msg: `unknown key (did you mean "allowed_users"?)`, Line: 7}}},
		{"comment_detection:\n  bot_usrname: x\n",
			config.Problems{{Path: "comment_detection.bot_usrname", Msg: `unknown key (did you mean "bot_username"?)`, Line: 7}}},
		{"conversation:\n  timeout_hour: 2\n",
			config.Problems{{Path: "conversation.timeout_hour", Msg: `unknown key (did you mean "timeout_hours"?)`, Line: 7}}},
		{"conversation:\n  completion_keyword: [ok]\n",
			config.Problems{{Path: "conversation.completion_keyword", Msg: `unknown key (did you mean "completion_keywords"?)`, Line: 7}}},
		{"conversation:\n  max_round: 2\n",
			config.Problems{{Path: "conversation.max_round", Msg: `unknown key (did you mean "max_rounds"?)`, Line: 7}}},
		{"conversation:\n  allow_colaborators: true\n",
			config.Problems{{Path: "conversation.allow_colaborators", Msg: `unknown key (did you mean "allow_collaborators"?)`, Line: 7}}},
		{"conversation:\n  poll_second: 9\n",
			config.Problems{{Path: "conversation.poll_second", Msg: `unknown key (did you mean "poll_seconds"?)`, Line: 7}}},
		{"  awaiting_respons_label: x\n",
			config.Problems{{Path: "github.awaiting_respons_label", Msg: `unknown key (did you mean "awaiting_response_label"?)`, Line: 6}}},
		{"conversation:\n  wibble: 1\n", config.Problems{{Path: "conversation.wibble", Msg: "unknown key", Line: 7}}},
		// The ignored spec keys are accepted only where they belong.
		{"conversation:\n  bot_username: x\n", config.Problems{{Path: "conversation.bot_username", Msg: "unknown key", Line: 7}}},
	})
}

// comment_detection, conversation and their labels are built now: they no
// longer warn, while a feature still missing does.
func TestCommentDetectionAndConversationNoLongerUnsupported(t *testing.T) {
	c, warnings := mustParse(t, head+gh+`  paused_label: p
  stopped_label: s
  awaiting_response_label: a
comment_detection:
  enabled: true
conversation: {enabled: true}
metrics: {enabled: true}
gitlab:
  paused_label: gp
  stopped_label: gs
  awaiting_response_label: ga
`, nil)
	want := []config.Warning{{Path: "metrics", Msg: "done differently by this version: set server.listen, and serve answers GET /metrics there; ignored", Line: 12}}
	if diff := cmp.Diff(want, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if c.GitHub.PausedLabel != "p" || c.GitLab.AwaitingResponseLabel != "ga" {
		t.Errorf("labels not read: github %+v, gitlab %+v", c.GitHub, c.GitLab)
	}
}

func TestCommentDetectionAndConversationEnvExpansion(t *testing.T) {
	const src = `  awaiting_response_label: ${AWAIT_LABEL:-coding agent awaiting response}
comment_detection:
  check_interval: ${CHECK_EVERY:-1}
  allowed_users: ["${REVIEWER}"]
conversation:
  enabled: ${CONVERSATION:-true}
  timeout_hours: ${CONV_HOURS:-24}
  completion_keywords: ["${DONE_WORD:-done}", "$${literal}"]
`
	c, _ := mustParse(t, head+gh+src, map[string]string{
		"AWAIT_LABEL": "waiting on you", "CHECK_EVERY": "4", "REVIEWER": "alice",
		"CONVERSATION": "false", "CONV_HOURS": "1.5",
	})
	if got := c.Labels().Awaiting; got != "waiting on you" {
		t.Errorf("Labels().Awaiting = %q", got)
	}
	wantCD := config.CommentDetection{Enabled: true, CheckInterval: 4, AllowedUsers: []string{"alice"}}
	if diff := cmp.Diff(wantCD, c.CommentDetection); diff != "" {
		t.Errorf("CommentDetection (-want +got):\n%s", diff)
	}
	wantConv := defaultConversation
	wantConv.Enabled = false
	wantConv.TimeoutHours = 1.5
	wantConv.CompletionKeywords = []string{"done", "${literal}"}
	if diff := cmp.Diff(wantConv, c.Conversation); diff != "" {
		t.Errorf("Conversation (-want +got):\n%s", diff)
	}
	if got := c.Conversation.Timeout(); got != 90*time.Minute {
		t.Errorf("Timeout() = %v, want 1h30m", got)
	}

	got := problems(t, head+gh+src, map[string]string{"CHECK_EVERY": "0", "CONV_HOURS": "a day", "AWAIT_LABEL": "Coding Agent Done"})
	want := config.Problems{
		{Path: "comment_detection.allowed_users[0]", Msg: "environment variable REVIEWER is not set", Line: 9},
		{Path: "comment_detection.check_interval", Msg: "must be from 1 to 1000", Line: 8},
		{Path: "conversation.timeout_hours", Msg: "expected a number, got a string", Line: 12},
		{Path: "github.awaiting_response_label", Msg: "must differ from github.done_label", Line: 6},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestValidateCommentDetectionAndConversationOnDefault(t *testing.T) {
	c := config.Default()
	c.TaskSource = "gitlab"
	c.GitLab.Token = "t"
	c.GitLab.Group = "g"
	c.LLM.Provider = "ollama"
	c.LLM.Ollama.Model = "m"
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	c.CommentDetection.CheckInterval = 0
	c.CommentDetection.AllowedUsers = []string{"@bob"}
	c.Conversation.CompletionKeywords = append(c.Conversation.CompletionKeywords, "")
	c.Conversation.TimeoutHours = 0
	c.Conversation.MaxRounds = 0
	c.Conversation.PollSeconds = 1
	c.GitLab.PausedLabel = c.GitLab.StoppedLabel
	got := validateProblems(t, c)
	want := config.Problems{
		{Path: "comment_detection.allowed_users[0]", Msg: `must be a user name without the leading "@"`},
		{Path: "comment_detection.check_interval", Msg: "must be from 1 to 1000"},
		{Path: "conversation.completion_keywords[11]", Msg: "must not be empty"},
		{Path: "conversation.max_rounds", Msg: "must be from 1 to 1000"},
		{Path: "conversation.poll_seconds", Msg: "must be from 5 to 86400 (a day)"},
		{Path: "conversation.timeout_hours", Msg: "must be a number of hours more than 0 and at most 8760 (a year)"},
		{Path: "gitlab.stopped_label", Msg: "must differ from gitlab.paused_label"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// The trust section: both settings on by default, each can be turned off,
// a misspelt key or a wrong type is a problem at its path.
func TestTrustSection(t *testing.T) {
	c, warnings := mustParse(t, head+gh, nil)
	if want := (config.Trust{LabelerNeedsWriteAccess: true, HearAuthorWithoutAccess: true}); c.Trust != want || len(warnings) != 0 {
		t.Errorf("default trust %+v (warnings %v), want %+v", c.Trust, warnings, want)
	}
	c, _ = mustParse(t, head+gh+"trust:\n  labeler_needs_write_access: false\n  hear_author_without_access: false\n", nil)
	if c.Trust != (config.Trust{}) {
		t.Errorf("trust %+v, want both off", c.Trust)
	}
	checkProblems(t, head+gh, nil, []problemCase{
		{"trust:\n  hear_author_without_acess: false\n",
			config.Problems{{Path: "trust.hear_author_without_acess", Msg: `unknown key (did you mean "hear_author_without_access"?)`, Line: 7}}},
		{"trust:\n  labeler_needs_write_access: maybe\n",
			config.Problems{{Path: "trust.labeler_needs_write_access", Msg: "expected true or false, got a string", Line: 7}}},
	})
}

// The workspace and delivery sections: defaults, every key read, and each
// problem at its path.
func TestWorkspaceAndDeliverySections(t *testing.T) {
	c, _ := mustParse(t, head+gh+`workspace:
  root: /srv/ws
  keep: always
delivery:
  enabled: false
  draft: false
  branch_prefix: bots/agent-
  author: {name: Robo, email: robo@example.com}
`, nil)
	if w := c.Workspace; w.Root != "/srv/ws" || w.Keep != config.KeepAlways {
		t.Errorf("workspace %+v", c.Workspace)
	}
	want := config.Delivery{Enabled: false, Draft: false, BranchPrefix: "bots/agent-", MaxFileBytes: 5_000_000,
		Author: config.Identity{Name: "Robo", Email: "robo@example.com"}}
	if c.Delivery != want {
		t.Errorf("delivery %+v, want %+v", c.Delivery, want)
	}
	checkProblems(t, head+gh, nil, []problemCase{
		{"workspace:\n  keep: sometimes\n",
			config.Problems{{Path: "workspace.keep", Msg: "must be one of: never, failed, always", Line: 7}}},
		{"workspace:\n  root: \"\"\n", config.Problems{{Path: "workspace.root", Msg: "required: the folder the tasks' workspaces go in", Line: 7}}},
		{"delivery:\n  branch_prefix: -x\n", config.Problems{{Path: "delivery.branch_prefix",
			Msg: "must be usable in a git branch name: letters, digits and ._/- , not starting with - or /, without ..", Line: 7}}},
		{"delivery:\n  branch_prefix: a..b/\n", config.Problems{{Path: "delivery.branch_prefix",
			Msg: "must be usable in a git branch name: letters, digits and ._/- , not starting with - or /, without ..", Line: 7}}},
		{"delivery:\n  author: {email: nobody}\n", config.Problems{{Path: "delivery.author.email", Msg: "must be an e-mail address", Line: 7}}},
		{"delivery:\n  brnach_prefix: x/\n", config.Problems{{Path: "delivery.brnach_prefix", Msg: `unknown key (did you mean "branch_prefix"?)`, Line: 7}}},
	})
}
