package plan

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Settings are planning mode's limits and switches (config's planning
// section, translated by the composition root).
type Settings struct {
	MaxSubtasks        int    // most subtasks in a plan
	DecompositionLevel string // minimal, moderate or detailed: how finely to split
	PrePlanning        bool   // state the understanding (and gather information) before planning
	MaxGatherCalls     int    // read-only tool calls in pre-planning, and in each verification round
	MaxCallsPerAction  int    // model calls one action may take before it counts as failed
	MaxAttempts        int    // attempts at one action before a replan decision
	Reflection         bool   // reflect at all
	ReflectOnError     bool   // reflect after a failed action
	ReflectEvery       int    // reflect after this many completed actions; 0: never by count
	MaxRevisions       int    // plan revisions per task
	Verification       bool   // verify the work before finishing
	MaxVerifyRounds    int    // verification rounds, each may add actions
	MaxReplans         int    // fresh plans after repeated failure
	CallComments       bool   // a comment section after every model call
}

// DefaultSettings are the documented defaults of config's planning section.
func DefaultSettings() Settings {
	return Settings{MaxSubtasks: 100, DecompositionLevel: "moderate", PrePlanning: true, MaxGatherCalls: 10,
		MaxCallsPerAction: 20, MaxAttempts: 2, Reflection: true, ReflectOnError: true, ReflectEvery: 3,
		MaxRevisions: 3, Verification: true, MaxVerifyRounds: 2, MaxReplans: 1, CallComments: true}
}

// Step says where a task is when the coordinator is about to ask the model.
type Step struct {
	Phase  report.Phase
	Call   int    // the model call about to be made, from 1
	Action string // the action being carried out, in execution
}

// Options configure a Coordinator.
type Options struct {
	LLM   llm.Client
	Tools agent.Tools
	State agent.State
	// Forge is where the progress report and the per-call comments go.
	Forge    report.BoardForge
	Settings Settings
	// Lang is the language of the comments (and of the model's comments).
	Lang report.Lang
	// HistoryDir holds one JSONL history file per task.
	HistoryDir      string
	FunctionCalling bool
	// MaxCalls is the hard limit of model calls per task (max_llm_process_num).
	MaxCalls int
	// MaxUnusable ends the task after this many unusable replies in a row; 0 → 5.
	MaxUnusable int
	// BeforeCall runs before every model request; an error ends the run
	// with that error (agent.ErrInterrupted for a shutdown).
	BeforeCall func(ctx context.Context, ref task.Ref, at Step) error
	Redact     func(string) string
	Logger     *slog.Logger
	Now        func() time.Time
}

// Coordinator runs tasks in planning mode. It is safe for concurrent use.
type Coordinator struct {
	o      Options
	ts     *agent.Toolset
	system string
}

