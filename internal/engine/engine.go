// Package engine is the one turn engine under both loops. It owns the
// conversation, the reply being acted on, the counters and guards, the
// checkpoint check before every model request, and the checkpoint saved
// after every step, so an interrupted task resumes where it stopped. What to
// ask, which tools may run, how a reply is read and what comes next is a
// Policy's: the plain loop (package agent) is a one-phase policy, planning
// mode (package plan) a policy of phases.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// Tools is what the engine needs of the MCP host: the catalog, and a Caller
// for the runs that bring none of their own.
type Tools interface {
	Tools() []toolhost.Tool
	Servers() []toolhost.ServerConfig
	Caller
}

// Caller runs tool calls: the host, or a task's session of it
// (toolhost.Session, whose task-scoped servers are the task's own).
type Caller interface {
	Call(ctx context.Context, fullName string, args json.RawMessage) (toolhost.Result, error)
}

// Poster posts a comment on the task being worked on, once: key names it
// (written in it as a hidden line) and says whether a process that stopped
// may have posted it already, to be looked for first (keys.go).
type Poster interface {
	Post(ctx context.Context, key Key, body string) error
}

// State is where the engine keeps checkpoints and counters.
type State interface {
	SaveCheckpoint(ctx context.Context, ref task.Ref, cp store.Checkpoint) error
	LoadCheckpoint(ctx context.Context, ref task.Ref) (store.Checkpoint, bool, error)
	AddCounters(ctx context.Context, ref task.Ref, delta store.Counters) error
}

// Options configure an Engine. Zero values mean defaults.
type Options struct {
	LLM   llm.Client
	Tools Tools
	State State
	// Record, when set, records the runs' events for the tasks' pages
	// (store.Event); it never fails a run.
	Record func(ctx context.Context, ref task.Ref, e store.Event)
	Logger *slog.Logger
	// FunctionCalling uses the provider's native tool calls instead of the
	// JSON text protocol.
	FunctionCalling bool
	// MaxCalls is max_llm_process_num: model requests per task; 0 → 1000.
	MaxCalls int
	// MaxUnusable ends the task after this many unusable replies in a row;
	// 0 → 5.
	MaxUnusable int
	// Budget keeps every request inside the model's context window.
	Budget Budget
	// MaxTools is the most tools the provider accepts in a request
	// (OpenAI: 128); 0: any number.
	MaxTools int
	Now      func() time.Time
	// Constrained has the server hold each reply to what the policy
	// expects (constrain.go): the reply's schema in the JSON protocol,
	// tool_choice required and the finish tool with native calls.
	Constrained bool
}

// Engine runs tasks under a policy. It is safe for concurrent use: each
// Run has its own state.
type Engine struct {
	o  Options
	ts *Toolset
}

