package llmtest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
)

// MistralToolCallIDs refuses ids that are not nine letters and digits on
// the OpenAI wire, as vLLM with a Mistral model does, without consuming a
// step; Ollama's wire takes any id.
func TestMistralToolCallIDs(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Options{MistralToolCallIDs: true})
	srv.Script(llmtest.Reply{Content: "ok"}, llmtest.Reply{Content: "ok"})
	history := func(id, args string) string {
		return `"messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"f","arguments":` + args + `}}]},` +
			`{"role":"tool","tool_call_id":"` + id + `","content":"x"}]`
	}
	status, body := post(t, srv.OpenAIURL()+"/chat/completions", `{"model":"m",`+history("call_3_0", `"{}"`)+`}`)
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatal(err)
	}
	if status != http.StatusBadRequest || e.Error.Message != "Tool call id was call_3_0 but must be a-z, A-Z, 0-9, with a length of 9." ||
		e.Error.Type != "BadRequestError" {
		t.Errorf("answer %d %s, want vLLM's refusal", status, body)
	}
	if status, body := post(t, srv.OpenAIURL()+"/chat/completions", `{"model":"m",`+history("a1B2c3D4e", `"{}"`)+`}`); status != http.StatusOK {
		t.Errorf("a valid id: %d %s", status, body)
	}
	if status, body := post(t, srv.URL()+"/api/chat", `{"model":"m","stream":false,`+history("call_3_0", `{}`)+`}`); status != http.StatusOK {
		t.Errorf("ollama: %d %s", status, body)
	}
	if n := srv.Remaining(); n != 0 {
		t.Errorf("%d steps left, want the refused request to consume none", n)
	}
}

// Streamed answers a stream whatever was asked: server-sent events ending
// with [DONE] on the OpenAI wire, JSON lines ending with done on Ollama's;
// Cut leaves the end out.
func TestStreamed(t *testing.T) {
	reply := llmtest.Reply{Content: "hello there", ToolCalls: []llmtest.Call{{Name: "f", Args: map[string]string{"a": "b"}}},
		Usage: llmtest.Usage{In: 3, Out: 4}}
	srv := llmtest.NewServer(t, llmtest.Options{})
	srv.Script(llmtest.Streamed{Reply: reply}, llmtest.Streamed{Reply: reply, Cut: true},
		llmtest.Streamed{Reply: reply}, llmtest.Streamed{Reply: reply, Cut: true})
	_, sse := post(t, srv.OpenAIURL()+"/chat/completions", `{"model":"m",`+userOnly+`}`)
	_, cut := post(t, srv.OpenAIURL()+"/chat/completions", `{"model":"m",`+userOnly+`}`)
	if !strings.HasPrefix(sse, "data: {") || !strings.HasSuffix(sse, "data: [DONE]\n\n") ||
		!strings.Contains(sse, `"finish_reason":"tool_calls"`) || !strings.Contains(sse, `"completion_tokens":4`) {
		t.Errorf("event stream:\n%s", sse)
	}
	if strings.Contains(cut, "[DONE]") || strings.Contains(cut, `"finish_reason":"tool_calls"`) {
		t.Errorf("cut event stream has an end:\n%s", cut)
	}
	_, lines := post(t, srv.URL()+"/api/chat", `{"model":"m","stream":false,`+userOnly+`}`)
	_, cutLines := post(t, srv.URL()+"/api/chat", `{"model":"m","stream":false,`+userOnly+`}`)
	all := strings.Split(strings.TrimSpace(lines), "\n")
	if len(all) < 3 || !strings.Contains(all[len(all)-1], `"done":true`) {
		t.Errorf("JSON lines:\n%s", lines)
	}
	if strings.Contains(cutLines, `"done":true`) {
		t.Errorf("cut JSON lines have an end:\n%s", cutLines)
	}
}
