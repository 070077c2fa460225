package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// A server that enforces a reply schema (Ollama's format, the
// response_format of OpenAI-compatible servers) turns it into a grammar:
// the model cannot write a reply that does not match. One that honours
// tool_choice "required" cannot answer without a tool call. Options
// EnforceFormat and HonourToolChoice make the scripted server hold its
// script to the same rules, so a test proves that what the engine sends
// admits every reply it needs; Honours makes it answer as such a model
// would, for the probes of `doctor`.

// Honours says what of a request's constraints a server enforces.
type Honours struct {
	Format     bool // a reply schema (Ollama's format, OpenAI's response_format)
	ToolChoice bool // tool_choice "required"
}

// Answer is what a model under a server that enforces h would be made to
// answer r: with the schema enforced, the minimal instance of the
// request's schema as content; with tool_choice required honoured, a call
// of the first tool offered with the minimal instance of its parameters.
// It is nil when h enforces nothing r asks for: the model answers as it
// likes.
func (h Honours) Answer(r Received) (Step, error) {
	switch {
	case h.Format && r.Format != nil:
		v, err := Instance(r.Format)
		if err != nil {
			return nil, err
		}
		return Reply{Content: string(v)}, nil
	case h.ToolChoice && r.ToolChoice == "required" && len(r.Tools) > 0:
		params := r.Tools[0].Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type": "object"}`)
		}
		args, err := Instance(params)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", r.Tools[0].Name, err)
		}
		return Reply{ToolCalls: []Call{{Name: r.Tools[0].Name, Args: args}}}, nil
	}
	return nil, nil
}

// Matches checks content against schema as an enforcing server would have
// generated it: one JSON value, nothing around it, valid against the
// schema. It returns why not, or nil.
func Matches(schema json.RawMessage, content string) error {
	rs, err := resolve(schema)
	if err != nil {
		return err
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(content))
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("the content is not JSON: %w", err)
	}
	if dec.More() {
		return errors.New("the content holds more than one JSON value")
	}
	return rs.Validate(v)
}

func resolve(schema json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("reading the schema: %w", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("resolving the schema: %w", err)
	}
	return rs, nil
}

