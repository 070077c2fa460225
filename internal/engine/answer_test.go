package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/toolhost"
	"github.com/coding-agent/coding-agent/internal/toolhost/mcptest"
)

func deployQuestion(t *testing.T) toolhost.Question {
	b, err := json.Marshal(mcptest.DeploySchema)
	if err != nil {
		t.Fatal(err)
	}
	return toolhost.Question{Server: "deployer", Message: "Where?", Schema: b}
}

// A reply is read into the question's fields as people write them: a JSON
// object, "field: value" lines in any case with list marks, a title for a
// choice, the whole reply for a question with one required field; a reply
// that gives no valid answer says why.
func TestReadAnswer(t *testing.T) {
	q := deployQuestion(t)
	for _, c := range []struct {
		reply string
		want  map[string]any
		why   string // a fragment of why it was not read
	}{
		{reply: `{"environment": "staging", "replicas": 3}`, want: map[string]any{"environment": "staging", "replicas": 3.0}},
		{reply: "Sure:\n```json\n{\"environment\": \"production\"}\n```", want: map[string]any{"environment": "production"}},
		{reply: "- Environment: Staging\n- **replicas**: 2", want: map[string]any{"environment": "staging", "replicas": int64(2)}},
		{reply: "environment = production", want: map[string]any{"environment": "production"}},
		{reply: "staging", want: map[string]any{"environment": "staging"}},
		{reply: "Thanks, staging please", why: "environment"},
		{reply: "staging\nthanks", why: "environment"},
		{reply: "environment: qa", why: "environment"},
		{reply: "environment: staging\nreplicas: 40", why: "replicas"},
		{reply: "replicas: two", why: "replicas"},
	} {
		ans, why := ReadAnswer(q, c.reply, true)
		if c.why != "" {
			if why == "" || !strings.Contains(why, c.why) {
				t.Errorf("%q: read as %+v (why %q), want it unread for %q", c.reply, ans, why, c.why)
			}
			continue
		}
		if why != "" || ans.Action != toolhost.Accept {
			t.Errorf("%q: unread: %s", c.reply, why)
			continue
		}
		if diff := cmp.Diff(c.want, ans.Content); diff != "" {
			t.Errorf("%q: content (-want +got):\n%s", c.reply, diff)
		}
	}
	if ans, why := ReadAnswer(q, "Decline.", true); why != "" || ans.Action != toolhost.Decline {
		t.Errorf("decline: %+v %q", ans, why)
	}
}

// The reference server's form: titles for choices, several choices, yes
// or no, defaults filled in for what the reply leaves out.
func TestReadAnswerRichForm(t *testing.T) {
	schema := `{"type":"object","required":["name"],"properties":{
		"name":{"type":"string","title":"String"},
		"check":{"type":"boolean","title":"Boolean"},
		"integer":{"type":"integer","minimum":1,"maximum":100,"default":42},
		"pet":{"type":"string","enum":["pet-1","pet-2"],"enumNames":["Cats","Dogs"],"default":"pet-1"},
		"hero":{"type":"string","oneOf":[{"const":"hero-1","title":"Superman"},{"const":"hero-2","title":"Wonder Woman"}]},
		"fish":{"type":"array","items":{"anyOf":[{"const":"fish-1","title":"Tuna"},{"const":"fish-2","title":"Salmon"}]}}}}`
	q := toolhost.Question{Server: "everything", Message: "Fill in", Schema: json.RawMessage(schema)}
	ans, why := ReadAnswer(q, "name: Ada Lovelace\ncheck: yes\nhero: wonder woman\npet: Dogs\nfish: Tuna and Salmon", true)
	if why != "" {
		t.Fatalf("unread: %s", why)
	}
	want := map[string]any{"name": "Ada Lovelace", "check": true, "hero": "hero-2", "pet": "pet-2", "fish": []any{"fish-1", "fish-2"}, "integer": 42.0}
	if diff := cmp.Diff(want, ans.Content); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	if fs := q.Fields(); len(fs) != 6 || fs[0].Name != "name" || !fs[0].Required || len(fs[5].Choices) != 2 || fs[5].Choices[1].Title != "Salmon" {
		t.Errorf("fields: %+v", fs)
	}
}

// A free-text field is not filled with prose whole ("Thanks, staging" is
// no branch name), nor with several replies: those go to the model. A
// reply that names the field still fills it.
func TestReadAnswerFreeText(t *testing.T) {
	q := toolhost.Question{Server: "s", Message: "Which branch?",
		Schema: json.RawMessage(`{"type":"object","required":["branch"],"properties":{"branch":{"type":"string"}}}`)}
	for _, reply := range []string{"Thanks, staging", "main"} {
		if ans, why := ReadAnswer(q, reply, true); why == "" {
			t.Errorf("%q read as %+v without the model", reply, ans)
		}
	}
	if ans, why := ReadAnswer(q, "branch: release/1.2", true); why != "" || ans.Content["branch"] != "release/1.2" {
		t.Errorf("a named field: %+v %q", ans, why)
	}
	if _, why := ReadAnswer(deployQuestion(t), "staging", false); why == "" {
		t.Error("a whole reply taken from several comments")
	}
}
