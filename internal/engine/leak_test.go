package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/sanitize"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

// A configured secret that a tool prints in every encoding it knows
// (mcptest.Encodings: base64, base32, hex, URL, JSON \u escapes, HTML
// references among them) reaches no request the engine sends the model,
// on either wire: the host redacts the result before the engine puts it in
// the conversation, and the model is told a secret stood there.
func TestToolResultsReachTheModelRedacted(t *testing.T) {
	const secret = "Zq8xR2mN5vB7kL3pW9tY4hJ6cD1fG0sQ" // of no known shape: only the configured-secret matching finds it
	t.Setenv("CA_LEAK_TEST", secret)                  // the in-memory server's environment is the test's
	for _, wire := range []string{llmtest.WireOpenAI, llmtest.WireOllama} {
		t.Run(wire, func(t *testing.T) {
			h, err := toolhost.Start(t.Context(), toolhost.Options{
				Servers: []toolhost.ServerConfig{{Name: "test"}},
				Connect: func(ctx context.Context, _ toolhost.ServerConfig) (mcp.Transport, error) {
					serverT, clientT := mcp.NewInMemoryTransports()
					ss, err := mcptest.NewServer(mcptest.ServerOptions{Leaks: true}).Connect(ctx, serverT, nil)
					if err != nil {
						return nil, err
					}
					t.Cleanup(func() { _ = ss.Close() })
					return clientT, nil
				},
				Redact: sanitize.NewRedactor([]string{secret}).Redact,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			srv := llmtest.NewServer(t, llmtest.Options{})
			srv.Script(llmtest.Reply{Content: cmd("test/leak_env", `{"name": "CA_LEAK_TEST"}`, "Reading the variable.")},
				llmtest.Reply{Content: `{"done": true, "comment": "Read it."}`})
			w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
			e, err := engine.New(engine.Options{LLM: client(t, wire, srv), Tools: h, State: w})
			if err != nil {
				t.Fatal(err)
			}
			l, err := agent.New(e, agent.Options{})
			if err != nil {
				t.Fatal(err)
			}
			in := engine.Input{Task: task.Task{Ref: ref, Title: "Read a variable", Body: "Call test/leak_env."}, Post: w}
			if out, err := l.Run(t.Context(), in); err != nil || out.End != engine.Done {
				t.Fatalf("run: %+v, %v", out, err)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model requests, want 2", len(reqs))
			}
			result := reqs[1].Messages[len(reqs[1].Messages)-1].Content
			for _, form := range []string{"base32: ", "base32hex: ", "json: ", "jsonmixed: ", "html: ", "htmlhex: ", "base64: ", "hex: "} {
				if !strings.Contains(result, form+sanitize.Redacted) {
					t.Errorf("the tool result the model got lacks %q[REDACTED]:\n%s", form, result)
				}
			}
			for _, r := range reqs {
				if w := mcptest.Leaked(string(r.Body), secret); w != "" {
					t.Errorf("request %d holds %q of the secret:\n%s", r.N, w, r.Body)
				}
			}
		})
	}
}
