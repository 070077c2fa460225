// Package agent is the core loop: one model turn at a time, each reply parsed
// (the JSON text protocol or native tool calls), its comment posted, its tool
// calls run, and the conversation checkpointed after every step so that an
// interrupted task resumes where it stopped.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// Tools is what the loop needs of the MCP host.
type Tools interface {
	Tools() []toolhost.Tool
	Servers() []toolhost.ServerConfig
	Call(ctx context.Context, fullName string, args json.RawMessage) (toolhost.Result, error)
}

// Poster posts a comment on the task being worked on.
type Poster interface {
	Post(ctx context.Context, body string) error
}

// State is where the loop keeps checkpoints and counters.
type State interface {
	SaveCheckpoint(ctx context.Context, ref task.Ref, cp store.Checkpoint) error
	LoadCheckpoint(ctx context.Context, ref task.Ref) (store.Checkpoint, bool, error)
	AddCounters(ctx context.Context, ref task.Ref, delta store.Counters) error
}

// ErrInterrupted is returned when BeforeTurn asks the loop to stop at a
// checkpoint (shutdown); the task's state is saved and it can resume.
var ErrInterrupted = errors.New("interrupted at a checkpoint")

// Options configure an Agent. Zero values mean defaults.
type Options struct {
	LLM    llm.Client
	Tools  Tools
	State  State
	Logger *slog.Logger
	// FunctionCalling uses the provider's native tool calls instead of the
	// JSON text protocol.
	FunctionCalling bool
	// MaxTurns is max_llm_process_num: model requests per task; 0 → 1000.
	MaxTurns int
	// MaxUnparsable ends the task after this many unusable replies in a
	// row; 0 → 5.
	MaxUnparsable int
	// BeforeTurn runs at each checkpoint, before a model request. An error
	// ends the run with that error (ErrInterrupted for a shutdown).
	BeforeTurn func(ctx context.Context, ref task.Ref, turn int) error
}

// Agent runs tasks. It is safe for concurrent use: each Run has its own state.
type Agent struct {
	o      Options
	ts     *Toolset
	system string
}

