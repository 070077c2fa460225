package toolhost

import (
	"encoding/json"
	"testing"
)

// A schema location names the argument it checks, as far as it follows the
// arguments' structure.
func TestArgumentOf(t *testing.T) {
	for loc, want := range map[string]string{
		"root":                                   "",
		"/properties/a":                          "a",
		"/properties/list/items/properties/n":    "list[].n",
		"/properties/a~1b/properties/c~0d":       "a/b.c~d",
		"/properties/x/anyOf/1/properties/y":     "x",
		"/$defs/Edit/properties/oldText":         "",
		"/properties/m/additionalProperties":     "m",
		"/properties/grid/items/items":           "grid[][]",
		"https://example.com/s.json#/properties": "",
	} {
		if got := argumentOf(loc); got != want {
			t.Errorf("argumentOf(%q) = %q, want %q", loc, got, want)
		}
	}
}

// Schemas of the versions the validator knows are used, whatever the
// spelling of $schema; another version is not, rather than being checked
// by the wrong rules.
func TestResolveSchemaVersions(t *testing.T) {
	for schema, usable := range map[string]bool{
		``: true,
		`http://json-schema.org/draft-07/schema#`:       true,
		`http://json-schema.org/draft-07/schema`:        true,
		`https://json-schema.org/draft/2020-12/schema`:  true,
		`https://json-schema.org/draft/2020-12/schema#`: true,
		`https://json-schema.org/draft/2019-09/schema`:  false,
		`http://json-schema.org/draft-04/schema#`:       false,
	} {
		raw, _ := json.Marshal(map[string]any{"$schema": schema, "type": "object",
			"properties": map[string]any{"n": map[string]any{"type": "integer"}}})
		rs, err := resolveSchema(raw)
		if (err == nil) != usable {
			t.Errorf("%q: err = %v, want usable %v", schema, err, usable)
			continue
		}
		if usable {
			if got := checkArgs(rs, json.RawMessage(`{"n": "1"}`)); got != `argument "n": type: 1 has type "string", want "integer"` {
				t.Errorf("%q: check = %q", schema, got)
			}
			if got := checkArgs(rs, json.RawMessage(`{"n": 12345678901234567890}`)); got != "" {
				t.Errorf("%q: a large integer: %q", schema, got)
			}
		}
	}
}
