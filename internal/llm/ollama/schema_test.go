package ollama

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestToParameters(t *testing.T) {
	cases := []struct {
		name, schema, want string
	}{
		{
			name:   "empty means no arguments",
			schema: ``,
			want:   `{"type":"object","properties":{}}`,
		},
		{
			name: "order, nesting and arrays kept",
			schema: `{"type":"object","$schema":"http://json-schema.org/draft-07/schema#",
				"properties":{
					"zeta":{"type":"string","description":"Last letter."},
					"alpha":{"type":["integer","null"]},
					"opts":{"type":"object","properties":{"b":{"type":"boolean"},"a":{"type":"string"}},"required":["b"]},
					"tags":{"type":"array","items":{"type":"object","properties":{"y":{"type":"number"},"x":{"type":"string"}}}}
				},
				"required":["zeta"],"additionalProperties":false}`,
			want: `{"type":"object","required":["zeta"],"properties":{
				"zeta":{"type":"string","description":"Last letter."},
				"alpha":{"type":["integer","null"]},
				"opts":{"type":"object","properties":{"b":{"type":"boolean"},"a":{"type":"string"}},"required":["b"]},
				"tags":{"type":"array","items":{"type":"object","properties":{"y":{"type":"number"},"x":{"type":"string"}}}}}}`,
		},
		{
			name: "oneOf, const, enum and hints",
			schema: `{"type":"object","properties":{
				"mode":{"oneOf":[{"const":"fast"},{"type":"integer","minimum":1}]},
				"level":{"type":"string","enum":["a","b"],"default":"a"},
				"url":{"type":"string","format":"uri","description":"Where."},
				"env":{"type":"object","additionalProperties":{"type":"string"}}}}`,
			want: `{"type":"object","properties":{
				"mode":{"anyOf":[{"enum":["fast"]},{"type":"integer","description":"(minimum: 1)"}]},
				"level":{"type":"string","description":"(default: \"a\")","enum":["a","b"]},
				"url":{"type":"string","description":"Where. (format: \"uri\")"},
				"env":{"type":"object","description":"(additionalProperties: {\"type\":\"string\"})"}}}`,
		},
		{
			name: "refs and allOf inlined",
			schema: `{"type":"object","$defs":{"Pos":{"type":"object","properties":{"line":{"type":"integer"}},"required":["line"]}},
				"properties":{
					"at":{"$ref":"#/$defs/Pos","description":"Where to edit."},
					"span":{"allOf":[{"$ref":"#/$defs/Pos"},{"properties":{"end":{"type":"integer"}},"required":["end"]}]},
					"again":{"$ref":"#/properties/at"},
					"lost":{"$ref":"https://example.com/schema"}}}`,
			want: `{"type":"object","properties":{
				"at":{"type":"object","description":"Where to edit.","properties":{"line":{"type":"integer"}},"required":["line"]},
				"span":{"type":"object","properties":{"line":{"type":"integer"},"end":{"type":"integer"}},"required":["line","end"]},
				"again":{"type":"object","description":"Where to edit.","properties":{"line":{"type":"integer"}},"required":["line"]},
				"lost":{"description":"(schema https://example.com/schema)"}}}`,
		},
		{
			name: "recursion stops",
			schema: `{"type":"object","properties":{"tree":{"$ref":"#/definitions/Node"}},
				"definitions":{"Node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/definitions/Node"}}}}}}`,
			want: `{"type":"object","properties":{"tree":` + nest(5) + `}}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			params, err := toParameters(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatalf("toParameters: %v", err)
			}
			got, err := json.Marshal(params)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.Compact(&want, []byte(tc.want)); err != nil {
				t.Fatalf("bad want: %v", err)
			}
			if string(got) != want.String() {
				t.Errorf("got  %s\nwant %s", got, want.String())
			}
		})
	}
}

// nest is the Node schema expanded n times, then cut.
func nest(n int) string {
	if n == 0 {
		return `{"description":"(recursive: see #/definitions/Node)"}`
	}
	return `{"type":"object","properties":{"kids":{"type":"array","items":` + nest(n-1) + `}}}`
}

func TestToParametersRejectsNonObjects(t *testing.T) {
	for _, s := range []string{`[1]`, `"object"`, `{"type":`, `{} {}`} {
		if _, err := toParameters(json.RawMessage(s)); err == nil {
			t.Errorf("toParameters(%s) succeeded", s)
		}
	}
}

func TestToParametersBoundsExpansion(t *testing.T) {
	// Every level refers to the next one eight times: without a budget the
	// expansion would grow eightfold at each of the levels.
	var props []string
	for _, k := range "abcdefgh" {
		props = append(props, `"`+string(k)+`":{"$ref":"#/$defs/L"}`)
	}
	list := "{" + strings.Join(props, ",") + "}"
	schema := `{"type":"object","properties":` + list + `,"$defs":{"L":{"type":"object","properties":` + list + `}}}`
	params, err := toParameters(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(params)
	if len(out) > 200_000 {
		t.Errorf("schema grew to %d bytes", len(out))
	}
}