// New prepares the system prompt and tool definitions once.
func New(o Options) (*Agent, error) {
	if o.LLM == nil || o.Tools == nil || o.State == nil {
		return nil, errors.New("agent: LLM, Tools and State are required")
	}
	if o.MaxTurns <= 0 {
		o.MaxTurns = 1000
	}
	if o.MaxUnparsable <= 0 {
		o.MaxUnparsable = 5
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.BeforeTurn == nil {
		o.BeforeTurn = func(context.Context, task.Ref, int) error { return nil }
	}
	a := &Agent{o: o, ts: NewToolset(o.Tools.Tools(), o.Tools.Servers(), o.FunctionCalling)}
	sys, err := systemPrompt(a.ts, o.MaxTurns)
	if err != nil {
		return nil, err
	}
	a.system = sys
	return a, nil
}

// Input is one task to run.
type Input struct {
	Task     task.Task
	Comments []task.Comment
	BotName  string
	Post     Poster
	// Rounds summarise the earlier rounds of a follow-up conversation,
	// oldest first.
	Rounds []string
	// Watch is asked at every checkpoint for new comments and pause or
	// stop signals; nil checks nothing.
	Watch Watch
}

// Outcome is how a run ended when it ended without a system error.
type Outcome struct {
	Status  task.Status `json:"status"`            // task.Done or task.Failed
	Comment string      `json:"comment,omitempty"` // the model's closing comment (done)
	Summary string      `json:"summary,omitempty"` // what the round did, for the next round's context
	Reason  string      `json:"reason,omitempty"`  // why it failed (failed)
	Turns   int         `json:"turns"`
	// Ignored counts comments from people not allowed to steer the task.
	Ignored int `json:"ignored,omitempty"`
	// Reported is true when the run has already posted its closing comment
	// (planning mode does), so the worker adds no failure comment of its own.
	Reported bool `json:"reported,omitempty"`
}

// checkpoint is the loop's saved state (store.Checkpoint.Data).
type checkpoint struct {
	Version int `json:"version"`
	// Mode is set by planning mode's checkpoints, never by this loop's: a
	// checkpoint that has it belongs to the other loop.
	Mode       string        `json:"mode,omitempty"`
	Turn       int           `json:"turn"`
	Mark       int64         `json:"mark,omitempty"` // newest comment id the conversation has seen
	Ignored    int           `json:"ignored,omitempty"`
	Messages   []llm.Message `json:"messages"`
	Unparsable int           `json:"unparsable"`
	Repeats                  // identical tool calls in a row
	Pending    *pending      `json:"pending,omitempty"`
	// Final is the outcome once the run has ended: a resume (the process
	// died before the task's labels were set) returns it without asking
	// the model again.
	Final *Outcome `json:"final,omitempty"`
}

// pending is a reply received but not yet fully acted on.
type pending struct {
	Action   Action `json:"action"`
	Posted   bool   `json:"posted"`
	Executed int    `json:"executed"` // tool calls already run
}

const checkpointVersion = 1

// Run works on the task until the model says done, the turn limit is hit,
// the model keeps answering unusably, or a system error occurs (returned).
// It resumes from the task's checkpoint when there is one.
func (a *Agent) Run(ctx context.Context, in Input) (Outcome, error) {
	ref := in.Task.Ref
	log := a.o.Logger.With("task", ref.String())
	st, resumed, err := a.start(ctx, in)
	if err != nil {
		return Outcome{}, err
	}
	if resumed {
		if st.Final != nil {
			log.Info("run had already ended; returning its outcome", "status", st.Final.Status)
			return *st.Final, nil
		}
		log.Info("resuming from checkpoint", "turn", st.Turn, "pending", st.Pending != nil)
	}
	r := &run{a: a, in: in, st: st, log: log}
	for {
		if st.Pending == nil {
			if st.Turn >= a.o.MaxTurns {
				return r.end(ctx, Outcome{Status: task.Failed, Turns: st.Turn,
					Reason: fmt.Sprintf("stopped after %d model turns without finishing (max_llm_process_num)", st.Turn)})
			}
			if err := a.o.BeforeTurn(ctx, ref, st.Turn+1); err != nil {
				return Outcome{Turns: st.Turn}, err
			}
			if err := r.steer(ctx); err != nil {
				return Outcome{Turns: st.Turn}, err
			}
			failed, err := r.ask(ctx)
			if err != nil || failed != nil {
				return deref(failed, st.Turn), err
			}
			if st.Pending == nil {
				continue // unusable reply: the correction is in the conversation
			}
		}
		done, err := r.act(ctx)
		if err != nil {
			return Outcome{Turns: st.Turn}, err
		}
		if done != nil {
			return *done, nil
		}
	}
}

func deref(o *Outcome, turns int) Outcome {
	if o == nil {
		return Outcome{Turns: turns}
	}
	return *o
}

// start loads the checkpoint or builds the opening conversation.
func (a *Agent) start(ctx context.Context, in Input) (*checkpoint, bool, error) {
	cp, ok, err := a.o.State.LoadCheckpoint(ctx, in.Task.Ref)
	if err != nil {
		return nil, false, fmt.Errorf("loading checkpoint of %s: %w", in.Task.Ref, err)
	}
	if ok {
		var st checkpoint
		if err := json.Unmarshal(cp.Data, &st); err != nil || st.Version != checkpointVersion || st.Mode != "" || len(st.Messages) == 0 {
			a.o.Logger.Warn("ignoring a checkpoint this loop cannot resume (unreadable, or written in planning mode); starting over",
				"task", in.Task.Ref.String(), "error", err, "mode", st.Mode)
		} else {
			return &st, true, nil
		}
	}
	first, err := TaskPrompt(in.Task, in.Comments, in.BotName, in.Rounds)
	if err != nil {
		return nil, false, err
	}
	return &checkpoint{Version: checkpointVersion, Mark: MarkOf(in.Comments), Messages: []llm.Message{
		{Role: llm.System, Content: a.system},
		{Role: llm.User, Content: first},
	}}, false, nil
}
