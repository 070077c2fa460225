package llmtest_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ollama/ollama/api"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
)

func ollamaClient(t *testing.T, srv *llmtest.Server) *api.Client {
	t.Helper()
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(u, &http.Client{})
}

// The api client streams unless told otherwise: the server answers NDJSON.
func TestOllamaStreaming(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{Content: "looking", Usage: llmtest.Usage{In: 8, Out: 2},
		ToolCalls: []llmtest.Call{{Name: "grep", Args: map[string]any{"pattern": "TODO"}}}})
	c := ollamaClient(t, srv)

	var chunks []api.ChatResponse
	err := c.Chat(t.Context(), &api.ChatRequest{
		Model:    "m",
		Messages: []api.Message{{Role: "user", Content: "hi"}},
	}, func(r api.ChatResponse) error {
		chunks = append(chunks, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if len(chunks) != 2 || chunks[0].Done || !chunks[1].Done {
		t.Fatalf("chunks = %+v, want a message chunk then a done chunk", chunks)
	}
	msg := chunks[0].Message
	if msg.Content != "looking" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "grep" {
		t.Errorf("message = %+v", msg)
	}
	if v, _ := msg.ToolCalls[0].Function.Arguments.Get("pattern"); v != "TODO" {
		t.Errorf("arguments = %v", msg.ToolCalls[0].Function.Arguments.String())
	}
	if chunks[1].PromptEvalCount != 8 || chunks[1].EvalCount != 2 {
		t.Errorf("counts = %d, %d", chunks[1].PromptEvalCount, chunks[1].EvalCount)
	}
	if !srv.Requests()[0].Stream {
		t.Error("Stream not recorded")
	}
}

func TestOllamaNonStreaming(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Reply{ToolCalls: []llmtest.Call{{ID: "x1", Name: "ls", Args: json.RawMessage(`{"dir":"."}`)}},
		Usage: llmtest.Usage{In: 3, Out: 1}})
	body := `{"model":"m","stream":false,"options":{"num_predict":12},"messages":[
		{"role":"user","content":"hi"},
		{"role":"assistant","content":"","tool_calls":[{"function":{"name":"ls","arguments":{"dir":"/"}}}]},
		{"role":"tool","tool_name":"ls","content":"a b"}]}`
	status, answer := post(t, srv.URL()+"/api/chat", body)
	if status != http.StatusOK || strings.Count(answer, "\n") > 0 {
		t.Fatalf("answer %d %q, want one JSON object", status, answer)
	}
	var got struct {
		Message struct {
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string         `json:"name"`
					Arguments map[string]any `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		Done            bool `json:"done"`
		PromptEvalCount int  `json:"prompt_eval_count"`
		EvalCount       int  `json:"eval_count"`
	}
	if err := json.Unmarshal([]byte(answer), &got); err != nil {
		t.Fatal(err)
	}
	calls := got.Message.ToolCalls
	if !got.Done || got.PromptEvalCount != 3 || got.EvalCount != 1 || len(calls) != 1 ||
		calls[0].ID != "x1" || calls[0].Function.Arguments["dir"] != "." {
		t.Errorf("answer = %s", answer)
	}
	r := srv.Requests()[0]
	want := []llm.Message{
		{Role: llm.User, Content: "hi"},
		{Role: llm.Assistant, ToolCalls: []llm.ToolCall{{Name: "ls", Arguments: json.RawMessage(`{"dir":"/"}`)}}},
		{Role: llm.ToolRole, Name: "ls", Content: "a b"},
	}
	if diff := cmp.Diff(want, r.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if r.Stream || r.MaxTokens != 12 {
		t.Errorf("stream %v, max tokens %d", r.Stream, r.MaxTokens)
	}
}

func TestProbes(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{Models: []string{"qwen3:8b"}})
	c := ollamaClient(t, srv)
	ctx := t.Context()
	if err := c.Heartbeat(ctx); err != nil {
		t.Errorf("Heartbeat: %v", err)
	}
	if v, err := c.Version(ctx); err != nil || v == "" {
		t.Errorf("Version = %q, %v", v, err)
	}
	list, err := c.List(ctx)
	if err != nil || len(list.Models) != 1 || list.Models[0].Name != "qwen3:8b" {
		t.Errorf("List = %+v, %v", list, err)
	}
	resp, err := http.Get(srv.OpenAIURL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var models struct{ Data []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&models); err != nil || len(models.Data) != 1 || models.Data[0].ID != "qwen3:8b" {
		t.Errorf("models = %+v, %v", models, err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("probes recorded as chat requests: %d", n)
	}
}