// New prepares the tools as the model sees them.
func New(o Options) (*Engine, error) {
	if o.LLM == nil || o.Tools == nil || o.State == nil {
		return nil, errors.New("engine: LLM, Tools and State are required")
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = 1000
	}
	if o.MaxUnusable <= 0 {
		o.MaxUnusable = 5
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Budget.Counter == nil {
		o.Budget.Counter = llm.Estimate{}
	}
	if b := o.Budget; b.ContextLength > 0 {
		if b.limit() <= 0 {
			return nil, fmt.Errorf("engine: a reply reserve of %d tokens leaves nothing of a context length of %d", b.Reserve, b.ContextLength)
		}
	}
	e := &Engine{o: o, ts: NewToolset(o.Tools.Tools(), o.Tools.Servers(), o.FunctionCalling)}
	share := 0
	if o.Budget.ContextLength > 0 {
		share = o.Budget.limit() / 4 // the catalog's fair share of the budget
	}
	maxTools := o.MaxTools
	if o.Constrained && o.FunctionCalling {
		if e.ts.Known(FinishTool) {
			return nil, fmt.Errorf("engine: the tool %s of an MCP server has the name of the built-in tool that ends a step with llm.constrained: auto: rename the server", FinishTool)
		}
		e.ts.names.add(FinishTool)
		if maxTools > 0 {
			maxTools-- // a place for the finish tool
		}
	}
	if e.ts.limit(maxTools, share, o.Budget.Counter.Count) {
		o.Logger.Warn("the tool catalog is offered in part: the tools that match each task best, with a search tool for the rest",
			"tools", len(e.ts.tools), "always_offered", len(e.ts.pinned), "offered_without_task_words", len(e.ts.initial),
			"max_tools", o.MaxTools, "token_share", share)
	}
	return e, nil
}

// Fits checks that a policy's system prompt and the tools offered leave
// room in the context budget for the task and the work: at most half of
// it. A catalog offered in part is counted at its share, the most a run's
// offer may grow to. A catalog that cannot fit is refused before any task
// is claimed, naming its servers, their tools, the tokens and the fix.
func (e *Engine) Fits(system string) error {
	b := e.o.Budget
	if b.ContextLength <= 0 {
		return nil
	}
	need := b.Counter.Count(system) // the JSON protocol's catalog is in it
	for _, d := range e.ts.Defs(e.ts.initial) {
		need += messageOverhead + b.Counter.Count(d.Name) + b.Counter.Count(d.Description) + b.Counter.Count(string(d.Parameters))
	}
	if e.ts.partial {
		need += e.ts.share - e.ts.offerCost(e.ts.initial)
	}
	e.o.Logger.Info("system prompt and tool catalog", "tokens", need, "budget", b.limit(), "tools", len(e.ts.tools),
		"offered", len(e.ts.offered(e.ts.initial)), "context_length", b.ContextLength, "reply_reserve", b.Reserve)
	if need <= b.limit()/2 {
		return nil
	}
	perServer := map[string]int{}
	for _, t := range e.ts.tools {
		perServer[t.Server]++
	}
	var servers []string
	for _, s := range e.ts.servers {
		servers = append(servers, fmt.Sprintf("%s (%d tools)", s.Name, perServer[s.Name]))
	}
	return fmt.Errorf("the system prompt and the tool catalog of %s take %d tokens, more than half of the %d-token budget "+
		"(context_length %d less the reply reserve %d): raise context_length, or withhold tools with mcp_servers[].tools.deny",
		strings.Join(servers, ", "), need, b.limit(), b.ContextLength, b.Reserve)
}

// Toolset is the tools as the model sees them.
func (e *Engine) Toolset() *Toolset { return e.ts }

// MaxCalls is the model requests a task may make.
func (e *Engine) MaxCalls() int { return e.o.MaxCalls }

// MaxUnusable is how many unusable replies in a row end a task.
func (e *Engine) MaxUnusable() int { return e.o.MaxUnusable }

// Now is the engine's clock.
func (e *Engine) Now() time.Time { return e.o.Now() }

// Input is one task to run.
type Input struct {
	Task task.Task
	// Comments are those the model may see (the audience rule applied):
	// the first prompt shows them.
	Comments []task.Comment
	// Mark is the newest comment id read, shown or not: a comment after it
	// is new to the run. Ignored counts the comments read and not shown.
	Mark    int64
	Ignored int
	BotName string
	Post    Poster
	// Rounds summarise the earlier rounds of a follow-up conversation,
	// oldest first.
	Rounds []string
	// Watch is the checkpoint check; nil checks nothing.
	Watch Watch
	// Questions: a server's question may be put to the people on the task
	// (the run ends Asked, and they answer in a reply); false declines it.
	Questions bool
	// Page is the task's page (internal/ui), for the closing comment to
	// link; "" when there is none.
	Page string
	// Tools runs every tool call of the run (a toolhost.Session for the
	// task); nil: Options.Tools. The catalog is Options.Tools' either way.
	Tools Caller
	// Checks runs the repository's checks (workspace.checks) when a round
	// is about to end done; nil runs none. A failing check sends its output
	// back to the model, at most CheckRounds times (workspace.check_rounds);
	// still failing after that, the round ends failed.
	Checks      Checker
	CheckRounds int
	// Setup says what the daemon ran in the task's workspace before the
	// first request (the repository's setup commands and how each ended),
	// for the first prompt; "" for nothing.
	Setup string
}

// End is how a run ended.
type End string

// The ends of a run. Done and Failed are final and recorded in the
// checkpoint; Paused, Asked and Interrupted keep the checkpoint for a
// resume; Stopped ends the task without finishing it.
const (
	Done        End = "done"
	Failed      End = "failed"
	Paused      End = "paused"
	Stopped     End = "stopped"
	Interrupted End = "interrupted" // the process is shutting down
	Asked       End = "asked"       // a server's question awaits the people on the task (Outcome.Question)
)

// Outcome is how a run ended when it ended without a system error.
type Outcome struct {
	End     End    `json:"end"`
	Comment string `json:"comment,omitempty"` // the model's closing comment (done)
	Summary string `json:"summary,omitempty"` // what the round did, for the next round's context
	Reason  string `json:"reason,omitempty"`  // why it failed, paused or stopped
	Calls   int    `json:"calls"`             // model requests made
	// Ignored counts comments from people not allowed to steer the task.
	Ignored int `json:"ignored,omitempty"`
	// Mark is the newest comment id the conversation holds: a comment
	// after it was never shown to the model.
	Mark int64 `json:"mark,omitempty"`
	// Question is the server's question the run ended on (Asked).
	Question *Question `json:"question,omitempty"`
	// Reported is true when the run has already posted its closing comment
	// (planning mode does), so the worker adds no failure comment of its own.
	Reported bool `json:"reported,omitempty"`
	// Checks are the repository's checks as they last ran (Input.Checks):
	// all passed for done, some failed for a round failed on its checks.
	Checks []CheckResult `json:"checks,omitempty"`
	// Ran are the commands the model ran in the sandbox this round, the
	// last result of each command line, in the order first run.
	Ran []toolhost.CommandRun `json:"ran,omitempty"`
	// Steps are what a done round did, step by step, when the policy
	// knows it (planning mode: one line per completed action); none for
	// the plain loop, whose account of the round is its Comment.
	Steps []string `json:"steps,omitempty"`
	// Keys name the comments posted for the round after its run (the
	// delivery, a notice), continuing the run's own (keys.go): doubtful
	// when the outcome was read from a checkpoint that a process that
	// stopped had saved, and nothing was saved since.
	Keys Keys `json:"-"`
}

// Final reports whether the outcome ends the task's round (done or failed).
func (o Outcome) Final() bool { return o.End == Done || o.End == Failed }

// Act is a reply being carried out: its comment, its tool calls, or the
// policy's own object (a phase reply, the end of the task).
type Act struct {
	Comment  string          `json:"comment,omitempty"`
	Calls    []ToolCall      `json:"calls,omitempty"`
	Done     bool            `json:"done,omitempty"`   // the plain loop's end
	Object   json.RawMessage `json:"object,omitempty"` // the policy's reply object
	Posted   bool            `json:"posted"`           // its comment is posted
	Executed int             `json:"executed"`         // tool calls answered
	// Abort is set by a policy that refused a call in a way that ends the
	// step (planning: a call that failed too often ends the action).
	Abort string `json:"abort,omitempty"`
	// Hint is the decoder's one line on how to reply next time (Reply.Hint),
	// added to the conversation once the calls are answered.
	Hint string `json:"hint,omitempty"`
}

// Policy is what differs between the loops: the core every loop answers.
// The engine calls it at each point of a turn; it keeps its own state,
// saved in the checkpoint (State) and handed back to Begin on a resume.
// What only some loops do are the optional interfaces below (Locator,
// Refuser, CallWatcher, TroubleReporter, Hearer, Finisher, Halter,
// Reopener, Pinner), which the engine asks for where it needs them.
type Policy interface {
	// Mode names the policy in checkpoints: a checkpoint written by another
	// policy is never resumed.
	Mode() string
	// System is the system prompt of a new conversation.
	System() string
	// Begin starts the policy's part of run r: saved is its state from the
	// checkpoint, nil for a new run. An error wrapping ErrUnresumable says
	// the saved state cannot be resumed, and the run starts over.
	Begin(ctx context.Context, r *Run, saved json.RawMessage) error
	// Next prepares the next model request: an instruction to add to the
	// conversation ("" for none), or the end of the run.
	Next(ctx context.Context) (string, *Outcome, error)
	// Read turns a decoded reply into the step to carry out, or says why it
	// cannot be used (a *ReplyError).
	Read(r Reply) (*Act, error)
	// Post reports a step on the task (its comment); it is called once per
	// step, before its calls run.
	Post(ctx context.Context, a *Act) error
	// Apply acts on a step once its calls are answered: what comes next,
	// or the end of the run.
	Apply(ctx context.Context, a *Act) (*Outcome, error)
	// Correction is the message that answers an unusable reply.
	Correction(reason string) (string, error)
	// Announce reports the end of the run on the task. It is called once
	// the outcome is saved, and again after a resume if it did not finish.
	Announce(ctx context.Context, out Outcome)
	// State is the policy's state, to save in the checkpoint.
	State() any
	// Expect is the reply the policy takes next, for a constrained run to
	// hold the model to (constrain.go). It is asked before each request.
	Expect() Expect
}

// The optional parts of a Policy: the engine asks for each where it needs
// it, and a policy without it gets the behaviour its comment gives.

// Locator says where the run is (its phase and action), for the
// checkpoint check and the logs; without it, the zero Step.
type Locator interface {
	At() Step
}

// Refuser says why call must not run ("" runs it), and whether the refusal
// counts as an unusable reply; without it, every call runs.
type Refuser interface {
	Refuse(call ToolCall, a *Act) (reason string, unusable bool)
}

// CallWatcher sees the result of each call that ran.
type CallWatcher interface {
	Called(ctx context.Context, call ToolCall, res toolhost.Result)
}

// TroubleReporter reports a model request that failed or whose reply could
// not be used; retrying says another request follows.
type TroubleReporter interface {
	Trouble(ctx context.Context, reason string, retrying bool)
}

// Hearer reports the comments handed to the model at a checkpoint.
type Hearer interface {
	Heard(ctx context.Context, applied []Applied)
}

// Finisher completes the outcome the run ends with (done or failed) before
// it is saved.
type Finisher interface {
	Ending(out *Outcome)
}

// Halter reports that the run stops at a checkpoint (out: paused, stopped
// or interrupted), which the next run of the task resumes: what the task
// shows of its progress no longer says it works.
type Halter interface {
	Halt(ctx context.Context, out Outcome)
}

// Reopener goes back to work after the repository's checks refused a
// done: the engine has told the model which failed and how (failing).
// Without it the run carries on as it was (the plain loop); planning adds
// an action to fix them.
type Reopener interface {
	Reopen(ctx context.Context, failing []CheckResult) error
}

// Pinner says what must stay in view when the conversation is compacted
// (planning: the plan and the action in hand); without it, nothing beyond
// the system prompt and the task, which are always kept.
type Pinner interface {
	Pinned() string
}
