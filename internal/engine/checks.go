package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/coding-agent/coding-agent/internal/sanitize"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// Checker runs the repository's checks (workspace.checks) in the task's
// sandbox.
type Checker interface {
	// Check runs every check once, in order, and says how each ended. Its
	// error is a system failure (the sandbox could not start), never a
	// check that failed. The output is redacted by the Checker, as the
	// tool host redacts tool results: it enters the conversation, the
	// checkpoint and the failure comment.
	Check(ctx context.Context) ([]CheckResult, error)
}

// CheckResult is how one check ended.
type CheckResult struct {
	Command  string `json:"command"`
	ExitCode int    `json:"exit_code"` // -1 when it did not exit on its own
	TimedOut bool   `json:"timed_out,omitempty"`
	// Output is its stdout and stderr as the runner gives them (cut).
	Output string `json:"output,omitempty"`
}

// Passed reports whether the check exited 0 on its own.
func (c CheckResult) Passed() bool { return c.ExitCode == 0 && !c.TimedOut }

// checking is a done a round proposed, held until the checks pass. Checked
// says the checks ran for this done and Results are theirs: a resume never
// runs them twice for one done.
type checking struct {
	Out     Outcome       `json:"out"`
	Checked bool          `json:"checked,omitempty"`
	Results []CheckResult `json:"results,omitempty"`
}

// checked passes a done through the repository's checks (Input.Checks): it
// returns the outcome to end with (done with the results, or failed once
// the feedback rounds are used up), or nil when the results went back to
// the model and the run goes on. The done is saved before the checks run,
// and their results before anything is done with them.
func (r *Run) checked(ctx context.Context, out *Outcome) (*Outcome, error) {
	if out.End != Done || r.in.Checks == nil {
		return out, nil
	}
	st := r.st
	if st.Checking == nil {
		st.Checking = &checking{Out: *out}
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	c := st.Checking
	if !c.Checked {
		res, err := r.in.Checks.Check(ctx)
		if err != nil {
			return nil, fmt.Errorf("running the checks of %s: %w", r.in.Task.Ref, err)
		}
		c.Checked, c.Results = true, res
		st.Checks = res
		for _, cr := range res {
			r.record(ctx, store.Event{Kind: store.EventCheck, Title: cr.Command, Text: cr.Output, Error: !cr.Passed(),
				Exit: cr.ExitCode})
		}
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	failing := slices.DeleteFunc(slices.Clone(c.Results), CheckResult.Passed)
	r.log.Info("checks ran", "checks", len(c.Results), "failing", len(failing), "feedback_rounds", st.Feedback)
	switch {
	case len(failing) == 0:
		done := c.Out
		done.Checks = c.Results
		st.Checking = nil // saved with the outcome
		return &done, nil
	case st.Feedback >= r.in.CheckRounds:
		st.Checking = nil
		return &Outcome{End: Failed, Reason: checksReason(failing, st.Feedback), Checks: c.Results}, nil
	}
	return nil, r.feedback(ctx, failing)
}

// feedback tells the model which checks failed and that the round is not
// done until they pass, and has the policy go back to work.
func (r *Run) feedback(ctx context.Context, failing []CheckResult) error {
	st := r.st
	st.Feedback++
	var data struct {
		Round, Rounds int
		Failing       []struct{ Command, Status, Output string }
	}
	data.Round, data.Rounds = st.Feedback, r.in.CheckRounds
	for _, c := range failing {
		data.Failing = append(data.Failing, struct{ Command, Status, Output string }{
			sanitize.Line(c.Command), status(c), sanitize.Fence("output of the check "+sanitize.Line(c.Command), c.Output)})
	}
	text, err := render("checks.tmpl", data)
	if err != nil {
		return err
	}
	r.say(text)
	if err := r.reopen(ctx, failing); err != nil {
		return fmt.Errorf("reopening the round of %s after failed checks: %w", r.in.Task.Ref, err)
	}
	st.Checking = nil
	return r.save(ctx)
}

// checksReason is why a round ends failed on its checks: each failing
// check and how it ended.
func checksReason(failing []CheckResult, rounds int) string {
	var each []string
	for _, c := range failing {
		each = append(each, fmt.Sprintf("`%s` (%s)", oneLine(c.Command), status(c)))
	}
	after := "with no feedback round left"
	if rounds > 0 {
		after = fmt.Sprintf("after %d feedback round(s)", rounds)
	}
	return fmt.Sprintf("the repository's checks still fail %s: %s", after, strings.Join(each, ", "))
}

// status is how a command ended, in words.
func status(c CheckResult) string {
	switch {
	case c.TimedOut:
		return "timed out"
	case c.ExitCode < 0:
		return "did not exit on its own"
	}
	return fmt.Sprintf("exit %d", c.ExitCode)
}

// noteRan records a command the model ran in the sandbox: the last result
// of each command line, in the order first run.
func (r *Run) noteRan(c *toolhost.CommandRun) {
	if c == nil {
		return
	}
	if i := slices.IndexFunc(r.st.Ran, func(x toolhost.CommandRun) bool { return x.Command == c.Command }); i >= 0 {
		r.st.Ran[i] = *c
		return
	}
	r.st.Ran = append(r.st.Ran, *c)
}