// New prepares the planning system prompt and the tools.
func New(o Options) (*Coordinator, error) {
	if o.LLM == nil || o.Tools == nil || o.State == nil || o.Forge == nil {
		return nil, errors.New("plan: LLM, Tools, State and Forge are required")
	}
	if o.HistoryDir == "" {
		return nil, errors.New("plan: HistoryDir is required")
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = 1000
	}
	if o.MaxUnusable <= 0 {
		o.MaxUnusable = 5
	}
	if o.Lang == "" {
		o.Lang = report.Japanese
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	if o.BeforeCall == nil {
		o.BeforeCall = func(context.Context, task.Ref, Step) error { return nil }
	}
	s := &o.Settings
	s.MaxSubtasks = max(s.MaxSubtasks, 1)
	s.MaxCallsPerAction = max(s.MaxCallsPerAction, 1)
	s.MaxAttempts = max(s.MaxAttempts, 1)
	s.MaxVerifyRounds = max(s.MaxVerifyRounds, 1)
	c := &Coordinator{o: o, ts: agent.NewToolset(o.Tools.Tools(), o.Tools.Servers(), o.FunctionCalling)}
	sys, err := c.systemPrompt()
	if err != nil {
		return nil, err
	}
	c.system = sys
	return c, nil
}

// state is a run's checkpoint (store.Checkpoint.Data).
type state struct {
	Version  int          `json:"version"`
	Mode     string       `json:"mode"` // always modePlanning: tells the two loops' checkpoints apart
	Phase    report.Phase `json:"phase"`
	Prompted bool         `json:"prompted"` // the phase's instruction is in the conversation
	Visit    int          `json:"visit"`    // phase visits: each gets its own comment

	Calls     int       `json:"calls"` // model calls, the #n of the comments
	ToolCalls int       `json:"tool_calls"`
	TokensIn  int       `json:"tokens_in"`
	TokensOut int       `json:"tokens_out"`
	Started   time.Time `json:"started"`

	Messages []llm.Message `json:"messages"`
	Unusable int           `json:"unusable"` // unusable replies in a row

	Plan        *Plan  `json:"plan,omitempty"`
	Current     string `json:"current,omitempty"`      // action being carried out
	ActionCalls int    `json:"action_calls,omitempty"` // model calls of the current action
	Gathered    int    `json:"gathered,omitempty"`     // read-only calls in this gathering phase

	Replans         int    `json:"replans"`
	Rounds          int    `json:"rounds"` // verification rounds
	SinceReflection int    `json:"since_reflection"`
	Trigger         string `json:"trigger,omitempty"` // why the reflection runs: error or interval
	Failed          string `json:"failed,omitempty"`  // the action a reflection or replan decision is about

	Failures      map[string]int `json:"failures,omitempty"` // failing tool call → times it failed
	agent.Repeats                // identical tool calls in a row

	Pending *pending          `json:"pending,omitempty"`
	Board   report.BoardState `json:"board"`

	Changes []string `json:"changes,omitempty"` // one line per completed action, across replans
	// RevisionNotes are the plan's revisions as the progress report lists
	// them, one per revision: their number is the revisions made.
	RevisionNotes []report.ProgressRevision `json:"revision_notes,omitempty"`
	Verification  *Verification             `json:"verification,omitempty"` // the last round's result; nil: none ran

	Mark    int64    `json:"mark,omitempty"`    // newest comment id the conversation has seen
	Ignored int      `json:"ignored,omitempty"` // comments from people not allowed to steer
	Notes   []string `json:"notes,omitempty"`   // progress report lines: comments applied

	// HistoryLen is how many entries the task's history held when this
	// checkpoint was saved, earlier runs' included.
	HistoryLen int `json:"history_len"`

	Final *agent.Outcome `json:"final,omitempty"`
	// Announced is set once the closing comment is posted (or given up on):
	// a resume after Final but before it posts it, never twice.
	Announced bool `json:"announced,omitempty"`
}

// pending is a reply received and not yet fully acted on.
type pending struct {
	Phase    report.Phase     `json:"phase"`
	Comment  string           `json:"comment,omitempty"`
	Posted   bool             `json:"posted"`
	Calls    []agent.ToolCall `json:"calls,omitempty"`
	Executed int              `json:"executed"`
	// Abort ends the current action as failed once the calls are answered
	// (a call that already failed too often was refused).
	Abort  string          `json:"abort,omitempty"`
	Object json.RawMessage `json:"object,omitempty"` // the phase object, applied after posting
}

const (
	stateVersion = 1
	modePlanning = "planning"
)

// Run works on the task in planning mode until it is verified done, fails,
// or a system error occurs (returned). It resumes from the checkpoint.
func (c *Coordinator) Run(ctx context.Context, in agent.Input) (agent.Outcome, error) {
	r, err := c.start(ctx, in)
	if err != nil {
		return agent.Outcome{}, err
	}
	if r.st.Final != nil {
		r.log.Info("run had already ended; returning its outcome", "status", r.st.Final.Status)
		if !r.st.Announced {
			r.announce(ctx)
		}
		return *r.st.Final, nil
	}
	for {
		out, err := r.step(ctx)
		if err != nil {
			return agent.Outcome{Turns: r.st.Calls}, err
		}
		if out != nil {
			return *out, nil
		}
	}
}
