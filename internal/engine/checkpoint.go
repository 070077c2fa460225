package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// checkpoint is a run's saved state (store.Checkpoint.Data), one format for
// every policy.
type checkpoint struct {
	Version  int           `json:"version"`
	Mode     string        `json:"mode"` // the policy that wrote it
	Messages []llm.Message `json:"messages"`
	Counts
	Repeats Repeats `json:"repeats"` // identical tool calls in a row
	Mark    int64   `json:"mark,omitempty"`
	Pending *Act    `json:"pending,omitempty"`
	// Final is the outcome once the run has ended: a resume (the process
	// died before the task's labels were set) returns it without asking
	// the model again.
	Final *Outcome `json:"final,omitempty"`
	// Announced is set once the policy has reported the end.
	Announced bool `json:"announced,omitempty"`
	// Offered are the tools the run offers beyond those always offered,
	// when the catalog is too large to offer whole (catalog.go): in the
	// order they are listed, each with when it was last used. Loaded is
	// what a checkpoint written before offers were kept holds instead (the
	// tools its searches loaded): read on a resume, never written.
	Offered []Offer  `json:"offered,omitempty"`
	Loaded  []string `json:"loaded,omitempty"`
	// Scale is how many times more tokens the server counted than the
	// engine did (at least 1): later counts are scaled by it.
	Scale float64 `json:"scale,omitempty"`
	// Summary is the model's summary of the work compaction removed from
	// the conversation; each later summary covers it too.
	Summary string          `json:"summary,omitempty"`
	Policy  json.RawMessage `json:"policy,omitempty"`
	// Ran are the commands the model ran in the sandbox (Outcome.Ran).
	Ran []toolhost.CommandRun `json:"ran,omitempty"`
	// Checking is the done held while the repository's checks run;
	// Checks are their last results and Feedback the times they went back
	// to the model. A checkpoint without them (older) reads as none.
	Checking *checking     `json:"checking,omitempty"`
	Checks   []CheckResult `json:"checks,omitempty"`
	Feedback int           `json:"check_feedback,omitempty"`

	// Asked is the question a server asked during the call in hand, put
	// off to the people on the task (answer.go); Answers are the answers
	// they gave, for that call alone: given when it is made again and its
	// server asks the same form, dropped once it is answered.
	Asked   *Question  `json:"asked,omitempty"`
	Answers []Answered `json:"answers,omitempty"`

	// Raised is the output token limit the next request may use once a
	// reply was cut at the limit (0: the reserve): raised once, kept while
	// the replies are cut, dropped by the first that is not.
	Raised int `json:"raised_reply_limit,omitempty"`

	// Hinted are the kinds of hint the model was given in this run
	// (Reply.Hint): each is given once.
	Hinted []string `json:"hinted,omitempty"`

	// Keys number the run's comments (keys.go); SavedAt is when the
	// checkpoint was saved, by the wall clock: a process that stopped
	// after it posted only comments created since.
	Keys    Keys      `json:"keys"`
	SavedAt time.Time `json:"saved_at"`
}

// checkpointVersion 2 is the engine's format; version 1 was written by the
// two loops before they shared it.
const checkpointVersion = 2

// Counts are a run's counters.
type Counts struct {
	Calls     int       `json:"calls"` // model requests made
	ToolCalls int       `json:"tool_calls"`
	TokensIn  int       `json:"tokens_in"`
	TokensOut int       `json:"tokens_out"`
	Unusable  int       `json:"unusable"`          // unusable replies in a row
	Ignored   int       `json:"ignored,omitempty"` // comments from people not allowed to steer
	Started   time.Time `json:"started"`
	// Compactions counts the times the conversation was compacted to fit
	// the context window; Summaries, the model requests that summarised a
	// part of it (not in Calls: they are no step of the task).
	Compactions int `json:"compactions,omitempty"`
	Summaries   int `json:"summaries,omitempty"`
}

// ErrUnresumable is what a Policy's Begin wraps when its saved state cannot
// be resumed: the run starts over. Any other error from Begin is a system
// error, and the checkpoint is kept.
var ErrUnresumable = errors.New("the saved state cannot be resumed")

// legacyFinal is the outcome a checkpoint of the per-loop format (version 1)
// recorded when its run had ended, or nil.
func legacyFinal(data []byte) *Outcome {
	var v1 struct {
		Version int `json:"version"`
		Final   *struct {
			Status, Comment, Summary, Reason string
			Turns, Ignored                   int
			Reported                         bool
		} `json:"final"`
	}
	if json.Unmarshal(data, &v1) != nil || v1.Version != 1 || v1.Final == nil {
		return nil
	}
	f := v1.Final
	end := Failed
	if f.Status == string(Done) {
		end = Done
	}
	return &Outcome{End: end, Comment: f.Comment, Summary: f.Summary, Reason: f.Reason, Calls: f.Turns,
		Ignored: f.Ignored, Reported: f.Reported}
}

// resumable reads a checkpoint, or says why it cannot be resumed.
func resumable(data []byte, mode string) (*checkpoint, string) {
	var st checkpoint
	switch err := json.Unmarshal(data, &st); {
	case err != nil:
		return nil, "unreadable: " + err.Error()
	case st.Version != checkpointVersion:
		return nil, fmt.Sprintf("written in format %d, not %d", st.Version, checkpointVersion)
	case st.Mode != mode:
		return nil, fmt.Sprintf("written by the %q loop", st.Mode)
	case len(st.Messages) == 0:
		return nil, "it holds no conversation"
	}
	return &st, ""
}

// Ended reads a checkpoint's data: the outcome its run ended with (done or
// failed), saved before the run's end is reported anywhere; false for a run
// that had not ended.
func Ended(data []byte) (Outcome, bool) {
	var cp struct {
		Final *Outcome `json:"final"`
	}
	if json.Unmarshal(data, &cp) != nil || cp.Final == nil || !cp.Final.Final() {
		return Outcome{}, false
	}
	return *cp.Final, true
}
