package plan

import (
	"testing"

	"github.com/coding-agent/coding-agent/internal/engine"
)

// TestTransitions is the planning state machine's table: every event from
// where it can happen, under the settings and facts that decide it.
func TestTransitions(t *testing.T) {
	s := testSettings() // reflect on errors and every 3 actions, verify, 2 attempts
	noReflect := s
	noReflect.Reflection = false
	noVerify := s
	noVerify.Verification = false
	exec := At{Phase: PhaseExecution, Action: "a2", From: 7, Prompted: true}
	for _, tc := range []struct {
		name string
		s    Settings
		at   At
		e    eventKind
		f    facts
		want move
	}{
		{"understood", s, At{Phase: PhasePrePlanning, Gathered: 3}, understood, facts{}, move{To: At{Phase: PhasePlanning}, Enter: true}},
		{"planned", s, At{Phase: PhasePlanning}, planned, facts{}, move{To: At{Phase: PhaseExecution}, Enter: true}},
		{"replanned", s, At{Phase: PhasePlanning, Action: "a2"}, planned, facts{}, move{To: At{Phase: PhaseExecution}, Enter: true}},
		{"action done", s, exec, actionDone, facts{since: 1, pending: true}, move{To: At{Phase: PhaseExecution}}},
		{"action done, interval", s, exec, actionDone, facts{since: 3, pending: true}, move{To: At{Phase: PhaseReflection, Trigger: "interval"}, Enter: true}},
		{"last action done, interval", s, exec, actionDone, facts{since: 3}, move{To: At{Phase: PhaseExecution}}},
		{"action done, no reflection", noReflect, exec, actionDone, facts{since: 3, pending: true}, move{To: At{Phase: PhaseExecution}}},
		{"action failed", s, exec, actionFailed, facts{attempts: 1}, move{To: At{Phase: PhaseReflection, Trigger: "error", Action: "a2"}, Enter: true}},
		{"action failed, no reflection, retry", noReflect, exec, actionFailed, facts{attempts: 1}, move{To: At{Phase: PhaseExecution}, Enter: true}},
		{"action failed, no reflection, decide", noReflect, exec, actionFailed, facts{attempts: 2}, move{To: At{Phase: PhaseReplan, Action: "a2"}, Enter: true}},
		{"reflected, revise", s, At{Phase: PhaseReflection, Trigger: "error", Action: "a2"}, reflected, facts{revise: true, revisionsLeft: true}, move{To: At{Phase: PhaseRevision}, Enter: true}},
		{"reflected, no revisions left, retry", s, At{Phase: PhaseReflection, Trigger: "error", Action: "a2"}, reflected, facts{revise: true, attempts: 1}, move{To: At{Phase: PhaseExecution}, Enter: true}},
		{"reflected on error, decide", s, At{Phase: PhaseReflection, Trigger: "error", Action: "a2"}, reflected, facts{attempts: 2}, move{To: At{Phase: PhaseReplan, Action: "a2"}, Enter: true}},
		{"reflected at interval", s, At{Phase: PhaseReflection, Trigger: "interval"}, reflected, facts{}, move{To: At{Phase: PhaseExecution}, Enter: true}},
		// The revision leaves no failed action behind: the run resumes
		// whatever the revision did to it (issue 8, defect 1).
		{"revised", s, At{Phase: PhaseRevision}, revised, facts{}, move{To: At{Phase: PhaseExecution}, Enter: true}},
		{"plan finished, verify", s, At{Phase: PhaseExecution}, planFinished, facts{}, move{To: At{Phase: PhaseVerification}, Enter: true}},
		{"plan finished, no verification", noVerify, At{Phase: PhaseExecution}, planFinished, facts{}, move{End: engine.Done}},
		{"plan finished with skips, no verification", noVerify, At{Phase: PhaseExecution}, planFinished, facts{skipped: true}, move{End: engine.Failed}},
		{"checks fixed: done, checked again", s, At{Phase: PhaseExecution}, planFinished, facts{fixing: true}, move{End: engine.Done}},
		{"checks fix skipped, verify", s, At{Phase: PhaseExecution}, planFinished, facts{fixing: true, skipped: true}, move{To: At{Phase: PhaseVerification}, Enter: true}},
		{"verified", s, At{Phase: PhaseVerification}, verified, facts{passed: true}, move{End: engine.Done}},
		{"verification adds work", s, At{Phase: PhaseVerification}, verified, facts{additions: true, roundsLeft: true}, move{To: At{Phase: PhaseExecution}, Enter: true}},
		{"verification failed, last round", s, At{Phase: PhaseVerification}, verified, facts{additions: true}, move{End: engine.Failed}},
		{"verification failed, nothing to add", s, At{Phase: PhaseVerification}, verified, facts{roundsLeft: true}, move{End: engine.Failed}},
		{"replan", s, At{Phase: PhaseReplan, Action: "a2"}, replanDecided, facts{}, move{To: At{Phase: PhasePlanning, Action: "a2"}, Enter: true}},
		{"skip", s, At{Phase: PhaseReplan, Action: "a2"}, skipDecided, facts{}, move{To: At{Phase: PhaseExecution}, Enter: true}},
		{"abort", s, At{Phase: PhaseReplan, Action: "a2"}, abortDecided, facts{}, move{End: engine.Failed}},
	} {
		if got := tc.s.next(tc.at, tc.e, tc.f); got != tc.want {
			t.Errorf("%s: next = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
