package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/tokens"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// manyTools is an MCP server with n tools, tool_001 … tool_n, each saying
// which it is.
func manyTools(t *testing.T, n int, note string) *toolhost.Host {
	t.Helper()
	type args struct {
		Text string `json:"text" jsonschema:"what to say"`
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "many", Version: "1"}, nil)
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("tool_%03d", i)
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: fmt.Sprintf("Answers as tool number %d of the many server, which files reports about widgets of kind %d.", i, i)},
			func(_ context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " says " + in.Text}}}, nil, nil
			})
	}
	h, err := toolhost.Start(t.Context(), toolhost.Options{
		Servers: []toolhost.ServerConfig{{Name: "many", SystemPrompt: note}},
		Connect: func(ctx context.Context, _ toolhost.ServerConfig) (mcp.Transport, error) {
			st, ct := mcp.NewInMemoryTransports()
			ss, err := s.Connect(ctx, st, nil)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { _ = ss.Close() })
			return ct, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// seeker searches the catalog for tool 136, calls it, and finishes.
type seeker struct {
	requests []llm.Request
}

func (s *seeker) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	s.requests = append(s.requests, req)
	call := func(name, args string) llm.Response {
		return llm.Response{Message: llm.Message{Content: "", ToolCalls: []llm.ToolCall{{ID: fmt.Sprint("c", len(s.requests)), Name: name, Arguments: json.RawMessage(args)}}}}
	}
	switch len(s.requests) {
	case 1:
		return call("catalog__find_tools", `{"query": "number 136"}`), nil
	case 2:
		return call("many__tool_136", `{"text": "hello"}`), nil
	}
	return llm.Response{Message: llm.Message{Content: `{"done": true, "comment": "tool 136 said hello"}`}}, nil
}

// A 140-tool server with OpenAI's limit of 128 tools a request: the model
// reaches the 136th through the catalog search and finishes; no request
// carries more than 128 tools or any schema twice.
func TestToolBeyondTheProviderLimitIsReached(t *testing.T) {
	host := manyTools(t, 140, "")
	w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
	m := &seeker{}
	e, err := engine.New(engine.Options{LLM: m, Tools: host, State: w, FunctionCalling: true, MaxTools: 128,
		Budget: engine.Budget{ContextLength: 128000, Reserve: 4096, Counter: tokens.ForModel("gpt-4o")}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := agent.New(e, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := l.Run(t.Context(), engine.Input{Task: task.Task{Ref: ref, Title: "Ask the right tool"}, Post: w})
	if err != nil || out.End != engine.Done {
		t.Fatalf("%+v %v", out, err)
	}
	for i, req := range m.requests {
		if len(req.Tools) > 128 {
			t.Errorf("request %d offers %d tools", i+1, len(req.Tools))
		}
		seen := map[string]bool{}
		for _, tool := range req.Tools {
			if seen[tool.Name] {
				t.Errorf("request %d offers %s twice", i+1, tool.Name)
			}
			seen[tool.Name] = true
		}
		if sys := req.Messages[0].Content; strings.Contains(sys, `"properties"`) {
			t.Errorf("request %d's system prompt carries a schema", i+1)
		}
	}
	has := func(req llm.Request, name string) bool {
		for _, tool := range req.Tools {
			if tool.Name == name {
				return true
			}
		}
		return false
	}
	if has(m.requests[0], "many__tool_136") || !has(m.requests[0], "catalog__find_tools") {
		t.Error("the first request should offer the search tool and not tool 136")
	}
	if !has(m.requests[1], "many__tool_136") {
		t.Error("the search did not make tool 136 callable")
	}
	last := m.requests[2].Messages[len(m.requests[2].Messages)-1].Content
	if !strings.Contains(last, "tool_136 says hello") {
		t.Errorf("tool 136 did not run: %q", last)
	}
}

// A catalog that cannot fit a 4096-token window is refused before any task
// runs, naming the server, its tools, the tokens and the fix.
func TestCatalogThatCannotFitIsRefused(t *testing.T) {
	host := manyTools(t, 140, strings.Repeat("Always describe the widget's kind, size and owner before calling a tool. ", 60))
	e, err := engine.New(engine.Options{LLM: &seeker{}, Tools: host, State: &world{}, FunctionCalling: true,
		Budget: engine.Budget{ContextLength: 4096, Reserve: 1024, Counter: tokens.ForModel("gpt-4o")}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = agent.New(e, agent.Options{})
	if err == nil {
		t.Fatal("the catalog was accepted")
	}
	for _, want := range []string{"many (140 tools)", "3072-token budget", "context_length 4096", "mcp_servers[].tools.deny"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}
