package engine

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits of the compact parameter summary (the JSON protocol's catalog).
const (
	// maxParamDepth is how deep nested objects are spelt out; deeper ones
	// read "object".
	maxParamDepth = 3
	// maxParamDescription caps one parameter's description: two or three
	// sentences, enough for what servers write ("Repository owner", a list
	// of a method's options), not for the essays a few write. On
	// github-mcp-server's 44 default tools the cap saves 2 KB of 35 KB.
	maxParamDescription = 300
	// maxEnumValues is how many values of an enum are listed.
	maxEnumValues = 20
)

// jsonSchema is the part of a JSON Schema the summary reads.
type jsonSchema struct {
	Type        json.RawMessage        `json:"type"` // a name or a list of names
	Description string                 `json:"description"`
	Properties  map[string]*jsonSchema `json:"properties"`
	Required    []string               `json:"required"`
	Items       json.RawMessage        `json:"items"` // a schema, or a list of them (tuples)
	Enum        []json.RawMessage      `json:"enum"`
	Const       json.RawMessage        `json:"const"`
	Default     json.RawMessage        `json:"default"`
	AnyOf       []*jsonSchema          `json:"anyOf"`
	OneOf       []*jsonSchema          `json:"oneOf"`
	Ref         string                 `json:"$ref"`
	Defs        map[string]*jsonSchema `json:"$defs"`
	Definitions map[string]*jsonSchema `json:"definitions"`
}

// paramSummary renders a tool's input schema as one compact line for the
// JSON protocol's catalog: required arguments first, in the schema's
// order, then optional ones ("?") by name; each with its type, default and
// short description, e.g.
//
//	path string; edits {oldText string (Text to search for), newText string}[]; dryRun? boolean = false (Preview changes)
//
// A schema it cannot read is given as compact JSON, so nothing the model
// needs is lost.
func paramSummary(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "none"
	}
	var root jsonSchema
	if err := json.Unmarshal(raw, &root); err != nil {
		return compactJSON(raw)
	}
	r := summary{root: &root}
	if len(root.Properties) == 0 {
		if t := r.typ(&root, 0); t != "object" && t != "any" {
			return compactJSON(raw) // not an object of named arguments
		}
		return "none"
	}
	return r.fields(&root, 0, "; ")
}

type summary struct{ root *jsonSchema }

// fields lists the properties of s, joined by sep.
func (r summary) fields(s *jsonSchema, depth int, sep string) string {
	names := make([]string, 0, len(s.Properties))
	for _, n := range s.Required {
		if _, ok := s.Properties[n]; ok && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	required := len(names)
	var optional []string
	for n := range s.Properties {
		if !slices.Contains(names[:required], n) {
			optional = append(optional, n)
		}
	}
	slices.Sort(optional)
	names = append(names, optional...)
	parts := make([]string, 0, len(names))
	for i, n := range names {
		p := s.Properties[n]
		var b strings.Builder
		b.WriteString(n)
		if i >= required {
			b.WriteByte('?')
		}
		b.WriteString(" " + r.typ(p, depth+1))
		if p != nil && len(p.Default) > 0 {
			b.WriteString(" = " + compactJSON(p.Default))
		}
		if p != nil && strings.TrimSpace(p.Description) != "" {
			b.WriteString(" (" + clip(oneLine(p.Description), maxParamDescription) + ")")
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, sep)
}

// typ is the type of s: a name, alternatives joined by "|", an enum's
// values, T[] for an array, {…} for an object.
func (r summary) typ(s *jsonSchema, depth int) string {
	if s == nil {
		return "any"
	}
	if s.Ref != "" {
		if depth > maxParamDepth {
			return "object"
		}
		return r.typ(r.resolve(s.Ref), depth+1)
	}
	if len(s.Enum) > 0 {
		vals := make([]string, 0, min(len(s.Enum), maxEnumValues)+1)
		for i, v := range s.Enum {
			if i == maxEnumValues {
				vals = append(vals, "…")
				break
			}
			vals = append(vals, compactJSON(v))
		}
		return strings.Join(vals, "|")
	}
	if len(s.Const) > 0 {
		return compactJSON(s.Const)
	}
	if alts := append(slices.Clip(s.AnyOf), s.OneOf...); len(alts) > 0 {
		var ts []string
		for _, a := range alts {
			if t := r.typ(a, depth); t != "null" && !slices.Contains(ts, t) {
				ts = append(ts, t)
			}
		}
		return strings.Join(ts, "|")
	}
	names := typeNames(s.Type)
	switch {
	case len(names) == 1 && names[0] == "null":
		return "null"
	case slices.Contains(names, "array") || len(s.Items) > 0:
		return r.array(s, depth)
	case slices.Contains(names, "object") || len(s.Properties) > 0:
		if len(s.Properties) == 0 || depth > maxParamDepth {
			return "object"
		}
		return "{" + r.fields(s, depth, ", ") + "}"
	case len(names) == 0:
		return "any"
	}
	return strings.Join(names, "|")
}

func (r summary) array(s *jsonSchema, depth int) string {
	var item jsonSchema
	if len(s.Items) == 0 || json.Unmarshal(s.Items, &item) != nil {
		return "array"
	}
	t := r.typ(&item, depth)
	if strings.Contains(t, "|") && !strings.HasPrefix(t, "{") {
		t = "(" + t + ")"
	}
	return t + "[]"
}

// resolve finds a local reference ("#/$defs/X" or "#/definitions/X").
func (r summary) resolve(ref string) *jsonSchema {
	if name, ok := strings.CutPrefix(ref, "#/$defs/"); ok {
		return r.root.Defs[name]
	}
	if name, ok := strings.CutPrefix(ref, "#/definitions/"); ok {
		return r.root.Definitions[name]
	}
	return nil
}

// typeNames reads "type": a name or a list of names; "null" beside other
// names is left out (an optional value says as much).
func typeNames(raw json.RawMessage) []string {
	var many []string
	if json.Unmarshal(raw, &many) != nil {
		var one string
		if json.Unmarshal(raw, &one) != nil || one == "" {
			return nil
		}
		many = []string{one}
	}
	many = slices.DeleteFunc(many, func(t string) bool { return t == "" })
	if len(many) > 1 {
		many = slices.DeleteFunc(many, func(t string) bool { return t == "null" })
	}
	return many
}

// clip cuts s to at most n bytes at a word boundary, marking the cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := s[:n]
	for !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	if i := strings.LastIndexByte(cut, ' '); i > n/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,;:.") + "…"
}

// brief is the first sentence of a description, on one line, at most n
// bytes: what the system prompt says of a tool whose full description is
// in the native tool definitions.
func brief(desc string, n int) string {
	s := oneLine(desc)
	if i := strings.Index(s, ". "); i >= 0 && i < n {
		s = s[:i+1]
	}
	return clip(s, n)
}
