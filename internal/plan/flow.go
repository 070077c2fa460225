package plan

import "github.com/coding-agent/coding-agent/internal/engine"

// Phase is a planning-mode phase.
type Phase string

// The phases (spec 004).
const (
	PhasePrePlanning  Phase = "pre_planning"
	PhasePlanning     Phase = "planning"
	PhaseExecution    Phase = "execution"
	PhaseReflection   Phase = "reflection"
	PhaseRevision     Phase = "revision"
	PhaseVerification Phase = "verification"
	PhaseReplan       Phase = "replan"
)

// takesCalls reports whether tool calls are allowed in a phase.
func (p Phase) takesCalls() bool {
	return p == PhasePrePlanning || p == PhaseExecution || p == PhaseVerification
}

// At is where a planned run is: the phase, and what that phase is about.
// Each transition makes a new At, so nothing of an earlier phase lingers.
type At struct {
	Phase Phase `json:"phase"`
	// Action is, in execution, the action in hand ("" until the next
	// pending one is taken); in a reflection after a failure, a replan
	// decision and the planning that follows a replan, the failed action.
	// Other phases have none.
	Action string `json:"action,omitempty"`
	// Trigger is why a reflection runs: "error" or "interval".
	Trigger string `json:"trigger,omitempty"`
	// From is the model calls made when the action in hand was taken: the
	// action's own calls are the run's since then.
	From int `json:"from,omitempty"`
	// Gathered counts read-only calls in pre-planning and verification.
	Gathered int `json:"gathered,omitempty"`
	// Prompted is set once the phase's (or action's) instruction is in the
	// conversation.
	Prompted bool `json:"prompted,omitempty"`
}

// Events: what ended the current phase (or action).
type eventKind int

const (
	understood    eventKind = iota // pre-planning stated the understanding
	planned                        // a plan was adopted
	actionDone                     // the action in hand completed
	actionFailed                   // the action in hand failed
	reflected                      // a reflection was recorded
	revised                        // a revised plan was adopted
	planFinished                   // no action is pending
	verified                       // a verification round was recorded
	replanDecided                  // (decision "replan")
	skipDecided                    // (decision "skip")
	abortDecided                   // (decision "abort")
)

// facts are what the next phase depends on besides the event, read from
// the run's state by the caller.
type facts struct {
	revise        bool // the reflection asks for a revision
	passed        bool // the verification passed
	additions     bool // the failed verification lists actions to add
	attempts      int  // attempts made at the failed action
	pending       bool // an action is still pending
	since         int  // actions completed since the last reflection
	revisionsLeft bool
	roundsLeft    bool // verification rounds left after this one
	skipped       bool // some action was skipped
	fixing        bool // the plan carries an action added because the repository's checks failed
}

// move is a transition's result: where the run goes next (Enter: as a new
// phase visit, with a comment of its own) or how it ends.
type move struct {
	To    At
	Enter bool
	End   engine.End
}

// next is the planning state machine: from where the run is, what happened,
// and the facts, where it goes. It is a pure function of its arguments.
func (s Settings) next(at At, e eventKind, f facts) move {
	enter := func(p Phase) move { return move{To: At{Phase: p}, Enter: true} }
	retryOrDecide := func() move {
		if f.attempts >= s.MaxAttempts {
			return move{To: At{Phase: PhaseReplan, Action: at.Action}, Enter: true}
		}
		return enter(PhaseExecution)
	}
	switch e {
	case understood:
		return enter(PhasePlanning)
	case planned, revised, skipDecided:
		return enter(PhaseExecution)
	case actionDone:
		if s.Reflection && s.ReflectEvery > 0 && f.since >= s.ReflectEvery && f.pending {
			return move{To: At{Phase: PhaseReflection, Trigger: "interval"}, Enter: true}
		}
		return move{To: At{Phase: PhaseExecution}} // the next action, in the same visit
	case actionFailed:
		if s.Reflection && s.ReflectOnError {
			return move{To: At{Phase: PhaseReflection, Trigger: "error", Action: at.Action}, Enter: true}
		}
		return retryOrDecide()
	case reflected:
		switch {
		case f.revise && f.revisionsLeft:
			return enter(PhaseRevision)
		case at.Trigger == "error":
			return retryOrDecide()
		}
		return enter(PhaseExecution)
	case planFinished:
		switch {
		case f.fixing && !f.skipped:
			// The model's verification passed before the checks refused the
			// done: the checks, run again at this done, judge the fix.
			return move{End: engine.Done}
		case s.Verification:
			return enter(PhaseVerification)
		case f.skipped: // nothing checks that the work is complete without them
			return move{End: engine.Failed}
		}
		return move{End: engine.Done}
	case verified:
		switch {
		case f.passed:
			return move{End: engine.Done}
		case f.additions && f.roundsLeft:
			return enter(PhaseExecution)
		}
		return move{End: engine.Failed}
	case replanDecided:
		return move{To: At{Phase: PhasePlanning, Action: at.Action}, Enter: true}
	case abortDecided:
		return move{End: engine.Failed}
	}
	return move{End: engine.Failed}
}
