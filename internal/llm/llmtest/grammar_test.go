package llmtest_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
)

const replySchema = `{"anyOf": [
	{"type": "object", "additionalProperties": false, "required": ["comment", "command"], "properties": {
		"comment": {"type": "string"},
		"command": {"type": "object", "additionalProperties": false, "required": ["tool", "args"], "properties": {
			"tool": {"type": "string", "enum": ["fs/read", "fs/write"]}, "args": {"type": "object"}}}}},
	{"type": "object", "additionalProperties": false, "required": ["done", "comment"], "properties": {
		"done": {"const": true}, "comment": {"type": "string", "minLength": 2}}}]}`

// The minimal instance takes the first branch and the first value; the
// instances between them take every branch and every enum value, and all
// match the schema; the full one has every optional property.
func TestInstancesCoverEveryChoice(t *testing.T) {
	min, err := llmtest.Instance(json.RawMessage(replySchema))
	if err != nil {
		t.Fatal(err)
	}
	if string(min) != `{"command":{"args":{},"tool":"fs/read"},"comment":""}` {
		t.Errorf("minimal instance %s", min)
	}
	all, err := llmtest.Instances(json.RawMessage(replySchema))
	if err != nil {
		t.Fatal(err)
	}
	full, err := llmtest.Full(json.RawMessage(`{"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"type": "integer", "minimum": 3}}}}`))
	if err != nil || string(full) != `{"a":"","b":[3]}` {
		t.Errorf("full instance %s, %v", full, err)
	}
	var texts []string
	for _, v := range all {
		if err := llmtest.Matches(json.RawMessage(replySchema), string(v)); err != nil {
			t.Errorf("%s does not match: %v", v, err)
		}
		texts = append(texts, string(v))
	}
	for _, want := range []string{`"tool":"fs/write"`, `"done":true`, `"comment":"xx"`} {
		if !slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("no instance holds %s: %q", want, texts)
		}
	}
}

// A schema the grammar engines would refuse (a keyword outside their
// shared subset) is refused, not answered with an instance it never
// constrained.
func TestInstanceRefusesWhatGrammarsDoNotShare(t *testing.T) {
	for _, s := range []string{
		`{"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "required": ["a"]}`,
		`{"allOf": [{"type": "string"}]}`,
		`{"type": "string", "pattern": "^a$"}`,
		`{"enum": []}`,
	} {
		if v, err := llmtest.Instance(json.RawMessage(s)); err == nil {
			t.Errorf("%s: instance %s, want an error", s, v)
		}
	}
}

// A server that enforces the reply schema fails the test on a scripted
// reply that does not match the schema the request sent, on both wires,
// and records the schema.
func TestEnforcingServerRefusesWhatTheSchemaForbids(t *testing.T) {
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m",` + userOnly +
			`,"response_format":{"type":"json_schema","json_schema":{"name":"reply","schema":` + replySchema + `}}}`},
		{"/api/chat", `{"model":"m","stream":false,` + userOnly + `,"format":` + replySchema + `}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			rec := &recTB{TB: t}
			srv := llmtest.NewServer(rec, llmtest.Options{EnforceFormat: true})
			srv.Script(llmtest.Reply{Content: `{"done": true, "comment": "ok"}`},
				llmtest.Reply{Content: `Done! {"done": true, "comment": "ok"}`})
			if status, body := post(t, srv.URL()+tc.path, tc.body); status != http.StatusOK {
				t.Fatalf("matching reply: %d %s", status, body)
			}
			if status, _ := post(t, srv.URL()+tc.path, tc.body); status != http.StatusInternalServerError {
				t.Errorf("reply with prose around the object: status %d, want 500", status)
			}
			errs := rec.errors()
			if len(errs) != 1 || !strings.Contains(errs[0], "does not match the reply schema") {
				t.Errorf("test errors = %q, want one saying the reply does not match", errs)
			}
			if got := srv.Requests()[0].Format; llmtest.Matches(got, `{"done": true, "comment": "ok"}`) != nil {
				t.Errorf("the recorded schema %s is not the one sent", got)
			}
		})
	}
}

// A server that honours tool_choice required fails the test on a scripted
// reply without a tool call; one that does not lets it through.
func TestToolChoiceRequired(t *testing.T) {
	body := `{"model":"m",` + userOnly + `,"tool_choice":"required","tools":[{"type":"function","function":{"name":"greet","parameters":{"type":"object"}}}]}`
	for _, honour := range []bool{true, false} {
		rec := &recTB{TB: t}
		srv := llmtest.NewServer(rec, llmtest.Options{HonourToolChoice: honour})
		srv.Script(llmtest.Reply{Content: "Hello!"})
		status, _ := post(t, srv.OpenAIURL()+"/chat/completions", body)
		if got := srv.Requests()[0].ToolChoice; got != "required" {
			t.Errorf("tool choice recorded %q", got)
		}
		if honour != (status == http.StatusInternalServerError) || honour != (len(rec.errors()) == 1) {
			t.Errorf("honour %v: status %d, errors %q", honour, status, rec.errors())
		}
	}
	rec := &recTB{TB: t}
	srv := llmtest.NewServer(rec, llmtest.Options{})
	srv.Script(llmtest.Reply{})
	if status, _ := post(t, srv.OpenAIURL()+"/chat/completions", `{"model":"m",`+userOnly+`,"tool_choice":"required"}`); status != http.StatusBadRequest {
		t.Errorf("tool_choice required without tools: status %d, want 400", status)
	}
	if len(rec.errors()) != 1 {
		t.Errorf("errors %q, want the invalid request reported", rec.errors())
	}
}

// Honours answers as a model under the server would: the minimal instance
// of the schema, or a call of the first tool, or nothing it enforces.
func TestHonoursAnswer(t *testing.T) {
	r := llmtest.Received{Format: json.RawMessage(replySchema)}
	step, err := llmtest.Honours{Format: true}.Answer(r)
	if err != nil || step.(llmtest.Reply).Content != `{"command":{"args":{},"tool":"fs/read"},"comment":""}` {
		t.Errorf("format honoured: %#v, %v", step, err)
	}
	if step, _ := (llmtest.Honours{ToolChoice: true}).Answer(r); step != nil {
		t.Errorf("only tool_choice honoured, a format asked: %#v, want nothing enforced", step)
	}
	r = llmtest.Received{ToolChoice: "required", Tools: []llm.Tool{{Name: "greet",
		Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1}},"required":["name"]}`)}}}
	step, err = llmtest.Honours{ToolChoice: true}.Answer(r)
	calls := step.(llmtest.Reply).ToolCalls
	if err != nil || len(calls) != 1 || calls[0].Name != "greet" || string(calls[0].Args.(json.RawMessage)) != `{"name":"x"}` {
		t.Errorf("tool_choice honoured: %#v, %v", step, err)
	}
}
