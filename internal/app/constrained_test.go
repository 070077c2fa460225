package app_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// llm.constrained: auto reaches the engine: in the JSON protocol every
// request carries the reply's schema, which the model's replies match;
// with native calls every request asks for tool_choice "required" (on the
// OpenAI wire) and offers the finish tool, whose call ends the task done.
func TestConstrainedConfigHoldsTheReplies(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	for _, provider := range []string{config.ProviderOpenAI, config.ProviderOllama} {
		for _, native := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/native=%v", provider, native), func(t *testing.T) {
				respond := func(e *env, r llmtest.Received) llmtest.Step {
					if r.Format != nil {
						// The replies writeThenDone writes match the schema.
						step := writeThenDone(e, r)
						if err := llmtest.Matches(r.Format, step.(llmtest.Reply).Content); err != nil {
							e.t.Errorf("request %d: the reply does not match the schema sent: %v", r.N, err)
						}
						return step
					}
					if native && toolResults(r) > 0 {
						return llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "task__finish", Args: map[string]string{"comment": "Created hello.txt with a greeting."}}}}
					}
					return writeThenDone(e, r)
				}
				e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: provider, native: native, respond: respond})
				e.cfg.LLM.Constrained = config.ConstrainedAuto
				if err := e.run(context.Background()); err != nil {
					t.Fatalf("run: %v", err)
				}
				if l := e.labels(); !slices.Equal(l, []string{"bug", "coding agent done"}) {
					t.Errorf("final labels %v, want done", l)
				}
				for _, r := range e.model.Requests() {
					wantChoice := ""
					if native && provider == config.ProviderOpenAI {
						wantChoice = "required"
					}
					if (r.Format != nil) == native || r.ToolChoice != wantChoice || slices.Contains(r.ToolNames, "task__finish") != native {
						t.Errorf("request %d: format %v, tool_choice %q, tools %v", r.N, r.Format != nil, r.ToolChoice, r.ToolNames)
					}
				}
			})
		}
	}
}
