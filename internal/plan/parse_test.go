package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/engine"
)

// replyReason returns the reason of a *engine.ReplyError, failing the test
// for any other result.
func replyReason(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		t.Fatal("the reply was accepted, want it refused")
	}
	var re *engine.ReplyError
	if !errors.As(err, &re) {
		t.Fatalf("error is %T (%v), want *engine.ReplyError", err, err)
	}
	return re.Reason
}

const goodPre = `{"phase":"pre_planning","comment":"understood","understanding":{"goal":"add a --verbose flag","deliverables":["flag","test"],"confidence":"medium"}}`

func TestDecodePhaseAcceptsFencedObjectInProse(t *testing.T) {
	text := "Let me restate the task first.\n\n```json\n" + goodPre + "\n```\n\nI will plan next."
	got, err := decodePhase(text, "pre_planning", checkPre)
	if err != nil {
		t.Fatalf("decodePhase: %v", err)
	}
	want := &Understanding{Goal: "add a --verbose flag", Deliverables: []string{"flag", "test"}, Confidence: "medium"}
	if diff := cmp.Diff(want, got.Understanding); diff != "" {
		t.Errorf("understanding (-want +got):\n%s", diff)
	}
	if got.Comment != "understood" || got.Phase != "pre_planning" {
		t.Errorf("header = %+v", got.header)
	}
}

func TestDecodePhaseAcceptsBareObjectWithoutPhase(t *testing.T) {
	text := `Sure. {"understanding":{"goal":"g","deliverables":[],"confidence":"high"}} Done.`
	got, err := decodePhase(text, "pre_planning", checkPre)
	if err != nil {
		t.Fatalf("decodePhase: %v", err)
	}
	if got.Understanding.Goal != "g" || got.Understanding.Confidence != "high" {
		t.Errorf("understanding = %+v", got.Understanding)
	}
}

func TestDecodePhaseRefusesAnotherPhase(t *testing.T) {
	text := strings.Replace(goodPre, `"phase":"pre_planning"`, `"phase":"planning"`, 1)
	_, err := decodePhase(text, "pre_planning", checkPre)
	want := `"phase" is "planning", but this step is "pre_planning"`
	if got := replyReason(t, err); got != want {
		t.Errorf("reason = %q, want %q", got, want)
	}
}

func TestDecodePhaseNoJSON(t *testing.T) {
	for _, text := range []string{"", "I will now look at the code.", `{"phase": "pre_planning", "understanding": {`} {
		_, err := decodePhase(text, "pre_planning", checkPre)
		if got := replyReason(t, err); !strings.Contains(got, "no JSON object") {
			t.Errorf("reply %q: reason = %q, want it to say there is no JSON object", text, got)
		}
	}
}

func TestDecodePhaseUsesLaterGoodObject(t *testing.T) {
	bad := `{"phase":"pre_planning","understanding":{"goal":"","confidence":"high"}}`
	text := "First draft: " + bad + "\nCorrected: " + goodPre
	got, err := decodePhase(text, "pre_planning", checkPre)
	if err != nil {
		t.Fatalf("decodePhase: %v", err)
	}
	if got.Understanding.Goal != "add a --verbose flag" {
		t.Errorf("used the understanding %+v, want the second object's", got.Understanding)
	}
}

func TestDecodePhaseReportsFirstProblemWhenAllBad(t *testing.T) {
	text := `{"phase":"pre_planning","understanding":{"goal":"","confidence":"high"}}` +
		"\n" + `{"phase":"pre_planning","understanding":{"goal":"g","confidence":"sure"}}`
	_, err := decodePhase(text, "pre_planning", checkPre)
	if got, want := replyReason(t, err), `"understanding.goal" is empty`; got != want {
		t.Errorf("reason = %q, want the first object's problem %q", got, want)
	}
}

