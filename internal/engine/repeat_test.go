package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// A model that repeats the same step has its comment shown once in either
// loop: the plain loop posts it once, planning mode notes the repeats on
// its step, "(×N, the same comment)" (within the action's call limit).
func TestIdenticalStepCommentsAreShownOnce(t *testing.T) {
	host := startHost(t)
	for loop, n := range map[string]int{"plain": 20, "planning": 8} {
		t.Run(loop, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			before, after := shapeScript(loop)
			for _, c := range before {
				srv.Script(llmtest.Reply{Content: c})
			}
			for range n {
				srv.Script(llmtest.Reply{Content: cmd("test/echo", `{"text": "again"}`, "Echoing it once more.")})
			}
			for _, c := range after {
				srv.Script(llmtest.Reply{Content: c})
			}
			w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
			out, err := shapeRun(t, loop, w, client(t, llmtest.WireOpenAI, srv), tools{Host: host}, false)
			if err != nil || out.End != engine.Done {
				t.Fatalf("outcome %+v, %v", out, err)
			}
			shown, noted := 0, 0
			for _, c := range w.comments {
				shown += strings.Count(c, "Echoing it once more.")
				noted += strings.Count(c, fmt.Sprintf("(same as the previous step, ×%d)", n)) + // separate comments
					strings.Count(c, fmt.Sprintf("(×%d, the same comment)", n)) // the living comment's step
			}
			wantNoted := 0
			if loop == "planning" {
				wantNoted = 1
			}
			if shown != 1 || noted != wantNoted {
				t.Errorf("the comment shown %d times, the repeats noted %d times; want 1 and %d:\n%v", shown, noted, wantNoted, w.comments)
			}
		})
	}
}