// Instance is the minimal instance of schema: the required properties
// only, the first branch of anyOf and oneOf, the first value of an enum,
// minItems items, strings of minLength "x"s, numbers at their minimum,
// false. It knows the subset of JSON Schema the servers' grammar engines
// share (type, properties, required, additionalProperties, items,
// minItems, maxItems, minLength, enum, const, anyOf, oneOf) and refuses
// the rest, so that a schema the engines could not enforce fails here too.
func Instance(schema json.RawMessage) (json.RawMessage, error) {
	root, err := decodeSchema(schema)
	if err != nil {
		return nil, err
	}
	v, err := generator{}.value(root, "")
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// Full is the instance of schema with every optional property and an item
// in every array, each as Instance makes it.
func Full(schema json.RawMessage) (json.RawMessage, error) {
	root, err := decodeSchema(schema)
	if err != nil {
		return nil, err
	}
	v, err := generator{full: true}.value(root, "")
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// Instances are instances of schema that between them take every choice
// it offers: the minimal instance, and for every anyOf or oneOf branch and
// every enum value, the minimal instance that takes it.
func Instances(schema json.RawMessage) ([]json.RawMessage, error) {
	root, err := decodeSchema(schema)
	if err != nil {
		return nil, err
	}
	gens := []generator{{}}
	for _, c := range choices(root, "") {
		for i := range c.n {
			gens = append(gens, generator{pick: map[string]int{c.path: i}})
		}
	}
	var out []json.RawMessage
	seen := map[string]bool{}
	for _, g := range gens {
		v, err := g.value(root, "")
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if !seen[string(b)] {
			seen[string(b)] = true
			out = append(out, b)
		}
	}
	return out, nil
}

func decodeSchema(schema json.RawMessage) (map[string]any, error) {
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("reading the schema: %w", err)
	}
	return root, nil
}

// known are the keywords Instance understands; others are refused, but
// for those that only describe.
var known = []string{"type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
	"minLength", "maxLength", "enum", "const", "anyOf", "oneOf", "minimum", "maximum", "description", "title", "$schema"}

// generator makes one instance: pick chooses, by the schema path of a
// choice (an enum, an anyOf or oneOf), which alternative to take; full
// takes every optional property and an item in every array.
type generator struct {
	pick map[string]int
	full bool
}

// choice returns the alternative to take at path: the one picked there, or
// the one leading to a pick further down, or the first.
func (g generator) choice(path, branch string) int {
	if i, ok := g.pick[path]; ok {
		return i
	}
	for p := range g.pick {
		if rest, ok := strings.CutPrefix(p, path+"/"+branch+"/"); ok {
			i, err := strconv.Atoi(strings.SplitN(rest, "/", 2)[0])
			if err == nil {
				return i
			}
		}
	}
	return 0
}

// under reports whether a pick lies below path.
func (g generator) under(path string) bool {
	for p := range g.pick {
		if strings.HasPrefix(p, path+"/") || p == path {
			return true
		}
	}
	return false
}

func (g generator) value(s map[string]any, path string) (any, error) {
	for k := range s {
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("%s: keyword %q is not in the subset the grammar engines share", orRoot(path), k)
		}
	}
	if c, ok := s["const"]; ok {
		return c, nil
	}
	if e, ok := s["enum"].([]any); ok {
		if len(e) == 0 {
			return nil, fmt.Errorf("%s: an empty enum admits nothing", orRoot(path))
		}
		return e[min(g.choice(path, ""), len(e)-1)], nil
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[kw].([]any); ok {
			if len(alts) == 0 {
				return nil, fmt.Errorf("%s: an empty %s admits nothing", orRoot(path), kw)
			}
			i := min(g.choice(path, kw), len(alts)-1)
			sub, ok := alts[i].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s/%s/%d: not a schema object", orRoot(path), kw, i)
			}
			return g.value(sub, fmt.Sprintf("%s/%s/%d", path, kw, i))
		}
	}
	typ := typeOf(s)
	switch typ {
	case "object":
		return g.object(s, path)
	case "array":
		n := intOf(s["minItems"])
		if n == 0 && (g.full || g.under(path+"/items")) {
			n = 1
		}
		if m, ok := s["maxItems"]; ok {
			n = min(n, intOf(m))
		}
		items, _ := s["items"].(map[string]any)
		out := make([]any, 0, n)
		for range n {
			if items == nil {
				out = append(out, "x")
				continue
			}
			v, err := g.value(items, path+"/items")
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case "string":
		return strings.Repeat("x", max(intOf(s["minLength"]), 0)), nil
	case "integer", "number":
		if m, ok := s["minimum"].(json.Number); ok {
			return m, nil
		}
		return 0, nil
	case "boolean":
		return false, nil
	case "null":
		return nil, nil
	}
	return nil, fmt.Errorf("%s: type %q is not known", orRoot(path), typ)
}

func (g generator) object(s map[string]any, path string) (any, error) {
	props, _ := s["properties"].(map[string]any)
	var required []string
	for _, r := range asList(s["required"]) {
		if name, ok := r.(string); ok {
			required = append(required, name)
		}
	}
	out := map[string]any{}
	for name, raw := range props {
		sub, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s/properties/%s: not a schema object", orRoot(path), name)
		}
		p := path + "/properties/" + name
		if !slices.Contains(required, name) && !g.full && !g.under(p) {
			continue
		}
		v, err := g.value(sub, p)
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	for _, name := range required {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("%s: %q is required but has no schema under properties", orRoot(path), name)
		}
	}
	return out, nil
}

// choice is a place where a schema offers alternatives: n of them.
type choice struct {
	path string
	n    int
}

// choices lists every enum, anyOf and oneOf of s with more than one
// alternative, at any depth.
func choices(s map[string]any, path string) []choice {
	var out []choice
	if e, ok := s["enum"].([]any); ok && len(e) > 1 {
		out = append(out, choice{path, len(e)})
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		alts, _ := s[kw].([]any)
		if len(alts) > 1 {
			out = append(out, choice{path, len(alts)})
		}
		for i, a := range alts {
			if sub, ok := a.(map[string]any); ok {
				out = append(out, choices(sub, fmt.Sprintf("%s/%s/%d", path, kw, i))...)
			}
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if sub, ok := props[name].(map[string]any); ok {
				out = append(out, choices(sub, path+"/properties/"+name)...)
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		out = append(out, choices(items, path+"/items")...)
	}
	return out
}

func typeOf(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, v := range t {
			if name, ok := v.(string); ok && name != "null" {
				return name
			}
		}
		return "null"
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	if _, ok := s["items"]; ok {
		return "array"
	}
	return "object" // {}: anything, an object will do
}

func intOf(v any) int {
	if n, ok := v.(json.Number); ok {
		i, err := n.Int64()
		if err == nil {
			return int(i)
		}
	}
	return 0
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func orRoot(path string) string {
	if path == "" {
		return "the schema's root"
	}
	return path
}
