package toolhost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// The JSON Schema versions the validator knows ($schema, without a final
// "#"). A schema of another version is not used: a call refused by the wrong
// rules would never reach a server that accepts it.
var (
	draft07   = []string{"http://json-schema.org/draft-07/schema", "https://json-schema.org/draft-07/schema"}
	draft2020 = "https://json-schema.org/draft/2020-12/schema"
)

// resolveSchema prepares a tool's input schema for checking arguments, or
// says why it cannot be used.
func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("reading it: %w", err)
	}
	switch v := strings.TrimSuffix(s.Schema, "#"); {
	case v == "":
	case v == draft07[0] || v == draft07[1]:
		s.Schema = v + "#"
	case v == draft2020:
		s.Schema = v
	default:
		return nil, fmt.Errorf("the validator does not know JSON Schema %q", s.Schema)
	}
	return s.Resolve(nil)
}

// checkArgs validates args, one JSON object, against the tool's input schema
// (nil: not checked), and returns what is wrong, or "".
func checkArgs(schema *jsonschema.Resolved, args json.RawMessage) string {
	if schema == nil {
		return ""
	}
	// Decoded again without parseArgs' json.Number, which the validator
	// takes for a string.
	v := map[string]any{}
	if trimmed := bytes.TrimSpace(args); len(trimmed) > 0 && string(trimmed) != "null" {
		if err := json.Unmarshal(trimmed, &v); err != nil {
			return err.Error() // not reached: parseArgs has read it
		}
	}
	err := schema.Validate(v)
	if err == nil {
		return ""
	}
	return describe(err.Error())
}

// describe rewrites a validation error of the form "validating root:
// validating /properties/a: type: ..." as `argument "a": type: ...`: the
// innermost schema location, named as the argument it checks.
func describe(msg string) string {
	where := ""
	for {
		rest, ok := strings.CutPrefix(msg, "validating ")
		if !ok {
			break
		}
		loc, tail, ok := strings.Cut(rest, ": ")
		if !ok {
			break
		}
		where, msg = loc, tail
	}
	if name := argumentOf(where); name != "" {
		return fmt.Sprintf("argument %q: %s", name, msg)
	}
	return msg
}

// argumentOf names the argument a schema location checks ("/properties/a/
// items/properties/b" → "a[].b"), as far as the location follows the
// arguments' own structure; "" for the arguments as a whole.
func argumentOf(loc string) string {
	if !strings.HasPrefix(loc, "/") {
		return ""
	}
	segs := strings.Split(loc[1:], "/")
	var b strings.Builder
	for i := 0; i < len(segs); i++ {
		switch {
		case segs[i] == "properties" && i+1 < len(segs):
			i++
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(strings.NewReplacer("~1", "/", "~0", "~").Replace(segs[i]))
		case segs[i] == "items" && b.Len() > 0:
			b.WriteString("[]")
		default:
			return b.String()
		}
	}
	return b.String()
}