func TestPhaseChecksRefuseMissingFields(t *testing.T) {
	pre := func(text string) error { _, err := decodePhase(text, "pre_planning", checkPre); return err }
	plan := func(text string) error { _, err := decodePhase(text, "planning", checkPlanShape); return err }
	refl := func(text string) error { _, err := decodePhase(text, "reflection", checkReflection); return err }
	rev := func(text string) error { _, err := decodePhase(text, "revision", checkRevisionShape); return err }
	ver := func(text string) error { _, err := decodePhase(text, "verification", checkVerification); return err }

	tests := []struct {
		name   string
		decode func(string) error
		text   string
		want   string // the whole reason
	}{
		{"understanding missing", pre, `{"phase":"pre_planning"}`, `"understanding" is missing`},
		{"understanding not an object", pre, `{"understanding":"yes"}`, "the JSON object could not be read: "},
		{"understanding.goal empty", pre, `{"understanding":{"goal":"  ","confidence":"high"}}`, `"understanding.goal" is empty`},
		{"understanding.goal missing", pre, `{"understanding":{"confidence":"high"}}`, `"understanding.goal" is empty`},
		{"confidence not allowed", pre, `{"understanding":{"goal":"g","confidence":"certain"}}`,
			`"understanding.confidence" is "certain"; it must be one of "high", "medium", "low"`},
		{"confidence missing", pre, `{"understanding":{"goal":"g"}}`,
			`"understanding.confidence" is ""; it must be one of "high", "medium", "low"`},
		{"goal_understanding missing", plan, `{"phase":"planning","task_decomposition":{},"action_plan":{}}`, `"goal_understanding" is missing`},
		{"task_decomposition missing", plan, `{"goal_understanding":{},"action_plan":{}}`, `"task_decomposition" is missing`},
		{"action_plan missing", plan, `{"goal_understanding":{},"task_decomposition":{}}`, `"action_plan" is missing`},
		{"reflection missing", refl, `{"phase":"reflection"}`, `"reflection" is missing`},
		{"plan_revision_needed missing", refl, `{"reflection":{"status":"failure","evaluation":"e"}}`,
			`"reflection.plan_revision_needed" is missing; it must be true or false`},
		{"plan_revision_needed null", refl, `{"reflection":{"status":"failure","plan_revision_needed":null}}`,
			`"reflection.plan_revision_needed" is missing; it must be true or false`},
		{"reflection status not allowed", refl, `{"reflection":{"status":"ok","plan_revision_needed":false}}`,
			`"reflection.status" is "ok"; it must be one of "success", "failure", "partial"`},
		{"revision reason empty", rev, `{"phase":"revision","reason":" ","action_plan":{"actions":[]}}`, `"reason" is empty`},
		{"revision reason missing", rev, `{"action_plan":{"actions":[]}}`, `"reason" is empty`},
		{"revision action_plan missing", rev, `{"reason":"r"}`, `"action_plan" is missing`},
		{"verification missing", ver, `{"phase":"verification"}`, `"verification" is missing`},
		{"verification.passed missing", ver, `{"verification":{"criteria":[]}}`,
			`"verification.passed" is missing; it must be true or false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := replyReason(t, tt.decode(tt.text))
			if strings.HasSuffix(tt.want, ": ") {
				if !strings.HasPrefix(got, tt.want) {
					t.Errorf("reason = %q, want it to start %q", got, tt.want)
				}
				return
			}
			if got != tt.want {
				t.Errorf("reason = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPhaseChecksAcceptCompleteReplies(t *testing.T) {
	refl, err := decodePhase(`{"phase":"reflection","reflection":{"status":"partial","evaluation":"half","plan_revision_needed":true},
		"plan_revision":{"reason":"split a2","changes":["a2a","a2b"]}}`, "reflection", checkReflection)
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	wantRefl := Reflection{Status: "partial", Evaluation: "half", PlanRevisionNeeded: true,
		RevisionReason: "split a2", RevisionChanges: []string{"a2a", "a2b"}}
	if diff := cmp.Diff(wantRefl, refl.value()); diff != "" {
		t.Errorf("reflection value (-want +got):\n%s", diff)
	}

	noRev, err := decodePhase(`{"reflection":{"status":"success","evaluation":"fine","plan_revision_needed":false}}`,
		"reflection", checkReflection)
	if err != nil {
		t.Fatalf("reflection without revision: %v", err)
	}
	if diff := cmp.Diff(Reflection{Status: "success", Evaluation: "fine"}, noRev.value()); diff != "" {
		t.Errorf("reflection value (-want +got):\n%s", diff)
	}

	ver, err := decodePhase(`{"verification":{"passed":false,"criteria":[{"criterion":"c","met":false,"evidence":"none"}],
		"missing":["a test"]}}`, "verification", checkVerification)
	if err != nil {
		t.Fatalf("verification: %v", err)
	}
	wantVer := Verification{Criteria: []Criterion{{Criterion: "c", Evidence: "none"}}, Missing: []string{"a test"}}
	if diff := cmp.Diff(wantVer, ver.value()); diff != "" {
		t.Errorf("verification value (-want +got):\n%s", diff)
	}

	if _, err := decodePhase(`{"reason":"r","action_plan":{"actions":[]}}`, "revision", checkRevisionShape); err != nil {
		t.Errorf("revision shape: %v", err)
	}
	if _, err := decodePhase(`{"goal_understanding":{},"task_decomposition":{},"action_plan":{}}`, "planning", checkPlanShape); err != nil {
		t.Errorf("plan shape: %v", err)
	}
}
